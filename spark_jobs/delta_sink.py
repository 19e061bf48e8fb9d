"""Writing a run's rows into Delta: Parquet files from the executors, one commit from the driver.

The ``inlet_delta`` Python data source writes each task's rows as Parquet files straight into the table folders (main and
quarantine) and reports them; ``commit`` then adds them all in ONE Delta transaction per table with
delta-rs, tagged with the run's ``txn`` (app id, version) so that a repeated run commits nothing.

Replace mode (``replace_ranges``): before the job, ``plan_replace`` finds the table's files that hold
rows of the replaced ranges. Files holding nothing else are removed outright; the others are read
again by the ``inlet_delta_rewrite`` source, minus the replaced rows, and rewritten by the same
tasks. The commit that adds the new files carries the ``remove`` actions of all of them, so readers
never see the old and new rows together, nor neither.
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from datetime import time as time_of_day
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyarrow import fs as pafs
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from spark_jobs.columns import QUARANTINE_REASON, RAW_KEY, RAW_VALUE
from spark_jobs.errors import JobError, storage_failure
from spark_jobs.plans import (
    DataFile,
    PartitionKey,
    PartitionStats,
    TableRole,
    TaskReport,
    read_plan,
    task_reports,
    write_reports,
)
from spark_jobs.storage import Store

if TYPE_CHECKING:
    from deltalake import DeltaTable, Schema
    from deltalake.transaction import RemoveAction

    from spark_jobs.spec import Ranges, Txn  # pydantic costs every Python worker ~1 s to import

log = logging.getLogger("inlet.delta")
_COMMIT_TRIES = 3
_METADATA_RACE = "Metadata changed since last commit"
CARRIED = "_inlet_carried"  # set on rows rewritten from existing files, not read from Kafka
INTERNAL = {QUARANTINE_REASON, RAW_KEY, RAW_VALUE, CARRIED}
_STATS_COLUMNS = ("topic", "partition", "offset")


# --- executor side -------------------------------------------------------------------------------


def collect_read_stats(batch: pa.RecordBatch, into: dict[PartitionKey, PartitionStats]) -> pa.RecordBatch:
    """Add the batch's Kafka records to per-partition counts; returns the batch minus carried rows."""
    if CARRIED in batch.schema.names:
        carried = pc.fill_null(batch.column(CARRIED), False)
        batch = batch.filter(pc.invert(carried))
    if batch.num_rows == 0:
        return batch
    key = RAW_KEY if RAW_KEY in batch.schema.names else "key"
    value = RAW_VALUE if RAW_VALUE in batch.schema.names else "value"
    sizes = pc.add(
        pc.fill_null(pc.binary_length(batch.column(key)), 0),
        pc.fill_null(pc.binary_length(batch.column(value)), 0),
    )
    table = pa.table({"topic": batch.column("topic"), "partition": batch.column("partition"), "offset": batch.column("offset"), "bytes": sizes})
    grouped = table.group_by(["topic", "partition"]).aggregate(
        [("offset", "count"), ("offset", "min"), ("offset", "max"), ("bytes", "sum")]
    )
    for row in grouped.to_pylist():
        stats = into.setdefault((row["topic"], row["partition"]), PartitionStats())
        stats.merge(row["offset_count"], row["offset_min"], row["offset_max"], row["bytes_sum"])
    return batch


@dataclass
class _OpenFile:
    """A Parquet file a task is still writing, with the Delta statistics of its rows so far."""

    writer: pq.ParquetWriter
    path: str  # relative to the table root
    partition_values: dict[str, str | None]
    rows: int = 0
    min_values: dict[str, object] = field(default_factory=dict)
    max_values: dict[str, object] = field(default_factory=dict)


