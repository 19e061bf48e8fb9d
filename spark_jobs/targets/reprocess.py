"""Reprocessing the quarantine: a run that replays quarantined records through the pipeline's decoding
and contract as they are now, into the Delta append table, exactly once, and takes those that land
out of the quarantine. It reads the quarantine table, not Kafka (whose retention may have taken the
records long ago), and moves no offset.

    prepare  the run's txn already in the quarantine: nothing to do. The quarantine's files that may
             hold the chosen records (``ReprocessSpec``: offset ranges by their statistics; a time
             window is read). The main table's columns as an append plans them
             (``targets.delta_append``); a quarantine only delta-spark could rewrite is refused.
    write    one Spark job, one task per chosen file: its chosen records (sealed ones opened with the
             tenant's field key) decoded as a Kafka batch is (``DirectWritePlan.decode``), the rows
             that decode and pass the expectations written into the main table's folder. A dry run
             writes nothing and only counts. Skipped when an earlier attempt landed the rows already.
    commit   the main table first, with the run's txn. Then the quarantine: a second Spark job
             rewrites each chosen file without the records the main commit holds (read back from
             that commit's files, so a retry after a crash between the two commits takes out exactly
             what landed), and one commit, with the same txn, swaps the files. A record that still
             fails keeps its quarantine row as it was.

A record quarantined twice (an append-mode replay of its range) lands twice, as the replay's other
records did.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from spark_jobs.columns import QUARANTINE_REASON, RUN_ID
from spark_jobs.contract.sensitive import FieldKey, open_sealed
from spark_jobs.delta_log import STATS_COLUMNS, commit_actions
from spark_jobs.delta_tables.commit import already_committed, commit_files
from spark_jobs.delta_tables.files import FileSet, delete_files, delete_run_files
from spark_jobs.delta_tables.replace import in_ranges, partition_column
from spark_jobs.errors import JobError
from spark_jobs.plans import DataFile, TaskReport
from spark_jobs.table_features import writer_for
from spark_jobs.targets import ALREADY_COMMITTED, Checkpoint, Committed, Reading
from spark_jobs.targets.delta_append import DeltaAppend, spark_may_write

if TYPE_CHECKING:
    from datetime import datetime

    from deltalake import DeltaTable
    from pyspark import SparkContext

    from spark_jobs.delta_tables.direct_write import DirectWritePlan
    from spark_jobs.spec import DeltaTargetSpec, Ranges, ReprocessSpec, RunSpec, Txn
    from spark_jobs.storage import Store

log = logging.getLogger("inlet.delta")

_BATCH_ROWS = 20_000  # quarantine rows decoded at a time: a task holds one batch, not its file
_COORDINATES = list(STATS_COLUMNS)  # (topic, partition, offset): a record's identity in both tables
_LOG_SEARCH = 1_000  # commits of the main table searched back for the run's own
Bounds = dict[str, tuple[Any, Any]]  # (min, max) of each coordinate in a file; (None, None) where unknown
_Unit = TypeVar("_Unit")
_Outcome = TypeVar("_Outcome")


@dataclass(frozen=True)
class Selection:
    """The quarantined records a reprocess chose (pickled to its tasks)."""

    ranges: Ranges | None
    since: datetime | None
    until: datetime | None

    def mask(self, rows: pa.Table) -> pa.ChunkedArray:
        chosen = in_ranges(rows, self.ranges) if self.ranges is not None else pa.chunked_array([pa.repeat(True, rows.num_rows)])
        for bound, compare in ((self.since, pc.greater_equal), (self.until, pc.less)):
            if bound is not None:
                chosen = pc.and_(chosen, pc.fill_null(compare(rows["timestamp"], pa.scalar(bound, rows.schema.field("timestamp").type)), False))
        return chosen


@dataclass(frozen=True)
class QuarantineFile:
    """A file of the quarantine table that may hold chosen records, as its add action names it."""

    path: str  # relative to the table root
    uri: str  # absolute
    size: int
    bounds: Bounds


@dataclass
class QuarantineRewrite:
    """A chosen quarantine file read again after the main commit: the records chosen in it, those the
    commit holds (``landed``), and the file written in its place without them (if any landed)."""

    file: QuarantineFile
    selected: int = 0
    landed: int = 0
    files: list[DataFile] = field(default_factory=list)


class QuarantineReprocess(DeltaAppend):
    """``spec.reprocess``'s quarantined records replayed into ``target``'s table (a ``targets.RunTarget``)."""

    def __init__(self, spec: RunSpec, target: DeltaTargetSpec, checkpoint: Checkpoint) -> None:
        super().__init__(spec, target, checkpoint)
        assert spec.reprocess is not None  # target_for's choice
        self.order: ReprocessSpec = spec.reprocess
        self.selection = Selection(self.order.ranges, self.order.since, self.order.until)
        self.opener = FieldKey.of(spec.contract.field_key) if spec.contract.field_key else None
        self.candidates: list[QuarantineFile] = []
        self.landed_before = False  # an earlier attempt committed the main table: only the quarantine is left

    def prepare(self) -> Committed | None:
        txn = self.spec.txn
        if self.quarantine is None or not self.quarantine.exists():
            return self._nothing("there is no quarantine table")
        if already_committed(self.quarantine, txn):
            log.info("txn %s v%d is already in %s: nothing to do", txn.app_id, txn.version, self.quarantine.uri)
            return ALREADY_COMMITTED
        self.landed_before = already_committed(self.main, txn)
        self._plan_columns()
        if self.main.exists():
            self.writers["main"] = writer_for(self.main.delta(), "append", self.main.uri, spark=spark_may_write(self.main))
        if writer_for(self.quarantine.delta(), "replace", self.quarantine.uri, spark=False) != "delta-rs":
            raise JobError("table_unsupported", f"{self.quarantine.uri}: its features need delta-spark to rewrite it, "
                                                "and a reprocess rewrites the quarantine with delta-rs")
        self.candidates = _candidates(self.quarantine.uri, self.quarantine.delta(), self.order.ranges)
        if not self.candidates:
            return self._nothing("no quarantine file holds records of the chosen ranges")
        log.info("reprocess%s: %d quarantine files may hold chosen records%s", " (dry run)" if self.order.dry_run else "",
                 len(self.candidates), "; the main table holds this run's rows already" if self.landed_before else "")
        return None

    def write(self, reading: Reading) -> list[TaskReport]:
        self.context = reading.context
        if self.landed_before:
            return []
        self._check_spark_writes()
        values = self._json_values(reading.context) if self.spec.source.value_format == "json" else None
        self._check_contract(self.schemas["main"])
        if not self.order.dry_run and self._create_main(self.schemas["main"]):
            self.writers["main"] = writer_for(self.main.delta(), "append", self.main.uri, spark=True)
        plan = self._write_plan(reading, self.schemas["main"], values)
        task = partial(decode_quarantined, plan, self.selection, self.opener, self.order.dry_run)
        return _each(reading.context, self.candidates, task, plan.store, [plan.uri], plan.token)

    def commit(self, reports: list[TaskReport]) -> Committed:
        from spark_jobs.spec import ReprocessCount

        selected, still = sum(r.selected for r in reports), sum(r.quarantined for r in reports)
        if self.order.dry_run or (not self.landed_before and selected == still):  # nothing lands
            counted = ReprocessCount(dry_run=self.order.dry_run, selected=selected, decoded=selected - still,
                                     still_quarantined=still)
            return Committed(quarantined=0, reprocessed=counted)
        self.checkpoint("its Delta commits")
        files = [f for r in reports for f in r.files]
        if not self.landed_before:
            if self._commit_table("main", self.main, files, notes={"inlet.reprocessed_from": self.quarantine_uri}) is None:
                self._delete(files)  # a concurrent attempt of this run committed first: its rows count
            else:
                self.committed.add("main")
        landed = _landed(self.main.store, self.main.uri, self.main.delta(), self.spec.txn)
        rewritten = self._rewrite_quarantine(landed)
        counted = ReprocessCount(dry_run=False, selected=sum(r.selected for r in rewritten),
                                 decoded=sum(r.landed for r in rewritten),
                                 still_quarantined=sum(r.selected - r.landed for r in rewritten))
        return Committed(rows=counted.decoded, quarantined=0, version=self.main.delta().version(),
                         bytes=sum(f.size for f in files) if "main" in self.committed else 0,
                         files=len(files) if "main" in self.committed else 0, reprocessed=counted)

    def discard(self, reports: list[TaskReport]) -> None:
        if "main" not in self.committed:
            self._delete([f for r in reports for f in r.files])

    @property
    def quarantine_uri(self) -> str:
        assert self.quarantine is not None  # by prepare
        return self.quarantine.uri

    def _rewrite_quarantine(self, landed: pa.Table) -> list[QuarantineRewrite]:
        """Each chosen file without the records the main commit holds, swapped in by one commit with
        the run's txn; the files' counts."""
        from deltalake.transaction import RemoveAction

        assert self.quarantine is not None and self.context is not None  # by prepare, write
        token = uuid.uuid4().hex[:12]
        schema = self.schemas["quarantine"]
        task = partial(without_landed, self.quarantine.store, self.quarantine.uri, schema, self.selection, token)
        units = [(f, _within(landed, f.bounds)) for f in self.candidates]
        rewritten = _each(self.context, units, task, self.quarantine.store, [self.quarantine.uri], token)
        now = int(time.time() * 1000)
        removes = [RemoveAction(r.file.path, True, now, r.file.size, {}) for r in rewritten if r.landed]
        adds = [f for r in rewritten for f in r.files]
        try:
            version = commit_files(self.quarantine, self.spec.txn, adds, schema, removes=removes) if removes else None
        except BaseException:
            delete_files(self.quarantine.store, adds, self.main.uri, self.quarantine.uri)
            raise
        if version is None:  # nothing landed here, or a concurrent attempt of this run swapped them first
            delete_files(self.quarantine.store, adds, self.main.uri, self.quarantine.uri)
        log.info("reprocess: %d records landed, %d quarantine files rewritten", sum(r.landed for r in rewritten), len(removes))
        return rewritten

    def _nothing(self, why: str) -> Committed:
        from spark_jobs.spec import ReprocessCount

        log.info("reprocess: %s: nothing to reprocess", why)
        return Committed(reprocessed=ReprocessCount(dry_run=self.order.dry_run))


def _candidates(uri: str, delta: DeltaTable, ranges: Ranges | None) -> list[QuarantineFile]:
    """The quarantine's files whose statistics allow records of ``ranges`` (all of them without ranges)."""
    wanted = [(t, int(p), s, e) for t, ps in (ranges or {}).items() for p, (s, e) in ps.items() if s < e]
    found = []
    for action in pa.table(delta.get_add_actions(flatten=True)).to_pylist():
        bounds = {c: (action.get(f"min.{c}"), action.get(f"max.{c}")) for c in STATS_COLUMNS}
        if ranges is not None and not any(_may_hold(bounds, r) for r in wanted):
            continue
        found.append(QuarantineFile(action["path"], f"{uri.rstrip('/')}/{action['path']}", action["size_bytes"], bounds))
    return found


