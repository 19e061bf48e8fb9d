"""The quarantine's files as a reprocess of it (``targets.reprocess``) chooses, reads and rewrites
them: which files may hold the chosen records (by their statistics), and the executors' tasks that
decode a file's chosen records and write one again without those that landed. Pickled to the
executors: no pydantic here (``targets``)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from spark_jobs.columns import COORDINATES, QUARANTINE_REASON, RUN_ID
from spark_jobs.contract.sensitive import FieldKey, open_sealed
from spark_jobs.delta_log import STATS_COLUMNS
from spark_jobs.delta_tables.files import FileSet
from spark_jobs.delta_tables.replace import in_ranges
from spark_jobs.plans import DataFile, TaskReport

if TYPE_CHECKING:
    from datetime import datetime

    from deltalake import DeltaTable

    from spark_jobs.delta_tables.direct_write import DirectWritePlan
    from spark_jobs.spec import Ranges
    from spark_jobs.storage import Store

_BATCH_ROWS = 20_000  # quarantine rows decoded at a time: a task holds one batch, not its file
Bounds = dict[str, tuple[Any, Any]]  # (min, max) of each coordinate in a file; (None, None) where unknown


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


def candidates(uri: str, delta: DeltaTable, ranges: Ranges | None) -> list[QuarantineFile]:
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


def within(landed: pa.Table, bounds: Bounds) -> pa.Table:
    """The landed coordinates a quarantine file's statistics allow: each task gets only its own."""
    mask = pa.chunked_array([pa.repeat(True, landed.num_rows)])
    for column in STATS_COLUMNS:
        low, high = bounds[column]
        if low is not None and high is not None:
            mask = pc.and_(mask, pc.and_(pc.greater_equal(landed[column], low), pc.less_equal(landed[column], high)))
    return landed.filter(mask)


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
        # A column the run reads and the quarantine lacks (headers, turned on since) is null.
        columns = [records[f.name].cast(f.type) if f.name in records.column_names else pa.nulls(records.num_rows, f.type)
                   for f in read_schema]
        yield pa.Table.from_arrays(columns, schema=read_schema).combine_chunks().to_batches()[0]


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
    kept = rows.filter(pc.invert(pc.and_(_among(rows, landed), selection.mask(rows)))) if landed.num_rows else rows
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
    probe = pa.table({**{c: rows[c] for c in list(COORDINATES)}, index: pa.array(range(rows.num_rows), pa.int64())})
    keys = pa.table({c: landed[c].cast(rows.schema.field(c).type) for c in list(COORDINATES)})
    hits = probe.join(keys, keys=list(COORDINATES), join_type="left semi")[index]
    return pc.is_in(probe[index], value_set=hits.combine_chunks())