class _FileSet:
    """One open Parquet file per (table, partition values) for the life of a task."""

    def __init__(self, table: TableRole, store: Store, root: str, schema: pa.Schema, partition_by: list[str], token: str = ""):
        self.table, self.partition_by = table, partition_by
        self.prefix = f"part-{token}-" if token else "part-"
        self.fs, self.root = store.filesystem(root)
        self.schema = pa.schema([f for f in schema if f.name not in partition_by])
        self.open: dict[tuple[object, ...], _OpenFile] = {}

    def write(self, table: pa.Table, group: tuple[object, ...] = ()) -> None:
        """Append ``table``'s rows; rows of different ``group``s never share a file."""
        if table.num_rows == 0:
            return
        if not self.partition_by:
            self._append(group, {}, table)
            return
        for values in table.select(self.partition_by).group_by(self.partition_by).aggregate([]).to_pylist():
            mask = None
            for column, value in values.items():
                match = pc.is_null(table[column]) if value is None else pc.equal(table[column], value)
                mask = match if mask is None else pc.and_(mask, match)
            self._append((*group, *values.values()), values, table.filter(mask))

    def _append(self, key: tuple[object, ...], values: dict[str, object], rows: pa.Table) -> None:
        if key not in self.open:
            folder = "/".join(f"{c}={_path_safe(v)}" for c, v in values.items())
            relative = f"{folder}/" if folder else ""
            relative += f"{self.prefix}{uuid.uuid4().hex}.parquet"
            full = f"{self.root}/{relative}"
            if isinstance(self.fs, pafs.LocalFileSystem):  # object stores have no folders (pyarrow would add markers)
                self.fs.create_dir(full.rsplit("/", 1)[0], recursive=True)
            writer = pq.ParquetWriter(full, self.schema, filesystem=self.fs, compression="snappy")
            self.open[key] = _OpenFile(writer, relative, {c: _partition_string(v) for c, v in values.items()})
        file = self.open[key]
        rows = rows.select(self.schema.names).cast(self.schema)
        file.writer.write_table(rows)
        file.rows += rows.num_rows
        for column in _STATS_COLUMNS:
            if column in self.schema.names:
                low, high = pc.min_max(rows[column]).values()
                low, high = low.as_py(), high.as_py()
                if low is not None:
                    file.min_values[column] = min(low, file.min_values.get(column, low))
                    file.max_values[column] = max(high, file.max_values.get(column, high))

    def close(self) -> list[DataFile]:
        files = []
        for file in self.open.values():
            file.writer.close()
            size = self.fs.get_file_info(f"{self.root}/{file.path}").size
            delta_stats = {"numRecords": file.rows, "minValues": file.min_values, "maxValues": file.max_values}
            files.append(DataFile(self.table, file.path, size, file.partition_values, file.rows, json.dumps(delta_stats)))
        self.open.clear()
        return files

    def discard(self) -> None:
        for file in self.open.values():
            try:
                file.writer.close()
                self.fs.delete_file(f"{self.root}/{file.path}")
            except OSError:
                pass
        self.open.clear()


@dataclass(frozen=True)
class DeltaWritePlan:
    """The ``inlet_delta`` sink's plan: the tables its tasks write into, and where their reports go."""

    uri: str
    quarantine_uri: str | None  # None: the rows have no quarantine material, or nowhere to put it
    partition_by: list[str]
    manifest: str  # the reports' file, for the driver program (``read_reports``)
    store: Store


class InletDeltaDataSource(DataSource):
    """``df.write.format("inlet_delta").option("plan", path)``: Parquet files for ``commit_files``."""

    @classmethod
    def name(cls) -> str:
        return "inlet_delta"

    def writer(self, schema: StructType, overwrite: bool) -> _DeltaFilesWriter:
        return _DeltaFilesWriter(read_plan(self.options["plan"], DeltaWritePlan), schema)


class _DeltaFilesWriter(DataSourceArrowWriter):
    def __init__(self, plan: DeltaWritePlan, schema: StructType):
        self.plan = plan
        self.arrow_schema = to_arrow_schema(schema, timezone="UTC")

    def write(self, iterator: Iterator[pa.RecordBatch]) -> TaskReport:
        report = TaskReport()
        main_columns = [f for f in self.arrow_schema if f.name not in INTERNAL]
        main = _FileSet("main", self.plan.store, self.plan.uri, pa.schema(main_columns), self.plan.partition_by)
        quarantine = None
        if self.plan.quarantine_uri and QUARANTINE_REASON in self.arrow_schema.names:
            quarantine = _FileSet("quarantine", self.plan.store, self.plan.quarantine_uri, quarantine_schema(self.arrow_schema), [])
        try:
            for batch in iterator:
                fresh = collect_read_stats(batch, report.partitions)
                if quarantine is not None:
                    report.quarantined += fresh.num_rows - fresh.column(QUARANTINE_REASON).null_count
                rows = pa.Table.from_batches([batch])
                if quarantine is None:
                    main.write(rows)
                    continue
                bad = pc.is_valid(rows[QUARANTINE_REASON])
                main.write(rows.filter(pc.invert(bad)))
                quarantine.write(to_quarantine_rows(rows.filter(bad)))
            report.files = main.close() + (quarantine.close() if quarantine else [])
        except BaseException:
            main.discard()
            if quarantine:
                quarantine.discard()
            raise
        return report

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        # Runs on the driver host: hand the reports to the driver program, which commits them.
        write_reports(self.plan.manifest, messages)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        files = [file for report in task_reports(messages) for file in report.files]
        delete_files(self.plan.store, files, self.plan.uri, self.plan.quarantine_uri)