def _may_hold(bounds: Bounds, wanted: tuple[str, int, int, int]) -> bool:
    topic, partition, start, end = wanted

    def within(column: str, low: Any, high: Any) -> bool:
        lo, hi = bounds[column]
        return lo is None or hi is None or bool(lo <= high and hi >= low)

    return within("topic", topic, topic) and within("partition", partition, partition) and within("offset", start, end - 1)


def _within(landed: pa.Table, bounds: Bounds) -> pa.Table:
    """The landed coordinates a quarantine file's statistics allow: each task gets only its own."""
    mask = pa.chunked_array([pa.repeat(True, landed.num_rows)])
    for column in STATS_COLUMNS:
        low, high = bounds[column]
        if low is not None and high is not None:
            mask = pc.and_(mask, pc.and_(pc.greater_equal(landed[column], low), pc.less_equal(landed[column], high)))
    return landed.filter(mask)


def _landed(store: Store, uri: str, delta: DeltaTable, txn: Txn) -> pa.Table:
    """The coordinates of the rows the main table's commit with ``txn`` added (none if there is none)."""
    empty = pa.table({"topic": pa.array([], pa.string()), "partition": pa.array([], pa.int32()),
                      "offset": pa.array([], pa.int64())})
    if (done := delta.transaction_version(txn.app_id)) is None or done < txn.version:
        return empty
    latest = delta.version()
    for version in range(latest, max(latest - _LOG_SEARCH, -1), -1):
        actions = commit_actions(store, uri, version)
        if any(a.get("txn", {}).get("appId") == txn.app_id and a["txn"].get("version") == txn.version for a in actions):
            return pa.concat_tables([empty, *(_coordinates(store, uri, a["add"], empty.schema)
                                              for a in actions if "add" in a)])
    raise JobError("target_conflict", f"{uri}: the commit of txn {txn.app_id} v{txn.version} is more than "
                                      f"{_LOG_SEARCH} commits back; the quarantine keeps its records")


