"""Replace mode: a replay's rows take the place of the rows a table holds for the same offset ranges.

Before the job, ``plan_replace`` finds the table's files that hold rows of the replaced ranges
(from their Delta statistics: topic, partition, offset bounds). Files holding nothing else are
removed outright; the others are read again (``carried_rows``, in a ``direct_write`` task), minus
the replaced rows, and rewritten by the same job. The commit that adds the new files carries the
``remove`` actions of all of them, so readers never see the old and new rows together, nor neither.

A table whose files to replace carry deletion vectors (another engine deleted or updated rows in
them) is not rewritten so: a ``remove`` must name a file's deletion vector with its path, which
delta-rs's write transaction cannot, and the file's raw rows include the deleted ones. Its replay is
committed by delta-rs's predicate overwrite instead (``overwrite_ranges``): one commit that removes
the replaced ranges' rows (reading through the vectors, naming them in its removes) and adds the
run's rows, read back from the files the job's tasks wrote.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from spark_jobs.delta_log import STATS_COLUMNS, partition_string, rewrite_fence
from spark_jobs.delta_tables import Table
from spark_jobs.errors import JobError, storage_failure
from spark_jobs.plans import DataFile, TableRole
from spark_jobs.storage import Store
from spark_jobs.table_features import has_deletion_vectors, require

if TYPE_CHECKING:
    from deltalake.transaction import RemoveAction

    from spark_jobs.spec import Ranges, Txn  # pydantic costs every Python worker ~1 s to import


@dataclass(frozen=True)
class RewriteFile:
    """An existing table file holding rows of the replaced ranges and others, to be rewritten."""

    table: TableRole
    uri: str  # absolute
    partition_values: dict[str, object]  # as the table's add action holds them (typed, not strings)


@dataclass
class ReplacePlan:
    """What replace mode takes out of the tables: files removed outright, and files rewritten."""

    remove: dict[TableRole, list[RemoveAction]] = field(default_factory=lambda: {"main": [], "quarantine": []})
    rewrite: list[RewriteFile] = field(default_factory=list)
    overwrite: set[TableRole] = field(default_factory=set)  # tables whose replay is a predicate overwrite


def plan_replace(table: Table, role: TableRole, ranges: Ranges, plan: ReplacePlan) -> None:
    """Add to ``plan`` the files of ``table`` (the run's ``role`` one) holding rows of ``ranges``; or,
    where one of them carries a deletion vector, mark the table's replay as an overwrite. A table
    whose features a replay cannot honour is refused (``table_features``) before anything is written."""
    from deltalake.transaction import RemoveAction

    if not table.exists():
        return
    delta = table.delta()
    require(delta, "replace", table.uri)
    with_vectors = has_deletion_vectors(delta)
    wanted = [(t, int(p), s, e) for t, ps in ranges.items() for p, (s, e) in ps.items() if s < e]
    actions = pa.table(delta.get_add_actions(flatten=True)).to_pylist()
    now = int(time.time() * 1000)
    removes: list[RemoveAction] = []
    rewrites: list[RewriteFile] = []
    for action in actions:
        bounds = {}
        for column in STATS_COLUMNS:
            fixed = action.get(f"partition.{column}")
            bounds[column] = (fixed, fixed) if fixed is not None else (action.get(f"min.{column}"), action.get(f"max.{column}"))

        def within(column: str, low: object, high: object) -> bool:
            lo, hi = bounds[column]  # noqa: B023 - called only within this iteration
            return lo is None or hi is None or (lo < high and hi >= low if column == "offset" else lo <= low <= hi)

        overlapping = [r for r in wanted if within("topic", r[0], r[0]) and within("partition", r[1], r[1]) and within("offset", r[2], r[3])]
        if not overlapping:
            continue
        (t_lo, t_hi), (p_lo, p_hi), (o_lo, o_hi) = (bounds[c] for c in STATS_COLUMNS)
        covered = any(t_lo == t_hi == t and p_lo == p_hi == p and o_lo is not None and s <= o_lo and o_hi < e for t, p, s, e in overlapping)
        partition_values = {k[len("partition."):]: v for k, v in action.items() if k.startswith("partition.")}
        if action["path"] in with_vectors:
            plan.overwrite.add(role)
            return
        removes.append(
            RemoveAction(
                action["path"], True, now, action["size_bytes"], {k: partition_string(v) for k, v in partition_values.items()}
            )
        )
        if not covered:
            rewrites.append(RewriteFile(role, f"{table.uri.rstrip('/')}/{action['path']}", partition_values))
    plan.remove[role] += removes
    plan.rewrite += rewrites


def overwrite_ranges(table: Table, txn: Txn, files: Sequence[DataFile], schema: pa.Schema, ranges: Ranges, *,
                     notes: Mapping[str, str] | None = None) -> int | None:
    """A replay of ``ranges`` into ``table`` (one whose replaced files carry deletion vectors) as ONE
    predicate overwrite by delta-rs: the rows of ``ranges`` out, the rows of ``files`` (the job's tasks
    wrote them in ``schema``) in, tagged with ``txn`` and the rewrite fence. The files are deleted once
    their rows are in (they are no part of the table: delta-rs writes its own). The table's version, or
    None if ``txn`` was committed before."""
    from deltalake import write_deltalake
    from deltalake.exceptions import CommitFailedError, DeltaError

    from spark_jobs.delta_tables.files import delete_files

    try:
        version = _overwrite(table, txn, files, schema, ranges, notes, write_deltalake)
    except (DeltaError, OSError, pa.ArrowException) as exc:
        if _committed_meanwhile(table, txn):
            version = None
        elif isinstance(exc, CommitFailedError):  # the fence: a compaction committed first
            raise JobError("target_conflict", f"the replace commit to {table.uri} met a concurrent rewrite of the "
                                              f"table (maintenance): {exc}; it is retried and plans again") from None
        else:
            raise storage_failure(exc) or JobError("target_commit", f"replace commit to {table.uri} failed: {exc}") from None
    delete_files(table.store, files, table.uri, table.uri)
    return version


def _overwrite(table: Table, txn: Txn, files: Sequence[DataFile], schema: pa.Schema, ranges: Ranges,
               notes: Mapping[str, str] | None, write: Callable[..., object]) -> int | None:
    from deltalake.transaction import CommitProperties, Transaction

    from spark_jobs.delta_tables.commit import already_committed, evolve_schema, same_kind, with_table_columns

    if already_committed(table, txn):
        return None
    delta = table.delta()
    if list(delta.metadata().partition_columns) != list(table.partition_by):
        raise JobError("invalid_spec", f"{table.uri} is partitioned by {delta.metadata().partition_columns}, "
                                       f"the spec says {list(table.partition_by)}")
    require(delta, "replace", table.uri)
    same_kind(table, delta, schema)
    evolve_schema(table, delta, schema)
    columns = pa.schema(delta.schema().to_arrow())
    filesystem, root = table.store.filesystem(table.uri)

    def batches() -> Iterator[pa.RecordBatch]:
        for file in files:
            rows = pq.read_table(f"{root}/{file.path}", filesystem=filesystem)
            for column, value in file.partition_values.items():
                rows = rows.append_column(column, partition_column(value, columns.field(column).type, rows.num_rows))
            conformed = with_table_columns(rows, columns).select(columns.names).cast(columns)
            yield from conformed.to_batches()

    properties = CommitProperties(app_transactions=[Transaction(txn.app_id, txn.version), rewrite_fence(delta.version())],
                                  custom_metadata={"inlet.txn": f"{txn.app_id}:{txn.version}", **(notes or {})})
    write(delta, pa.RecordBatchReader.from_batches(columns, batches()), mode="overwrite",
          predicate=ranges_predicate(ranges), commit_properties=properties, storage_options=table.store.delta_options)
    delta.update_incremental()
    return delta.version()


def partition_column(value: str | None, kind: pa.DataType, rows: int) -> pa.Array:
    """A partition value as a Delta add action spells it (``delta_log.partition_string``), typed, for
    ``rows`` rows."""
    if value is None:
        return pa.nulls(rows, kind)
    typed: object = value
    if pa.types.is_timestamp(kind):
        typed = datetime.strptime(value, "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=UTC if kind.tz else None)
    elif pa.types.is_date(kind):
        typed = date.fromisoformat(value)
    elif pa.types.is_boolean(kind):
        typed = value == "true"
    else:
        return pa.array([value] * rows, pa.string()).cast(kind)
    return pa.array([typed] * rows, kind)


def _committed_meanwhile(table: Table, txn: Txn) -> bool:
    from spark_jobs.delta_tables.commit import already_committed

    try:
        return already_committed(table, txn)
    except Exception:  # noqa: BLE001 - the commit's own error is the one to report
        return False


def ranges_predicate(ranges: Ranges) -> str:
    """``ranges`` as delta-rs's SQL: the rows of any of them."""
    from spark_jobs.delta_tables.commit import literal

    each = [f'("topic" = {literal(t)} AND "partition" = {int(p)} AND "offset" >= {s} AND "offset" < {e})'
            for t, ps in sorted(ranges.items()) for p, (s, e) in sorted(ps.items()) if s < e]
    return " OR ".join(each) or "FALSE"


def carried_rows(store: Store, file: RewriteFile, ranges: Ranges, schema: pa.Schema) -> pa.Table:
    """The rows of an existing table file outside ``ranges``, in ``schema`` (missing columns null)."""
    filesystem, path = store.filesystem(file.uri)
    rows = pq.read_table(path, filesystem=filesystem)
    for column, value in file.partition_values.items():
        rows = rows.append_column(column, pa.array([value] * rows.num_rows))
    rows = rows.filter(pc.invert(in_ranges(rows, ranges)))
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
