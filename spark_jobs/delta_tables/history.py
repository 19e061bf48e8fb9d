"""An SCD type 2 keyed table (``target.scd_type`` 2, docs/keyed-tables.md): the table keeps every
version of a key, not only the latest. Each change of a key is a row, valid from its sequence
(``_inlet_valid_from``) to the sequence of the key's next change (``_inlet_valid_to``, null while it is
the key's latest); ``_inlet_current`` marks the version that holds now. A delete is a row too
(``_inlet_deleted``, the key only, never current): it closes the version before it, and a replay of the
key's older changes finds it.

So the table is the key's changes sorted by sequence, whatever order they arrive in: a run adds the
changes whose sequence is not yet in the key's history, each closed by the next sequence, and closes
(sets ``_inlet_valid_to`` of) the versions a new change now follows. A change whose sequence is in the
history adds nothing: a replay adds nothing and a closed version is never reopened (its next sequence
can only move down, to a late change slotted in between). Both happen in ONE delta-rs MERGE carrying
the run's txn (``commit.merge_once``), on the table's rows as read just before, the "staged updates"
of an SCD2 MERGE: rows to insert, and rows keyed to the versions they close. For a table past the
platform's size the same MERGE of the same staged rows is delta-spark's (``spark_merge``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from spark_jobs.columns import CURRENT, DELETED, SEQUENCE, VALID_FROM, VALID_TO
from spark_jobs.delta_tables.commit import M, Merged, key_bounds, key_ranges, merge_once, with_table_columns
from spark_jobs.delta_tables.spark_merge import SparkMerge, large_enough

if TYPE_CHECKING:
    from deltalake import DeltaTable
    from deltalake.table import TableMerger
    from deltalake.transaction import CommitProperties
    from pyspark.sql import SparkSession

    from spark_jobs.delta_tables import Table
    from spark_jobs.spec import Txn

ACTION = "_inlet_action"  # the staged row's part: a version to insert, or one whose valid_to is set
_ROW = "_inlet_row"


def as_versions(changes: pa.Table) -> pa.Table:
    """``changes`` (one per key and sequence, ``delta_tables.changes``) in the history's columns, not yet
    closed: ``_inlet_sequence`` becomes ``_inlet_valid_from``."""
    at = changes.column_names.index(SEQUENCE)
    versions = changes.set_column(at, pa.field(VALID_FROM, pa.int64(), False), changes[SEQUENCE])
    at = versions.column_names.index(DELETED)
    versions = versions.add_column(at, pa.field(VALID_TO, pa.int64()), pa.nulls(versions.num_rows, pa.int64()))
    return versions.add_column(at + 1, pa.field(CURRENT, pa.bool_(), False), pc.invert(versions[DELETED]))


def merge_history(table: Table, txn: Txn, changes: pa.Table, key: Sequence[str], *,
                  spark: SparkSession | None = None, least_bytes: int = 0) -> Merged | None:
    """ONE MERGE of ``changes`` (every change of the run, one per key and sequence) into the history
    ``table``, tagged with ``txn``: delta-rs's, or with ``spark`` delta-spark's when the table, as
    the attempt reads it, holds ``least_bytes`` or more (``spark_merge.large_enough``); what
    ``commit.merge_once`` returns."""
    versions = as_versions(changes)

    def merger(delta: DeltaTable, properties: CommitProperties) -> SparkMerge | TableMerger | None:
        columns = pa.schema(delta.schema().to_arrow())
        known = _history_of(delta, versions, key)
        new = _unknown(versions, known, key)
        if not new.num_rows:
            return None
        staged = _staged(new, known, key, columns)
        if spark is not None and large_enough(delta, least_bytes):
            return SparkMerge(spark, table, delta, txn, staged, key, lambda merge: history_clauses(merge, columns),
                              also_equal=(VALID_FROM,))
        on = " AND ".join([f't."{k}" = s."{k}"' for k in (*key, VALID_FROM)] + key_bounds(staged, key))
        return history_clauses(delta.merge(staged, on, source_alias="s", target_alias="t", commit_properties=properties),
                               columns)

    # Its rows: the versions inserted (closing a key's previous version updates a row counted before).
    return merge_once(table, txn, versions.schema, key, merger, counted=("inserted",), operation="history_merge")


def history_clauses(merge: M, columns: pa.Schema) -> M:
    """The history's MERGE clauses on ``merge`` (delta-rs's ``TableMerger``, or delta-spark's builder
    behind ``spark_merge.SparkClauses``): a "close" row sets the validity of the version it matches,
    an "insert" row that matches none is a new version."""
    return (merge.when_matched_update({_quoted(c): f's."{c}"' for c in (VALID_TO, CURRENT)}, predicate=f"s.{ACTION} = 'close'")
            .when_not_matched_insert({_quoted(f.name): f's."{f.name}"' for f in columns}, predicate=f"s.{ACTION} = 'insert'"))


def _history_of(delta: DeltaTable, versions: pa.Table, key: Sequence[str]) -> pa.Table:
    """The table's versions (key, valid from and to, deleted) of the keys in ``versions``, read from the
    files that can hold them (``files_in_ranges``); of an integer key column, only the rows in the
    batch's range."""
    ranges = key_ranges(versions, key)
    where: ds.Expression | None = None
    for k, least, most in ranges:
        if isinstance(least, int):  # (pyarrow's scan of string views, as MERGEs write them, compares no strings)
            bound = (ds.field(k) >= least) & (ds.field(k) <= most)
            where = bound if where is None else where & bound
    read = files_in_ranges(delta, ranges).to_table(columns=[*key, VALID_FROM, VALID_TO, DELETED], filter=where)
    keys = versions.group_by(list(key)).aggregate([])
    keys = keys.cast(pa.schema([read.schema.field(k) for k in key]))
    return read.join(keys, keys=list(key), join_type="left semi")