def _coordinates(store: Store, uri: str, add: dict[str, object], schema: pa.Schema) -> pa.Table:
    """The (topic, partition, offset) of one added file's rows; a partition column from its add action."""
    filesystem, root = store.filesystem(uri)
    values = add.get("partitionValues") or {}
    assert isinstance(values, dict)
    in_file = [c for c in _COORDINATES if c not in values]
    rows = pq.read_table(f"{root.rstrip('/')}/{add['path']}", columns=in_file, filesystem=filesystem)
    columns = [rows[c].cast(schema.field(c).type) if c in in_file
               else partition_column(values[c], schema.field(c).type, rows.num_rows) for c in _COORDINATES]
    return pa.Table.from_arrays(columns, schema=schema)


def _each(context: SparkContext, units: list[_Unit], task: Callable[[_Unit], _Outcome], store: Store,
          roots: list[str], token: str) -> list[_Outcome]:
    """One Spark job, one ``task`` per unit; on failure the files of its tasks that finished (named
    by ``token``) are deleted."""
    if not units:
        return []
    try:
        return context.parallelize(units, len(units)).map(task).collect()
    except BaseException:
        for root in roots:
            delete_run_files(store, root, token)
        raise


# Executor side.

def quarantined_records(store: Store, file: QuarantineFile, selection: Selection, read_schema: pa.Schema,
                        opener: FieldKey | None) -> Iterator[pa.RecordBatch]:
    """A quarantine file's chosen records, batch by batch as Kafka records (``read_schema``), their
    sealed key and value opened with ``opener``."""
    filesystem, path = store.filesystem(file.uri)
    for batch in pq.ParquetFile(filesystem.open_input_file(path)).iter_batches(batch_size=_BATCH_ROWS):
        rows = pa.Table.from_batches([batch])
        rows = rows.filter(selection.mask(rows))
        if rows.num_rows == 0:
            continue
        records = rows.drop_columns([c for c in (QUARANTINE_REASON, RUN_ID) if c in rows.column_names])
        if opener is not None:
            for name in ("key", "value"):
                at = records.schema.get_field_index(name)
                opened = [open_sealed(opener, v) for v in records.column(at).to_pylist()]
                records = records.set_column(at, records.schema.field(at), pa.array(opened, pa.binary()))
        yield records.select(read_schema.names).cast(read_schema).combine_chunks().to_batches()[0]


