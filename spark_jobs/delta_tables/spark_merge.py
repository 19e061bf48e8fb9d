"""A keyed table's MERGE on the run's Spark: delta-spark's, which spreads the rewrite of the files
the batch touches over the executors, for tables past what one driver rewrites per run
(docs/performance.md, "Where delta-rs on the driver stops being enough").

The same MERGE as the driver's (``commit.merge_changes``): the same condition and key-range bounds,
the same clauses (``commit.change_clauses``, plain or soft-deleting, given delta-spark's builder by
``SparkClauses``), inside ``commit.merge_once``, which checks the run's txn, the table's kind and key and adds
new columns first with delta-rs, then counts what the commit set. Only the MERGE itself runs here,
tagged with the run's txn through delta-spark's idempotent-DML session settings, so an attempt that
finds the txn committed meanwhile writes nothing (and says so: ``merge_once`` then returns None), and
with a mark of its own, by which it finds its commit and its metrics. A MERGE that loses to a concurrent commit
(compaction, say) fails as delta-rs's would, and ``merge_once`` merges again.

An SCD type 2 table's MERGE (``history.merge_history``) goes the same way: the driver reads the
batch's keys' versions (their key and validity columns only) and stages the rows to insert and the
versions they close, and delta-spark's MERGE, with the history's clauses, rewrites the files.

Which tables: those of ``target.merge_on_spark_bytes`` or more (the platform's
``INLET_SPARK_MERGE_MIN_MB``) on a file system the run's Spark reaches (a local or shared disk:
Inlet gives Spark no object store's connector), when the run's Spark has delta-spark (the jars
``make setup`` caches).
"""

from __future__ import annotations

import contextlib
import logging
import re
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Self, cast

import pyarrow as pa

from spark_jobs import jars
from spark_jobs.delta_log import commit_actions
from spark_jobs.delta_tables import Table
from spark_jobs.delta_tables.commit import (
    Merged,
    change_clauses,
    changes_merger,
    key_ranges,
    merge_once,
    with_table_columns,
)
from spark_jobs.maintenance.health import live_files

if TYPE_CHECKING:
    from delta.tables import DeltaMergeBuilder
    from deltalake import DeltaTable
    from deltalake.table import TableMerger
    from deltalake.transaction import CommitProperties
    from pyspark.sql import Column, SparkSession
    from pyspark.sql.types import StructType

    from spark_jobs.spec import Txn

log = logging.getLogger("inlet.delta")

DELTA_EXTENSION = jars.DELTA_SQL_CONF["spark.sql.extensions"]
# delta-spark's idempotent DML: a MERGE under these session settings commits the txn with its rows,
# or nothing when the table has it already (delta-io/delta#1555).
_TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
_TXN_VERSION = "spark.databricks.delta.write.txnVersion"
_USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"
# What delta-spark's commit says it set, under delta-rs's names (``commit._counted`` reads them).
_METRICS = {"numTargetRowsInserted": "num_target_rows_inserted", "numTargetRowsUpdated": "num_target_rows_updated",
            "numTargetFilesAdded": "num_target_files_added"}


def merges_on_spark(table: Table, extensions: str | None) -> bool:
    """Whether ``table``'s MERGE may go to the run's Spark (``merge_changes_on_spark`` then decides by
    its size as read): it is on a file system Spark reads without a connector, and the run's Spark has
    delta-spark (its ``spark.sql.extensions``, which Inlet sets with the jars ``make setup`` caches)."""
    if "://" in table.uri and not table.uri.startswith("file://"):
        log.info("%s is merged on the driver: Inlet gives Spark no object store's connector", table.uri)
        return False
    if DELTA_EXTENSION not in (extensions or ""):
        log.warning("%s is merged on the driver: the run's Spark lacks delta-spark (`make setup` caches its jars)", table.uri)
        return False
    return True


def merge_changes_on_spark(spark: SparkSession, table: Table, txn: Txn, changes: pa.Table, key: Sequence[str], *,
                           least_bytes: int = 0, soft_deletes: bool = False) -> Merged | None:
    """``commit.merge_changes`` (a key's row set only by a newer change; ``soft_deletes`` as there) as
    delta-spark's MERGE when the table, as the attempt reads it, holds ``least_bytes`` or more of live
    files; as delta-rs's on the driver below that (a new table holds none)."""
    on_driver = changes_merger(changes, key, soft_deletes)

    def merger(delta: DeltaTable, properties: CommitProperties) -> SparkMerge | TableMerger | None:
        if not large_enough(delta, least_bytes):
            return on_driver(delta, properties)
        held = pa.schema(delta.schema().to_arrow())
        source = with_table_columns(changes, held)
        if not source.num_rows:
            return None
        return SparkMerge(spark, table, delta, txn, source, key,
                          lambda merge: change_clauses(merge, held, key, soft_deletes))

    return merge_once(table, txn, changes.schema, key, merger, counted=("inserted", "updated"))