def quarantine_schema(writer_schema: pa.Schema) -> pa.Schema:
    renamed = {RAW_KEY: "key", RAW_VALUE: "value"}
    names = [RAW_KEY, RAW_VALUE, "topic", "partition", "offset", "timestamp", "timestampType", "headers", QUARANTINE_REASON, "_inlet_run_id"]
    return pa.schema([writer_schema.field(n).with_name(renamed.get(n, n)) for n in names if n in writer_schema.names])


def to_quarantine_rows(rows: pa.Table) -> pa.Table:
    rows = rows.drop_columns([c for c in ("key", "value") if c in rows.column_names])
    return rows.rename_columns([{RAW_KEY: "key", RAW_VALUE: "value"}.get(c, c) for c in rows.column_names])


def delete_files(store: Store, files: Iterable[DataFile], uri: str, quarantine_uri: str | None) -> None:
    """Delete reported files of the main table at ``uri`` and of the quarantine table, if any."""
    for file in files:
        root = uri if file.table == "main" else quarantine_uri
        if root is None:  # no quarantine table, so no file of it either
            continue
        filesystem, base = store.filesystem(root)
        try:
            filesystem.delete_file(f"{base}/{file.path}")
        except OSError:
            pass


def delete_run_files(store: Store, root: str, token: str) -> int:
    """Delete the files named for one attempt of a run (``token``) anywhere under a table folder.

    For a failed job whose tasks cannot all be asked what they wrote; never after a commit.
    """
    filesystem, base = store.filesystem(root)
    try:
        found = filesystem.get_file_info(pafs.FileSelector(base, recursive=True, allow_not_found=True))
    except OSError:
        return 0
    mine = [f.path for f in found if f.type == pafs.FileType.File and f.base_name.startswith(f"part-{token}-")]
    for path in mine:
        try:
            filesystem.delete_file(path)
        except OSError:
            pass
    return len(mine)


def _path_safe(value: object) -> str:
    return "__HIVE_DEFAULT_PARTITION__" if value is None else re.sub(r"[^A-Za-z0-9._-]", "_", str(value))[:100]


def _partition_string(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, (datetime, time_of_day)):
        return value.strftime("%Y-%m-%d %H:%M:%S.%f")  # Delta's timestamp partition format
    return str(value).lower() if isinstance(value, bool) else str(value)


# --- replace mode --------------------------------------------------------------------------------


@dataclass(frozen=True)
class RewriteFile(InputPartition):
    """An existing table file holding rows of the replaced ranges and others, to be rewritten."""

    table: TableRole
    uri: str  # absolute
    partition_values: dict[str, object]  # as the table's add action holds them (typed, not strings)


@dataclass
class ReplacePlan:
    """What replace mode takes out of the tables: files removed outright, and files rewritten."""

    remove: dict[TableRole, list[RemoveAction]] = field(default_factory=lambda: {"main": [], "quarantine": []})
    rewrite: list[RewriteFile] = field(default_factory=list)


@dataclass(frozen=True)
class RewritePlan:
    """The ``inlet_delta_rewrite`` source's plan: the files to read again, minus the replaced ranges."""

    files: tuple[RewriteFile, ...]
    replace_ranges: Ranges
    store: Store


