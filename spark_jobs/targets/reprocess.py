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
             rewrites each chosen file without the chosen records the main commit holds (read back
             from that commit's files, so a retry after a crash between the two commits takes out
             exactly what landed), and one commit swaps the files, tagged with the run's version
             under an app id of its own (``REWRITE_APP``). A record that still fails keeps its
             quarantine row as it was.

A reprocess that landed rows and then failed for good (its retries spent) left them in both tables:
the next reprocess finds its main commit (a reprocess commit newer than the quarantine's last
rewrite) and takes those records out of the quarantine first, on the driver, before it chooses any.

A record quarantined twice (an append-mode replay of its range) lands twice, as the replay's other
records did.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq

from spark_jobs.columns import COORDINATES
from spark_jobs.contract.sensitive import FieldKey
from spark_jobs.delta_log import commit_actions
from spark_jobs.delta_tables import Table
from spark_jobs.delta_tables.commit import already_committed, commit_files
from spark_jobs.delta_tables.files import delete_files, delete_run_files
from spark_jobs.delta_tables.replace import partition_column
from spark_jobs.errors import JobError
from spark_jobs.plans import DataFile, TaskReport
from spark_jobs.table_features import has_deletion_vectors, writer_for
from spark_jobs.targets import ALREADY_COMMITTED, Checkpoint, Committed, Reading
from spark_jobs.targets.delta_append import DeltaAppend, spark_may_write
from spark_jobs.targets.quarantine_files import (
    QuarantineFile,
    QuarantineRewrite,
    Selection,
    candidates,
    decode_quarantined,
    within,
    without_landed,
)

if TYPE_CHECKING:
    from deltalake import DeltaTable
    from pyspark import SparkContext

    from spark_jobs.spec import DeltaTargetSpec, ReprocessSpec, RunSpec, Txn
    from spark_jobs.storage import Store

log = logging.getLogger("inlet.delta")

_LOG_SEARCH = 1_000  # commits of the main table searched back for the run's own
REWRITE_APP = ":quarantine-rewrite"  # the quarantine rewrite's app id: the run's, with this after it
_NOTE = "inlet.reprocessed_from"  # the mark of a reprocess's main commit
Unit = tuple[QuarantineFile, pa.Table]  # a quarantine file to rewrite, and the landed coordinates it may hold
_Unit = TypeVar("_Unit")
_Outcome = TypeVar("_Outcome")


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
        self.rewrite_txn = spec.txn.model_copy(update={"app_id": spec.txn.app_id + REWRITE_APP})

    def prepare(self) -> Committed | None:
        txn = self.spec.txn
        if self.quarantine is None or not self.quarantine.exists():
            return self._nothing("there is no quarantine table")
        if already_committed(self.quarantine, self.rewrite_txn):
            log.info("txn %s v%d is already in %s: nothing to do", txn.app_id, txn.version, self.quarantine.uri)
            return ALREADY_COMMITTED
        self.landed_before = already_committed(self.main, txn)
        self._plan_columns()
        self.schemas["quarantine"] = self.quarantine.columns() or self.schemas["quarantine"]  # as its files hold them
        if self.main.exists():
            self.writers["main"] = writer_for(self.main.delta(), "append", self.main.uri, spark=spark_may_write(self.main))
        self._check_quarantine()
        if not self.order.dry_run:
            self._finish_earlier()
        self.candidates = candidates(self.quarantine.uri, self.quarantine.delta(), self.order.ranges)
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
        if self.widenings:  # the policy widen's ALTER is a forward run's to make: this one only appends
            raise JobError("schema_incompatible", f"{self.main.uri}: a reprocess cannot widen {self.widenings[0].path}; "
                                                  "let a run of the pipeline widen it first, then reprocess")
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
            if self._commit_table("main", self.main, files, notes={_NOTE: self.quarantine_uri}) is None:
                _delete_dead(self.main, files)  # a concurrent attempt of this run committed first: its rows count
            else:
                self.committed.add("main")
        landed = _landed(self.main.store, self.main.uri, self.main.delta(), self.spec.txn)
        assert self.context is not None  # by write
        context = self.context
        rewritten = self._rewrite_quarantine(landed, self.selection, self.candidates, self.rewrite_txn,
                                             lambda units, task, token: _each(context, units, task, self.main.store,
                                                                              [self.quarantine_uri], token))
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

    def _rewrite_quarantine(self, landed: pa.Table, selection: Selection, files: list[QuarantineFile], txn: Txn,
                            run: Callable[[list[Unit], Callable[[Unit], QuarantineRewrite], str], list[QuarantineRewrite]],
                            ) -> list[QuarantineRewrite]:
        """Each of ``files`` without its ``selection``'s records that ``landed``, swapped in by one commit
        tagged ``txn``; the files' counts. ``run``: where the rewrites run (a Spark job, or the driver)."""
        from deltalake.transaction import RemoveAction

        assert self.quarantine is not None  # by prepare
        token = uuid.uuid4().hex[:12]
        schema = self.schemas["quarantine"]
        task = partial(without_landed, self.quarantine.store, self.quarantine.uri, schema, selection, token)
        rewritten = run([(f, within(landed, f.bounds)) for f in files], task, token)
        now = int(time.time() * 1000)
        removes = [RemoveAction(r.file.path, True, now, r.file.size, {}) for r in rewritten if r.landed]
        adds = [f for r in rewritten for f in r.files]
        try:
            version = commit_files(self.quarantine, txn, adds, schema, removes=removes) if removes else None
        except BaseException:
            _delete_dead(self.quarantine, adds)
            raise
        if version is None:  # nothing landed here, or a concurrent attempt of this run swapped them first
            _delete_dead(self.quarantine, adds)
        log.info("reprocess: %d records landed, %d quarantine files rewritten", sum(r.landed for r in rewritten), len(removes))
        return rewritten

    def _check_quarantine(self) -> None:
        """A quarantine a reprocess can rewrite: delta-rs writes it, and it has no deletion vectors (its
        files would be read whole, the rows another engine deleted from them included)."""
        assert self.quarantine is not None  # by prepare
        delta = self.quarantine.delta()
        if writer_for(delta, "replace", self.quarantine.uri, spark=False) != "delta-rs" or has_deletion_vectors(delta):
            raise JobError("table_unsupported", f"{self.quarantine.uri}: its features (deletion vectors, or others "
                                                "only delta-spark writes) keep a reprocess, which rewrites the "
                                                "quarantine's files with delta-rs, from it")

    def _finish_earlier(self) -> None:
        """Take out of the quarantine what earlier reprocesses landed and then failed before taking out
        (their retries spent), each under its own version, on the driver: before this one chooses."""
        assert self.quarantine is not None  # by prepare
        done = self.quarantine.delta().transaction_version(self.rewrite_txn.app_id) or 0
        for version, txn_version in _reprocess_commits(self.main, self.spec.txn.app_id, done, self.spec.txn.version):
            landed = _landed_by(self.main.store, self.main.uri, version)
            every = Selection(None, None, None)
            files = candidates(self.quarantine.uri, self.quarantine.delta(), None)
            txn = self.rewrite_txn.model_copy(update={"version": txn_version})
            rewritten = self._rewrite_quarantine(landed, every, files, txn,
                                                 lambda units, task, _: [task(u) for u in units])
            log.warning("reprocess: the reprocess of txn v%d had landed %d records and not taken them out of the "
                        "quarantine: taken out now", txn_version, sum(r.landed for r in rewritten))

    def _nothing(self, why: str) -> Committed:
        from spark_jobs.spec import ReprocessCount

        log.info("reprocess: %s: nothing to reprocess", why)
        return Committed(reprocessed=ReprocessCount(dry_run=self.order.dry_run))