def large_enough(delta: DeltaTable, least_bytes: int) -> bool:
    """Whether ``delta``, as an attempt reads it, holds ``least_bytes`` or more of live files: its
    MERGE goes to delta-spark."""
    return sum(f.size for f in live_files(delta)) >= least_bytes


class SparkMerge:
    """One delta-spark MERGE of ``source`` into ``table``: a source row matches the target's rows of
    equal ``key`` and ``also_equal`` columns (the target's key in the source's range), then
    ``clauses``, the driver's (``commit.change_clauses``, ``history.history_clauses``) given
    delta-spark's builder (``SparkClauses``). ``source`` holds the table's columns, and may hold
    more for the clauses to read. ``execute`` leaves ``delta`` (delta-rs's view of the table) at the
    MERGE's version, as delta-rs's own MERGE does, and returns its metrics."""

    def __init__(self, spark: SparkSession, table: Table, delta: DeltaTable, txn: Txn, source: pa.Table,
                 key: Sequence[str], clauses: Callable[[SparkClauses], SparkClauses], *,
                 also_equal: Sequence[str] = ()) -> None:
        self.spark, self.table, self.delta, self.txn = spark, table, delta, txn
        self.source, self.key, self.clauses, self.also_equal = source, key, clauses, also_equal

    def execute(self) -> dict[str, Any]:
        import delta.exceptions  # noqa: F401 - installs the conversion of delta-spark's conflicts to Python classes
        from delta.tables import DeltaTable as SparkDeltaTable
        from deltalake.exceptions import DeltaError

        read_at = self.delta.version()
        attempt = f"inlet-merge-{uuid.uuid4()}"  # names this attempt's commit among any other attempt's
        settings = {_TXN_APP_ID: self.txn.app_id, _TXN_VERSION: str(self.txn.version), _USER_METADATA: attempt}
        for name, value in settings.items():
            self.spark.conf.set(name, value)
        try:
            target = SparkDeltaTable.forPath(self.spark, self.table.uri)
            schema = self._schema(target)
            rows = self.spark.createDataFrame(self.source.select(schema.names), schema=schema)
            merge = target.alias("t").merge(rows.alias("s"), _matching(self.source, self.key, self.also_equal))
            self.clauses(SparkClauses(merge)).builder.execute()
        except Exception as exc:  # noqa: BLE001 - delta-spark's conflicts become delta-rs's, the rest fails the commit
            raise _as_delta_error(exc) from None
        finally:
            with contextlib.suppress(Exception):  # a JVM gone: the error above is the one to report
                for name in settings:
                    self.spark.conf.unset(name)
        self.delta.update_incremental()
        found = _attempts_commit(self.table, attempt, read_at, self.delta.version())
        if found is None:
            done = self.delta.transaction_version(self.txn.app_id)
            if done is not None and done >= self.txn.version:
                # delta-spark found the txn committed by another attempt after merge_once read: theirs.
                raise DeltaError(f"delta-spark: txn {self.txn.app_id} v{self.txn.version} committed meanwhile")
            self.delta.load_as_version(read_at)  # it committed nothing: merge_once commits the txn alone
            return {}
        version, metrics = found
        self.delta.load_as_version(version)
        log.info("delta-spark merged %d rows into %s v%d", self.source.num_rows, self.table.uri, version)
        return {ours: int(metrics.get(theirs) or 0) for theirs, ours in _METRICS.items()}

    def _schema(self, target: Any) -> StructType:
        """The source's Spark types: the table's own, in its column order (a time without a zone stays
        one), every one nullable (a staged row carries only what its clause sets), then the source's
        other columns."""
        from pyspark.sql.pandas.types import from_arrow_type
        from pyspark.sql.types import StructField, StructType

        held = target.toDF().schema
        extra = [StructField(f.name, from_arrow_type(f.type), True) for f in self.source.schema if f.name not in held.names]
        return StructType([StructField(f.name, f.dataType, True) for f in held.fields] + extra)