def plan_replace(store: Store, table: TableRole, uri: str, ranges: Ranges, plan: ReplacePlan) -> None:
    """Add to ``plan`` the files of the table at ``uri`` holding rows of ``ranges``."""
    from deltalake.transaction import RemoveAction

    if not store.is_delta_table(uri):
        return
    wanted = [(t, int(p), s, e) for t, ps in ranges.items() for p, (s, e) in ps.items() if s < e]
    actions = pa.table(store.delta_table(uri).get_add_actions(flatten=True)).to_pylist()
    now = int(time.time() * 1000)
    for action in actions:
        bounds = {}
        for column in _STATS_COLUMNS:
            fixed = action.get(f"partition.{column}")
            bounds[column] = (fixed, fixed) if fixed is not None else (action.get(f"min.{column}"), action.get(f"max.{column}"))

        def within(column: str, low: object, high: object) -> bool:
            lo, hi = bounds[column]
            return lo is None or hi is None or (lo < high and hi >= low if column == "offset" else lo <= low <= hi)

        overlapping = [r for r in wanted if within("topic", r[0], r[0]) and within("partition", r[1], r[1]) and within("offset", r[2], r[3])]
        if not overlapping:
            continue
        (t_lo, t_hi), (p_lo, p_hi), (o_lo, o_hi) = (bounds[c] for c in _STATS_COLUMNS)
        covered = any(t_lo == t_hi == t and p_lo == p_hi == p and o_lo is not None and s <= o_lo and o_hi < e for t, p, s, e in overlapping)
        partition_values = {k[len("partition."):]: v for k, v in action.items() if k.startswith("partition.")}
        plan.remove[table].append(
            RemoveAction(
                action["path"], True, now, action["size_bytes"], {k: _partition_string(v) for k, v in partition_values.items()}
            )
        )
        if not covered:
            plan.rewrite.append(RewriteFile(table, f"{uri.rstrip('/')}/{action['path']}", partition_values))


class InletDeltaRewriteDataSource(DataSource):
    """Rows of existing table files outside the replaced ranges, in the writer's input shape."""

    @classmethod
    def name(cls) -> str:
        return "inlet_delta_rewrite"

    def reader(self, schema: StructType) -> DataSourceReader:
        return _RewriteReader(read_plan(self.options["plan"], RewritePlan), schema)


class _RewriteReader(DataSourceReader):
    def __init__(self, plan: RewritePlan, schema: StructType):
        self.files = plan.files
        self.ranges = plan.replace_ranges
        self.store = plan.store
        self.arrow_schema = to_arrow_schema(schema, timezone="UTC")

    def partitions(self) -> list[InputPartition]:
        return list(self.files)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, RewriteFile)
        yield from carried_rows(self.store, partition, self.ranges, self.arrow_schema).to_batches()


def carried_rows(store: Store, file: RewriteFile, ranges: Ranges, schema: pa.Schema) -> pa.Table:
    """The rows of an existing table file outside ``ranges``, in ``schema`` (missing columns null;
    ``CARRIED`` true where the schema has it)."""
    filesystem, path = store.filesystem(file.uri)
    rows = pq.read_table(path, filesystem=filesystem)
    for column, value in file.partition_values.items():
        rows = rows.append_column(column, pa.array([value] * rows.num_rows))
    if file.table == "quarantine":
        rows = rows.rename_columns([{"key": RAW_KEY, "value": RAW_VALUE}.get(c, c) for c in rows.column_names])
    rows = rows.filter(pc.invert(in_ranges(rows, ranges)))
    rows = rows.append_column(CARRIED, pa.array([True] * rows.num_rows, pa.bool_()))
    columns = [rows[f.name].cast(f.type) if f.name in rows.column_names else pa.nulls(rows.num_rows, f.type) for f in schema]
    return pa.Table.from_arrays(columns, schema=schema)


def in_ranges(rows: pa.Table, ranges: Ranges) -> pa.ChunkedArray:
    mask = pa.chunked_array([pa.array([False] * rows.num_rows, pa.bool_())])
    for topic, partitions in ranges.items():
        for partition, (start, end) in partitions.items():
            hit = pc.and_(
                pc.and_(pc.equal(rows["topic"], topic), pc.equal(rows["partition"], int(partition))),
                pc.and_(pc.greater_equal(rows["offset"], start), pc.less(rows["offset"], end)),
            )
            mask = pc.or_(mask, pc.fill_null(hit, False))
    return mask


# --- driver side ---------------------------------------------------------------------------------


def already_committed(store: Store, uri: str, txn: Txn) -> bool:
    if not store.is_delta_table(uri):
        return False
    done = store.delta_table(uri).transaction_version(txn.app_id)
    return done is not None and done >= txn.version