_EMPTY = pa.schema([pa.field("topic", pa.string()), pa.field("partition", pa.int32()), pa.field("offset", pa.int64())])


def _landed(store: Store, uri: str, delta: DeltaTable, txn: Txn) -> pa.Table:
    """The coordinates of the rows the main table's commit with ``txn`` added (none if there is none)."""
    if (done := delta.transaction_version(txn.app_id)) is None or done < txn.version:
        return _EMPTY.empty_table()
    latest = delta.version()
    for version in range(latest, max(latest - _LOG_SEARCH, -1), -1):
        actions = commit_actions(store, uri, version)
        if any(_txn_of(a, txn.app_id) == txn.version for a in actions):
            return _landed_by(store, uri, version, actions)
    raise JobError("target_conflict", f"{uri}: the commit of txn {txn.app_id} v{txn.version} is more than "
                                      f"{_LOG_SEARCH} commits back; the quarantine keeps its records")


def _landed_by(store: Store, uri: str, version: int, actions: list[dict[str, Any]] | None = None) -> pa.Table:
    """The coordinates of the rows the main table's commit ``version`` added."""
    actions = commit_actions(store, uri, version) if actions is None else actions
    return pa.concat_tables([_EMPTY.empty_table(), *(_coordinates(store, uri, a["add"], _EMPTY) for a in actions if "add" in a)])


def _txn_of(action: dict[str, Any], app_id: str) -> int | None:
    """The version of ``app_id``'s transaction an action of a commit records, if it is one."""
    txn = action.get("txn") or {}
    return txn.get("version") if txn.get("appId") == app_id else None


def _reprocess_commits(main: Table, app_id: str, done: int, below: int) -> list[tuple[int, int]]:
    """The main table's reprocess commits (table version, txn version) of txn versions in (``done``,
    ``below``), oldest first: newest back to the first commit of a version at or under ``done``."""
    if not main.exists():
        return []
    found: list[tuple[int, int]] = []
    latest = main.delta().version()
    for version in range(latest, max(latest - _LOG_SEARCH, -1), -1):
        actions = commit_actions(main.store, main.uri, version)
        versions = [v for a in actions if (v := _txn_of(a, app_id)) is not None]
        if versions and versions[0] <= done:
            break
        info: dict[str, Any] = next((a["commitInfo"] for a in actions if "commitInfo" in a), {})
        if versions and versions[0] < below and _NOTE in json.dumps(info):  # delta-rs's metadata, or delta-spark's userMetadata
            found.append((version, versions[0]))
    return found[::-1]


def _delete_dead(table: Table, files: list[DataFile]) -> None:
    """Delete those of ``files`` the table does not hold: a commit reported as failed may have landed."""
    live = set(pa.table(table.delta().get_add_actions(flatten=True)).column("path").to_pylist()) if table.exists() else set()
    delete_files(table.store, [f for f in files if f.path not in live], table.uri, None)


def _coordinates(store: Store, uri: str, add: dict[str, object], schema: pa.Schema) -> pa.Table:
    """The (topic, partition, offset) of one added file's rows; a partition column from its add action."""
    filesystem, root = store.filesystem(uri)
    values = add.get("partitionValues") or {}
    assert isinstance(values, dict)
    in_file = [c for c in list(COORDINATES) if c not in values]
    rows = pq.read_table(f"{root.rstrip('/')}/{unquote(str(add['path']))}", columns=in_file, filesystem=filesystem)
    columns = [rows[c].cast(schema.field(c).type) if c in in_file
               else partition_column(values[c], schema.field(c).type, rows.num_rows) for c in list(COORDINATES)]
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