def files_in_ranges(delta: DeltaTable, ranges: Sequence[tuple[str, int | str, int | str]]) -> ds.Dataset:
    """``delta``'s files as a dataset, less those whose statistics put a key column wholly outside its
    range in ``ranges`` (``commit.key_ranges``): those hold none of the batch's keys. A file without
    statistics of a column is kept; a writer's statistics are bounds (``key_ranges``)."""
    dataset = delta.to_pyarrow_dataset()
    if not ranges:
        return dataset
    stats = pa.table(delta.get_add_actions(flatten=True))
    outside = pa.repeat(pa.scalar(False), stats.num_rows)
    for k, least, most in ranges:
        if f"min.{k}" in stats.column_names and f"max.{k}" in stats.column_names:
            kind = pa.int64() if isinstance(least, int) else pa.string()
            below = pc.fill_null(pc.less(stats[f"max.{k}"].cast(kind), pa.scalar(least, kind)), False)
            above = pc.fill_null(pc.greater(stats[f"min.{k}"].cast(kind), pa.scalar(most, kind)), False)
            outside = pc.or_(outside, pc.or_(below, above))
    skipped = set(stats["path"].filter(outside).to_pylist())
    if not skipped:
        return dataset
    kept = [fragment for fragment in dataset.get_fragments() if fragment.path not in skipped]
    return ds.FileSystemDataset(kept, dataset.schema, dataset.format, dataset.filesystem)


def _unknown(versions: pa.Table, known: pa.Table, key: Sequence[str]) -> pa.Table:
    """The rows of ``versions`` whose key and sequence are not among ``known``'s (joined on those columns
    alone: Arrow's joins carry no nested columns)."""
    narrow = versions.select([*key, VALID_FROM]).append_column(_ROW, pa.array(range(versions.num_rows), pa.int64()))
    fresh = narrow.join(known.select([*key, VALID_FROM]).cast(narrow.schema.remove(narrow.schema.get_field_index(_ROW))),
                        keys=[*key, VALID_FROM], join_type="left anti")
    rows = fresh[_ROW].combine_chunks()
    return versions.take(rows.take(pc.sort_indices(rows)))