def commit_files(
    store: Store,
    uri: str,
    files: list[DataFile],
    schema: pa.Schema,
    partition_by: list[str],
    txn: Txn,
    removes: Sequence[RemoveAction] = (),
    notes: dict[str, str] | None = None,
) -> int | None:
    """Commit ``files`` (and ``removes``) as one transaction; None if ``txn`` was committed before,
    or by a concurrent attempt of the same run that won the race (the store's put-if-absent).
    ``notes`` go into the commit's metadata (the subject version a run read, say)."""
    from deltalake import Schema
    from deltalake.exceptions import DeltaError
    from deltalake.transaction import AddAction, CommitProperties, Transaction

    now = int(time.time() * 1000)
    adds = [AddAction(f.path, f.size, f.partition_values, now, True, f.stats) for f in files]
    commit = CommitProperties(
        app_transactions=[Transaction(txn.app_id, txn.version)],
        custom_metadata={"inlet.txn": f"{txn.app_id}:{txn.version}", **(notes or {})},
    )
    for attempt in range(1, _COMMIT_TRIES + 1):
        try:
            if not store.is_delta_table(uri):
                _create_empty(store, uri, Schema.from_arrow(schema), partition_by)
            table = store.delta_table(uri)
            done = table.transaction_version(txn.app_id)
            if done is not None and done >= txn.version:
                return None
            if list(table.metadata().partition_columns) != list(partition_by):
                raise JobError("invalid_spec", f"{uri} is partitioned by {table.metadata().partition_columns}, the spec says {partition_by}")
            evolve_schema(store, uri, table, schema)
            table.create_write_transaction(adds + list(removes), mode="append", schema=table.schema(), partition_by=partition_by,
                                           commit_properties=commit)
            table.update_incremental()
            return table.version()
        except (DeltaError, OSError) as exc:
            if _committed_meanwhile(store, uri, txn):
                return None
            # A concurrent metadata-only commit (a second create of a new table, a schema change) is
            # no reason to fail: read the table again and commit on top of it.
            if attempt < _COMMIT_TRIES and _METADATA_RACE in str(exc):
                log.info("commit to %s met a concurrent metadata change; trying again (%d)", uri, attempt)
                continue
            raise storage_failure(exc) or JobError("target_commit", f"commit to {uri} failed: {exc}") from None
    raise AssertionError("unreachable: the last try returns or raises")


def _create_empty(store: Store, uri: str, schema: Schema, partition_by: list[str]) -> None:
    """A new table without rows, so that the run's rows go in as an append: delta-rs checks an
    append's app transaction against concurrent commits of the same run, but lets two creates with
    the same transaction both commit (seen on S3: the second landed as version 1)."""
    from deltalake.exceptions import DeltaError
    from deltalake.transaction import create_table_with_add_actions

    try:
        create_table_with_add_actions(uri, schema, [], mode="ignore", partition_by=partition_by,
                                      storage_options=store.delta_options)
    except DeltaError:
        if not store.is_delta_table(uri):  # not a concurrent create's doing
            raise


def last_note(store: Store, uri: str, key: str, within: int = 100) -> str | None:
    """The newest value of commit metadata ``key`` among the table's last ``within`` commits."""
    if not store.is_delta_table(uri):
        return None
    for commit in store.delta_table(uri).history(within):
        if key in commit:
            return str(commit[key])
    return None


def _committed_meanwhile(store: Store, uri: str, txn: Txn) -> bool:
    """After a failed commit: whether another attempt of this run committed ``txn`` first."""
    try:
        return already_committed(store, uri, txn)
    except Exception:  # noqa: BLE001 - the commit's own error is the one to report
        return False


def evolve_schema(store: Store, uri: str, table: DeltaTable, schema: pa.Schema) -> None:
    """Add ``schema``'s new columns, nested ones too, to the table (as nullable); a changed type fails
    as ``schema_incompatible``. delta-rs's write transaction keeps the table's schema, so the new
    columns go in a metadata-only commit just before the data's: readers may see an added nullable
    column one version early, never rows without their columns."""
    from deltalake import write_deltalake

    from spark_jobs.formats.evolution import TypeChange, field_paths, merge_schema

    current = pa.schema(table.schema().to_arrow())
    try:
        merged = merge_schema(current, schema)
    except TypeChange as change:
        raise JobError("schema_incompatible", f"{uri}: {change}") from None
    if field_paths(merged) != field_paths(current):
        write_deltalake(table, merged.empty_table(), mode="append", schema_mode="merge", storage_options=store.delta_options)
        table.update_incremental()
