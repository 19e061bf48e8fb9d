"""The driver's commit: a run's reported files (and replace mode's removes) as ONE Delta transaction
per table, with delta-rs, tagged with the run's app transaction (``txn``: app id, version) so that a
repeated run, or a concurrent attempt of the same run, commits nothing. New columns of the run's
rows go in just before (``evolve_schema``); a changed type fails the run as ``schema_incompatible``.
A commit that removes files (replace mode) is fenced against table maintenance (``spark_jobs.delta_log``):
one that loses to a compaction fails as ``target_conflict``, and the run is tried again.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, Self, TypeVar

import pyarrow as pa
import pyarrow.compute as pc

from spark_jobs.delta_log import check_still_live, rewrite_fence
from spark_jobs.delta_tables import Table
from spark_jobs.delta_tables.schema import (
    delta_field,
    delta_schema,
    holds_variant,
    holds_variant_column,
    list_invariants,
)
from spark_jobs.errors import JobError, storage_failure
from spark_jobs.plans import DataFile
from spark_jobs.table_features import Operation, has_deletion_vectors, require

if TYPE_CHECKING:
    from deltalake import DeltaTable, Schema
    from deltalake.table import TableMerger
    from deltalake.transaction import CommitProperties, RemoveAction

    from spark_jobs.spec import Txn

log = logging.getLogger("inlet.delta")
_COMMIT_TRIES = 3
_METADATA_RACE = "Metadata changed since last commit"


class Merge(Protocol):
    """A MERGE built on the table as read (delta-rs's ``TableMerger``, or ``spark_merge.SparkMerge``):
    ``execute`` commits it and returns its metrics, leaving the table object at the MERGE's version."""

    def execute(self) -> dict[str, Any]: ...


class Clauses(Protocol):
    """The part of delta-rs's ``TableMerger`` that ``change_clauses`` uses (``spark_merge.SparkClauses``
    gives delta-spark's builder the same)."""

    def when_matched_update(self, updates: dict[str, str], predicate: str | None = None) -> Self: ...

    def when_matched_update_all(self, predicate: str | None = None) -> Self: ...

    def when_not_matched_insert(self, updates: dict[str, str], predicate: str | None = None) -> Self: ...

    def when_not_matched_insert_all(self, predicate: str | None = None) -> Self: ...


M = TypeVar("M", bound=Clauses)


def already_committed(table: Table, txn: Txn) -> bool:
    """Whether ``table`` holds ``txn`` already: a run that committed commits nothing again."""
    if not table.exists():
        return False
    done = table.delta().transaction_version(txn.app_id)
    return done is not None and done >= txn.version


def commit_files(table: Table, txn: Txn, files: Sequence[DataFile], schema: pa.Schema, *,
                 removes: Sequence[RemoveAction] = (), notes: Mapping[str, str] | None = None) -> int | None:
    """Commit ``files`` (in ``schema``: new columns are added) and ``removes`` as one transaction;
    the table's version, or None if ``txn`` was committed before, or by a concurrent attempt of the
    same run that won the race (the store's put-if-absent). ``notes`` go into the commit's metadata
    (the subject version a run read, say)."""
    from deltalake.exceptions import CommitFailedError, DeltaError
    from deltalake.transaction import AddAction, CommitProperties, Transaction

    now = int(time.time() * 1000)
    adds = [AddAction(f.path, f.size, f.partition_values, now, True, f.stats) for f in files]
    metadata = {"inlet.txn": f"{txn.app_id}:{txn.version}", **(notes or {})}
    uri, partition_by = table.uri, list(table.partition_by)
    for attempt in range(1, _COMMIT_TRIES + 1):
        try:
            if not table.exists():
                _create_empty(table, delta_schema(schema))
            delta = table.delta()
            done = delta.transaction_version(txn.app_id)
            if done is not None and done >= txn.version:
                return None
            if list(delta.metadata().partition_columns) != partition_by:
                raise JobError("invalid_spec", f"{uri} is partitioned by {delta.metadata().partition_columns}, the spec says {partition_by}")
            require(delta, "replace" if removes else "append", uri)
            same_kind(table, delta, schema)
            evolve_schema(table, delta, schema)
            apps = [Transaction(txn.app_id, txn.version)]
            if removes:  # a rewrite: fenced against table maintenance (spark_jobs.delta_log)
                check_still_live(delta, [r.path for r in removes])
                _check_no_new_vectors(delta, removes)
                apps.append(rewrite_fence(delta.version()))
            delta.create_write_transaction(adds + list(removes), mode="append", schema=delta.schema(), partition_by=partition_by,
                                           commit_properties=CommitProperties(app_transactions=apps, custom_metadata=metadata))
            delta.update_incremental()
            return delta.version()
        except (DeltaError, OSError) as exc:
            if _committed_meanwhile(table, txn):
                return None
            # A concurrent metadata-only commit (a second create of a new table, a schema change) is
            # no reason to fail: read the table again and commit on top of it.
            if attempt < _COMMIT_TRIES and _METADATA_RACE in str(exc):
                log.info("commit to %s met a concurrent metadata change; trying again (%d)", uri, attempt)
                continue
            if removes and isinstance(exc, CommitFailedError):  # the fence: a compaction committed first
                raise JobError("target_conflict", f"the replace commit to {uri} met a concurrent rewrite of the "
                                                  f"table (maintenance): {exc}; it is retried and plans again") from None
            raise storage_failure(exc) or JobError("target_commit", f"commit to {uri} failed: {exc}") from None
    raise AssertionError("unreachable: the last try returns or raises")


def _check_no_new_vectors(delta: DeltaTable, removes: Sequence[RemoveAction]) -> None:
    """Refuse (``target_conflict``, retried) a replay's commit whose removes name files that now carry a
    deletion vector: another engine deleted or updated rows in them after the replay planned (an
    UPDATE's new rows are in a file the plan does not know), and a remove without the vector would not
    remove them. The attempt is tried again and plans anew (``replace.plan_replace``)."""
    changed = sorted(has_deletion_vectors(delta) & {r.path for r in removes})
    if changed:
        raise JobError("target_conflict", f"{len(changed)} file(s) this run replaces had rows deleted or updated by "
                                          f"another writer after it planned, e.g. {changed[0]}; it is retried and "
                                          "plans again")


def merge_changes(table: Table, txn: Txn, changes: pa.Table, key: Sequence[str], *, soft_deletes: bool = False) -> Merged | None:
    """ONE delta-rs MERGE of ``changes`` (the latest change per key, ``delta_tables.changes``) into
    ``table``, tagged with ``txn``: a key's row is set, or marked deleted, only by a change of a higher
    ``_inlet_sequence`` than the one it holds, so re-applying older changes never moves it back. The
    condition carries the batch's key range (``key_bounds``): delta-rs reads only the files that can
    hold its keys (bench/keyed_scale.py: 0.5 s, not 7 s, for 100k clustered keys of 10M).
    With ``soft_deletes`` (``soft_clauses``) a deleted key's row keeps the values of its last change
    before the delete. Returns what ``merge_once`` returns."""
    return merge_once(table, txn, changes.schema, key, changes_merger(changes, key, soft_deletes),
                      counted=("inserted", "updated"))


def changes_merger(changes: pa.Table, key: Sequence[str],
                   soft_deletes: bool) -> Callable[[DeltaTable, CommitProperties], TableMerger | None]:
    """``merge_changes``' MERGE, built by ``merge_once`` on the table as read: the key's condition and
    bounds, the table's columns (``with_table_columns``), ``change_clauses``."""
    on = " AND ".join([f't."{k}" = s."{k}"' for k in key] + key_bounds(changes, key))

    def merger(delta: DeltaTable, properties: CommitProperties) -> TableMerger | None:
        held = pa.schema(delta.schema().to_arrow())
        source = with_table_columns(changes, held)
        if not source.num_rows:
            return None
        merge = delta.merge(source, on, source_alias="s", target_alias="t", commit_properties=properties)
        return change_clauses(merge, held, key, soft_deletes)

    return merger


def change_clauses(merge: M, columns: pa.Schema, key: Sequence[str], soft_deletes: bool) -> M:
    """A keyed table's MERGE clauses on ``merge`` (delta-rs's ``TableMerger``, or delta-spark's builder
    behind ``spark_merge.SparkClauses``): a row set only by a newer change; with ``soft_deletes``
    ``soft_clauses``. Identifiers in delta-rs's "quotes", literals only numbers."""
    from spark_jobs.columns import SEQUENCE

    if soft_deletes:
        return soft_clauses(merge, columns, key)
    return merge.when_matched_update_all(predicate=f't."{SEQUENCE}" < s."{SEQUENCE}"').when_not_matched_insert_all()


def soft_clauses(merge: M, columns: pa.Schema, key: Sequence[str]) -> M:
    """A soft-deleting table's MERGE clauses. A row holds the values of the change of sequence
    ``_inlet_values_sequence``: its own while live; while deleted, the key's last change before the
    delete, whichever order the changes arrive in. Clauses apply in order, the first that holds:

    1. a newer delete that carries no newer values: the flags, the delete's sequence and time (and the
       values' sequence of a row from before soft deletes);
    2. any other newer change: the whole row (a delete carrying values takes them);
    3. an older change to a deleted row whose values are newer than the row's and older than its
       delete (an update that arrived late): the values only, the row stays deleted.
    """
    from spark_jobs.columns import DELETED, DELETED_AT, RUN_ID, SEQUENCE, VALUES_SEQUENCE

    newer = f't."{SEQUENCE}" < s."{SEQUENCE}"'
    # The row's values' sequence; a row from before soft deletes: its own sequence while live, none when deleted.
    # The lowest 64-bit integer, as an expression both SQLs type as one (Spark types -(2**63) as a decimal).
    held = f'COALESCE(t."{VALUES_SEQUENCE}", CASE WHEN t."{DELETED}" THEN {-(2**63) + 1} - 1 ELSE t."{SEQUENCE}" END)'
    carried = f's."{VALUES_SEQUENCE}" IS NOT NULL AND s."{VALUES_SEQUENCE}" > {held}'
    flags = (SEQUENCE, DELETED, DELETED_AT, RUN_ID)
    values = [f.name for f in columns if f.name not in (*key, *flags, VALUES_SEQUENCE)]
    kept = f'CASE WHEN t."{DELETED}" THEN t."{VALUES_SEQUENCE}" ELSE {held} END'
    return (merge.when_matched_update({**{f'"{c}"': f's."{c}"' for c in flags}, f'"{VALUES_SEQUENCE}"': kept},
                                      predicate=f'{newer} AND s."{DELETED}" AND NOT ({carried})')
            .when_matched_update({f'"{f.name}"': f's."{f.name}"' for f in columns}, predicate=newer)
            .when_matched_update({f'"{c}"': f's."{c}"' for c in (*values, VALUES_SEQUENCE, RUN_ID)},
                                 predicate=f't."{DELETED}" AND {carried} AND s."{VALUES_SEQUENCE}" < t."{SEQUENCE}"')
            .when_not_matched_insert({f'"{f.name}"': f's."{f.name}"' for f in columns}))


def merge_once(table: Table, txn: Txn, schema: pa.Schema, key: Sequence[str],
               merger: Callable[[DeltaTable, CommitProperties], Merge | None], *,
               counted: Sequence[str], operation: Operation = "merge") -> Merged | None:
    """ONE MERGE into ``table`` (created with ``schema``, its ``key`` columns marked, whose new columns
    are added first by delta-rs; a table keyed otherwise is refused), tagged with ``txn``: ``merger``
    builds it on the table as read, delta-rs's or delta-spark's (``spark_merge``), or returns None
    (nothing to merge: the txn is committed alone). A MERGE that loses to a concurrent commit
    (compaction, say) reads the table again and merges again. Returns what it committed, its rows the
    MERGE's ``counted`` ones (``num_target_rows_<kind>``), or None if ``txn`` was committed before.
    A table whose features ``operation`` cannot honour is refused first (``table_features``)."""
    from deltalake.exceptions import CommitFailedError, DeltaError
    from deltalake.transaction import CommitProperties, Transaction

    properties = CommitProperties(app_transactions=[Transaction(txn.app_id, txn.version)],
                                  custom_metadata={"inlet.txn": f"{txn.app_id}:{txn.version}"})
    for attempt in range(1, _COMMIT_TRIES + 1):
        try:
            if not table.exists():
                _create_empty(table, delta_schema(key_marked(schema, key)))
            delta = table.delta()
            done = delta.transaction_version(txn.app_id)
            if done is not None and done >= txn.version:
                return None
            require(delta, operation, table.uri)
            same_kind(table, delta, schema)
            _same_key(table, delta, key)
            evolve_schema(table, delta, schema)
            read_at = delta.version()
            if (merge := merger(delta, properties)) is not None:
                metrics = merge.execute()  # the table object is then at the MERGE's version, if it committed one
                merged_at = delta.version()
                delta.update_incremental()
                if merged_at > read_at:
                    return _counted(table, merged_at, metrics, counted)
            # Nothing changed (a MERGE then commits nothing): the txn alone.
            delta.create_write_transaction([], mode="append", schema=delta.schema(), partition_by=list(table.partition_by),
                                           commit_properties=properties)
            delta.update_incremental()
            return Merged(delta.version(), 0, 0, 0)
        except (DeltaError, OSError) as exc:
            if _committed_meanwhile(table, txn):
                return None
            if attempt < _COMMIT_TRIES and (_METADATA_RACE in str(exc) or isinstance(exc, CommitFailedError)):
                log.info("merge into %s met a concurrent commit; merging again (%d): %s", table.uri, attempt, exc)
                continue
            if isinstance(exc, CommitFailedError):
                raise JobError("target_conflict", f"the merge into {table.uri} met concurrent commits {_COMMIT_TRIES} "
                                                  f"times: {exc}; the run is retried") from None
            raise storage_failure(exc) or JobError("target_commit", f"merge into {table.uri} failed: {exc}") from None
    raise AssertionError("unreachable: the last try returns or raises")


class Merged(NamedTuple):
    """What a MERGE committed: the table's version, the data files it added and their bytes (what
    table maintenance and a tenant's usage count), and the rows it set (the run's ``rows_written``): a
    key's row inserted or updated (the changes newer than the table's: a replay's older ones set none;
    in a soft-deleting table also a deleted row's values, set by an update that arrived after its
    delete), or in a history table the versions it inserted."""

    version: int
    files: int
    bytes: int
    rows: int


def _counted(table: Table, version: int, metrics: dict[str, Any], counted: Sequence[str]) -> Merged:
    """What commit ``version`` of ``table`` (a MERGE, ``metrics`` its delta-rs metrics) set: its ``counted`` rows, and
    the data files it added and their bytes from its log entry (the metrics count files, not bytes); the
    metrics' count and no bytes where the entry cannot be read: the MERGE has committed, its run must not
    fail for a figure."""
    files = int(metrics.get("num_target_files_added") or 0)
    rows = sum(int(metrics.get(f"num_target_rows_{kind}") or 0) for kind in counted)
    filesystem, root = table.store.filesystem(table.uri)
    try:
        with filesystem.open_input_stream(f"{root.rstrip('/')}/_delta_log/{version:020d}.json") as entry:
            sizes = [int(action["add"]["size"]) for line in entry.read().decode().splitlines() if line.strip()
                     if "add" in (action := json.loads(line))]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("the bytes of %s v%d are not counted: its log entry could not be read (%s)", table.uri, version, exc)
        return Merged(version, files, 0, rows)
    return Merged(version, len(sizes), sum(sizes), rows)


def same_kind(table: Table, delta: DeltaTable, schema: pa.Schema) -> None:
    """A table holds one kind of rows for good: a row per record (append), the latest change per key
    (``_inlet_sequence``), or every version of a key (``_inlet_valid_from``, ``delta_tables.history``).
    Rows of another kind would not fit, and a MERGE into an append table would mix both silently."""
    held, wanted = _kind(pa.schema(delta.schema().to_arrow()).names), _kind(schema.names)
    if held != wanted:
        raise JobError("invalid_spec", f"{table.uri} holds {held}, not {wanted}: write that to a new path")


# A keyed table's key columns carry their position in the key as field metadata, set when the table is
# created: a MERGE by other columns would match other rows (a table from before the mark is not checked).
_KEY_MARK = "inlet.key"


def key_marked(schema: pa.Schema, key: Sequence[str]) -> pa.Schema:
    for position, name in enumerate(key):
        at = schema.get_field_index(name)
        schema = schema.set(at, schema.field(at).with_metadata({_KEY_MARK: str(position)}))
    return schema


def _same_key(table: Table, delta: DeltaTable, key: Sequence[str]) -> None:
    marked = sorted((int(f.metadata[_KEY_MARK]), f.name) for f in delta.schema().fields if _KEY_MARK in (f.metadata or {}))
    if marked and [name for _, name in marked] != list(key):
        raise JobError("invalid_spec", f"{table.uri} is keyed by {', '.join(name for _, name in marked)}, the pipeline "
                                       f"by {', '.join(key)}: write that to a new path")


def _kind(columns: Sequence[str]) -> str:
    from spark_jobs.columns import SEQUENCE, VALID_FROM

    if VALID_FROM in columns:
        return "every version of a key (mode upsert, scd_type 2)"
    return "the latest change per key (mode upsert)" if SEQUENCE in columns else "a row per record (mode append)"


def with_table_columns(rows: pa.Table, columns: pa.Schema) -> pa.Table:
    """``rows`` with the table's columns they lack as nulls: a change replaces its row whole, so a column
    the run lacks (a field dropped from the schema) is null in it, as in an appended row, not the value
    an older change left."""
    for f in columns:
        if f.name not in rows.column_names:
            rows = rows.append_column(f.name, pa.nulls(rows.num_rows, f.type))
    return rows


def key_ranges(changes: pa.Table, key: Sequence[str]) -> list[tuple[str, int | str, int | str]]:
    """The batch's range of each integer or string key column: every row a change matches lies in it,
    so the files whose statistics fall outside need not be read. A Delta writer's statistics are bounds
    whatever it truncates (delta-rs cuts a long string's max to a prefix whose last character it raises,
    as delta-spark does), so a file that holds a matched key is never skipped."""
    ranges = []
    for k in key:
        kind = changes.schema.field(k).type
        if changes.num_rows and (pa.types.is_integer(kind) or pa.types.is_string(kind) or pa.types.is_large_string(kind)):
            least, most = pc.min_max(changes[k]).values()
            if least.is_valid:
                ranges.append((k, least.as_py(), most.as_py()))
    return ranges


def key_bounds(changes: pa.Table, key: Sequence[str]) -> list[str]:
    """``key_ranges`` as literals for the MERGE's condition, which delta-rs prunes files by."""
    return [bound for k, least, most in key_ranges(changes, key)
            for bound in (f't."{k}" >= {literal(least)}', f't."{k}" <= {literal(most)}')]


def literal(value: int | str) -> str:
    """``value`` as a SQL literal of delta-rs's parser: a string's quotes doubled, nothing else escaped."""
    return str(value) if isinstance(value, int) else "'" + value.replace("'", "''") + "'"


def _create_empty(table: Table, schema: Schema) -> None:
    """A new table without rows, so that the run's rows go in as an append: delta-rs checks an
    append's app transaction against concurrent commits of the same run, but lets two creates with
    the same transaction both commit (seen on S3: the second landed as version 1)."""
    from deltalake.exceptions import DeltaError
    from deltalake.transaction import create_table_with_add_actions

    try:
        create_table_with_add_actions(table.uri, schema, [], mode="ignore", partition_by=list(table.partition_by),
                                      storage_options=table.store.delta_options)
    except DeltaError:
        if not table.exists():  # not a concurrent create's doing
            raise
    list_invariants(table.delta())


def last_note(table: Table, key: str, within: int = 100) -> str | None:
    """The newest value of commit metadata ``key`` among the table's last ``within`` commits."""
    if not table.exists():
        return None
    for commit in table.delta().history(within):
        if key in commit:
            return str(commit[key])
    return None


def _committed_meanwhile(table: Table, txn: Txn) -> bool:
    """After a failed commit: whether another attempt of this run committed ``txn`` first."""
    try:
        return already_committed(table, txn)
    except Exception:  # noqa: BLE001 - the commit's own error is the one to report
        return False


def evolve_schema(table: Table, delta: DeltaTable, schema: pa.Schema) -> None:
    """Add ``schema``'s new columns, nested ones too, to the table (as nullable); a changed type fails
    as ``schema_incompatible``. delta-rs's write transaction keeps the table's schema, so the new
    columns go in a metadata-only commit just before the data's: readers may see an added nullable
    column one version early, never rows without their columns."""
    from deltalake import write_deltalake

    from spark_jobs.formats.evolution import TypeChange, field_paths, merge_schema

    current = pa.schema(delta.schema().to_arrow())
    try:
        merged = merge_schema(current, schema)
    except TypeChange as change:
        raise JobError("schema_incompatible", f"{table.uri}: {change}") from None
    if field_paths(merged) != field_paths(current):
        require(delta, "schema_change", table.uri)
        with_variants = holds_variant_column(delta) or any(holds_variant(f.type) for f in merged)
        if not with_variants:
            write_deltalake(delta, merged.empty_table(), mode="append", schema_mode="merge",
                            storage_options=table.store.delta_options)
        else:  # delta-rs's merge reads a VARIANT as a struct, and would write it back as one
            new = [f for f in merged if f.name not in current.names]
            if len(field_paths(pa.schema([f for f in merged if f.name in current.names]))) != len(field_paths(current)):
                raise JobError("schema_incompatible", f"{table.uri}: a field added inside an existing column of a table "
                                                      "with VARIANT columns, which delta-rs cannot add: add it with "
                                                      "delta-spark (ALTER TABLE ... ADD COLUMNS) or write to a new path")
            delta.alter.add_columns([delta_field(f.with_nullable(True)) for f in new])
            list_invariants(delta)
        delta.update_incremental()