def _staged(new: pa.Table, known: pa.Table, key: Sequence[str], columns: pa.Schema) -> pa.Table:
    """The MERGE's source: ``new``'s versions to insert, each valid to the next sequence of its key
    among the known and new ones, and the known versions whose valid_to that moves ("close" rows)."""
    old = known.join(new.group_by(list(key)).aggregate([]).cast(pa.schema([known.schema.field(k) for k in key])),
                     keys=list(key), join_type="left semi")
    n_old, n_new = old.num_rows, new.num_rows
    timeline = pa.table({
        **{k: pa.concat_arrays([old[k].combine_chunks(), new[k].combine_chunks().cast(old.schema.field(k).type)])
           for k in key},
        VALID_FROM: pa.concat_arrays([old[VALID_FROM].combine_chunks().cast(pa.int64()), new[VALID_FROM].combine_chunks()]),
        DELETED: pa.concat_arrays([old[DELETED].combine_chunks(), new[DELETED].combine_chunks()]),
        "_inlet_was_to": pa.concat_arrays([old[VALID_TO].combine_chunks().cast(pa.int64()), pa.nulls(n_new, pa.int64())]),
        _ROW: pa.concat_arrays([pa.repeat(pa.scalar(-1, pa.int64()), n_old), pa.array(range(n_new), pa.int64())]),
    }).sort_by([(k, "ascending") for k in key] + [(VALID_FROM, "ascending")])
    valid_to = _next_of_key(timeline, key)
    current = pc.and_(pc.is_null(valid_to), pc.invert(timeline[DELETED]))
    timeline = timeline.append_column(VALID_TO, valid_to).append_column(CURRENT, current)

    added = timeline.filter(pc.greater_equal(timeline[_ROW], 0)).sort_by(_ROW)
    inserts = new.set_column(new.column_names.index(VALID_TO), VALID_TO, added[VALID_TO])
    inserts = inserts.set_column(inserts.column_names.index(CURRENT), CURRENT, added[CURRENT])
    was_to = timeline["_inlet_was_to"]
    moved = pc.if_else(pc.is_null(was_to), pc.is_valid(valid_to), pc.fill_null(pc.not_equal(was_to, valid_to), True))
    closes = timeline.filter(pc.and_(pc.less(timeline[_ROW], 0), moved))

    staged = pa.schema([f.with_nullable(True) for f in columns] + [pa.field(ACTION, pa.string())])
    return pa.concat_tables([_shaped(inserts, staged, "insert"), _shaped(closes, staged, "close")])


def _next_of_key(timeline: pa.Table, key: Sequence[str]) -> pa.Array:
    """Per row of ``timeline`` (sorted by key, then valid_from): the next row's valid_from if it is of
    the same key, else null."""
    n = timeline.num_rows
    if n < 2:
        return pa.nulls(n, pa.int64())
    same: pa.Array = pa.repeat(pa.scalar(True), n - 1)
    for k in key:
        column = timeline[k].combine_chunks()
        same = pc.and_(same, pc.equal(column.slice(0, n - 1), column.slice(1)))
    valid_from = timeline[VALID_FROM].combine_chunks()
    following = pc.if_else(same, valid_from.slice(1), pa.nulls(n - 1, pa.int64()))
    return pa.concat_arrays([following, pa.nulls(1, pa.int64())])


def _shaped(rows: pa.Table, schema: pa.Schema, action: str) -> pa.Table:
    """``rows`` in ``schema``: the columns it lacks null (a field dropped from the schema, or every
    column but the key and validity of a "close" row), and the action."""
    rows = with_table_columns(rows.append_column(ACTION, pa.repeat(pa.scalar(action), rows.num_rows)), schema)
    return pa.Table.from_arrays([rows[f.name].cast(f.type) for f in schema], schema=schema)


def _quoted(name: str) -> str:
    return f'"{name}"'