class SparkClauses:
    """delta-rs's ``TableMerger`` clause methods (``commit.Clauses``) over delta-spark's
    ``DeltaMergeBuilder``: the driver's clause text, its "quoted" identifiers in Spark's `quotes`."""

    def __init__(self, builder: DeltaMergeBuilder) -> None:
        self.builder = builder

    def when_matched_update(self, updates: dict[str, str], predicate: str | None = None) -> Self:
        self.builder = self.builder.whenMatchedUpdate(condition=_spark_sql(predicate), set=_spark_map(updates))
        return self

    def when_matched_update_all(self, predicate: str | None = None) -> Self:
        self.builder = self.builder.whenMatchedUpdateAll(condition=_spark_sql(predicate))
        return self

    def when_not_matched_insert(self, updates: dict[str, str], predicate: str | None = None) -> Self:
        values = _spark_map(updates)
        condition = _spark_sql(predicate)
        self.builder = (self.builder.whenNotMatchedInsert(values=values) if condition is None
                        else self.builder.whenNotMatchedInsert(condition, values))
        return self

    def when_not_matched_insert_all(self, predicate: str | None = None) -> Self:
        self.builder = self.builder.whenNotMatchedInsertAll(condition=_spark_sql(predicate))
        return self


_QUOTED = re.compile(r'"([^"]*)"')


def _spark_sql(text: str | None) -> str | None:
    """delta-rs's clause text in Spark SQL: each "identifier" as `identifier`. The clauses' only string
    literals are single-quoted words (``history.history_clauses``' 'insert' and 'close'), which both
    read alike, so every double quote delimits a name."""
    if text is None:
        return None
    return _QUOTED.sub(lambda m: "`" + m.group(1).replace("`", "``") + "`", text)


def _spark_map(updates: dict[str, str]) -> dict[str, str | Column]:
    return {cast(str, _spark_sql(column)): cast(str, _spark_sql(value)) for column, value in updates.items()}


def _col(alias: str, name: str) -> Column:
    from pyspark.sql import functions as F

    return F.col(f"{alias}.`{name.replace('`', '``')}`")


def _matching(source: pa.Table, key: Sequence[str], also_equal: Sequence[str] = ()) -> Column:
    """The MERGE's condition: every key column (and ``also_equal``'s) equal, and the target's key in
    the source's range, as ``commit.key_bounds`` gives delta-rs (delta-spark skips files by their
    statistics on it too). Columns, not SQL text: Spark's and delta-rs's SQL quote and escape differently."""
    from functools import reduce

    from pyspark.sql import functions as F

    terms = [_col("t", k) == _col("s", k) for k in (*key, *also_equal)]
    for k, least, most in key_ranges(source, key):
        terms += [_col("t", k) >= F.lit(least), _col("t", k) <= F.lit(most)]
    return reduce(lambda a, b: a & b, terms)


def _attempts_commit(table: Table, attempt: str, after: int, until: int) -> tuple[int, dict[str, Any]] | None:
    """The version after ``after``, up to ``until``, that this ``attempt`` committed (its commit's user
    metadata), and its operation metrics."""
    for version in range(after + 1, until + 1):
        info: dict[str, Any] = next((a["commitInfo"] for a in commit_actions(table.store, table.uri, version)
                                     if "commitInfo" in a), {})
        if info.get("userMetadata") == attempt:
            return version, info.get("operationMetrics") or {}
    return None


def _as_delta_error(exc: Exception) -> Exception:
    """delta-spark's failure as ``merge_once`` handles delta-rs's: a lost race (any of delta-spark's
    conflicts, a concurrent metadata or protocol change included) as ``CommitFailedError`` (merged
    again), anything else as a ``DeltaError`` with Spark's first line."""
    from delta.exceptions import base
    from deltalake.exceptions import CommitFailedError, DeltaError

    conflicts = (base.DeltaConcurrentModificationException, base.ConcurrentWriteException, base.MetadataChangedException,
                 base.ProtocolChangedException, base.ConcurrentAppendException, base.ConcurrentDeleteReadException,
                 base.ConcurrentDeleteDeleteException, base.ConcurrentTransactionException)
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    if isinstance(exc, conflicts):
        return CommitFailedError(f"delta-spark: {first}")
    return DeltaError(f"delta-spark: {first}")