def decode_quarantined(plan: DirectWritePlan, selection: Selection, opener: FieldKey | None, dry_run: bool,
                       file: QuarantineFile) -> TaskReport:
    """Runs on an executor: one quarantine file's chosen records decoded, those that now decode
    written into the main table (not in a dry run); counted in the report (``selected``, and as
    ``quarantined`` those that still fail)."""
    report = TaskReport()
    files = FileSet("main", plan.store, plan.uri, plan.schema, plan.partition_by, plan.token)
    contract = plan.row_contract()
    try:
        for batch in quarantined_records(plan.store, file, selection, plan.read_schema, opener):
            rows, bad = plan.decode(batch, contract)
            report.selected += batch.num_rows
            report.quarantined += bad.num_rows if bad is not None else 0
            if not dry_run:
                files.write(rows)
        report.expected(contract)
        report.files = files.close()
    except BaseException:
        files.discard()
        raise
    return report


def without_landed(store: Store, uri: str, schema: pa.Schema, selection: Selection, token: str,
                   unit: tuple[QuarantineFile, pa.Table]) -> QuarantineRewrite:
    """Runs on an executor: a chosen quarantine file without the records of ``landed``, written as a new
    file if any of them is in it."""
    file, landed = unit
    filesystem, path = store.filesystem(file.uri)
    rows = pq.read_table(filesystem.open_input_file(path))
    found = QuarantineRewrite(file, selected=int(pc.sum(selection.mask(rows)).as_py() or 0))
    kept = rows.filter(pc.invert(_among(rows, landed))) if landed.num_rows else rows
    found.landed = rows.num_rows - kept.num_rows
    if found.landed:
        files = FileSet("quarantine", store, uri, schema, [], token)
        try:
            files.write(kept.select(schema.names).cast(schema))
            found.files = files.close()
        except BaseException:
            files.discard()
            raise
    return found



def _among(rows: pa.Table, landed: pa.Table) -> pa.Array:
    """Which of ``rows`` have the coordinates of a row of ``landed`` (a join on the coordinates alone:
    Arrow joins no list columns, and quarantine rows may carry headers)."""
    index = "__inlet_row"
    probe = pa.table({**{c: rows[c] for c in _COORDINATES}, index: pa.array(range(rows.num_rows), pa.int64())})
    keys = pa.table({c: landed[c].cast(rows.schema.field(c).type) for c in _COORDINATES})
    hits = probe.join(keys, keys=_COORDINATES, join_type="left semi")[index]
    return pc.is_in(probe[index], value_set=hits.combine_chunks())
