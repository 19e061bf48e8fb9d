"""A keyed table's MERGE on the run's Spark: delta-spark's, which spreads the rewrite of the files
the batch touches over the executors, for tables past what one driver rewrites per run
(docs/performance.md, "Where delta-rs on the driver stops being enough").

The same MERGE as the driver's (``commit.merge_changes``): the same condition, key-range bounds and
clauses, inside ``commit.merge_once``, which checks the run's txn, the table's kind and key and adds
new columns first with delta-rs, then counts what the commit set. Only the MERGE itself runs here,
tagged with the run's txn through delta-spark's idempotent-DML session settings, so an attempt that
finds the txn committed meanwhile writes nothing. A MERGE that loses to a concurrent commit
(compaction, say) fails as delta-rs's would, and ``merge_once`` merges again.

Which tables: those of ``target.merge_on_spark_bytes`` or more (the platform's
``INLET_SPARK_MERGE_MIN_MB``) on a file system the run's Spark reaches (a local or shared disk:
Inlet gives Spark no object store's connector), when the run's Spark has delta-spark (the jars
``make setup`` caches). Soft-deleting and SCD type 2 tables stay on the driver.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from spark_jobs import jars
from spark_jobs.delta_tables import Table
from spark_jobs.delta_tables.commit import Merged, key_ranges, merge_once, with_table_columns
from spark_jobs.maintenance.health import live_files

if TYPE_CHECKING:
    from deltalake import DeltaTable
    from deltalake.transaction import CommitProperties
    from pyspark.sql import Column, SparkSession

    from spark_jobs.spec import Txn

log = logging.getLogger("inlet.delta")

DELTA_EXTENSION = jars.DELTA_SQL_CONF["spark.sql.extensions"]
# delta-spark's idempotent DML: a MERGE under these session settings commits the txn with its rows,
# or nothing when the table has it already (delta-io/delta#1555).
_TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
_TXN_VERSION = "spark.databricks.delta.write.txnVersion"
# What delta-spark's commit says it set, under delta-rs's names (``commit._counted`` reads them).
_METRICS = {"numTargetRowsInserted": "num_target_rows_inserted", "numTargetRowsUpdated": "num_target_rows_updated",
            "numTargetFilesAdded": "num_target_files_added"}


def merges_on_spark(table: Table, least_bytes: int | None, extensions: str | None) -> bool:
    """Whether ``table``'s MERGE goes to the run's Spark: it is at least ``least_bytes`` (None: never),
    on a file system Spark reads without a connector, and the run's Spark has delta-spark (its
    ``spark.sql.extensions``, which Inlet sets with the jars ``make setup`` caches)."""
    if least_bytes is None:
        return False
    if "://" in table.uri and not table.uri.startswith("file://"):
        log.info("%s is merged on the driver: Inlet gives Spark no object store's connector", table.uri)
        return False
    if DELTA_EXTENSION not in (extensions or ""):
        log.warning("%s is merged on the driver: the run's Spark lacks delta-spark (`make setup` caches its jars)", table.uri)
        return False
    if not table.exists():
        return least_bytes <= 0
    return sum(f.size for f in live_files(table.delta())) >= least_bytes


def merge_changes_on_spark(spark: SparkSession, table: Table, txn: Txn, changes: pa.Table, key: Sequence[str]) -> Merged | None:
    """``commit.merge_changes`` (a key's row set only by a newer change) as delta-spark's MERGE."""
    from spark_jobs.columns import SEQUENCE

    def merger(delta: DeltaTable, properties: CommitProperties) -> SparkMerge | None:
        source = with_table_columns(changes, pa.schema(delta.schema().to_arrow()))
        if not source.num_rows:
            return None
        return SparkMerge(spark, table, delta, txn, source, key, _col("t", SEQUENCE) < _col("s", SEQUENCE))

    return merge_once(table, txn, changes.schema, key, merger, counted=("inserted", "updated"))


class SparkMerge:
    """One delta-spark MERGE of ``source`` into ``table`` on ``key``: a matched row updated where
    ``newer`` holds, an unmatched key inserted. ``execute`` leaves ``delta`` (delta-rs's view of the
    table) at the MERGE's version, as delta-rs's own MERGE does, and returns its metrics."""

    def __init__(self, spark: SparkSession, table: Table, delta: DeltaTable, txn: Txn, source: pa.Table,
                 key: Sequence[str], newer: Column) -> None:
        self.spark, self.table, self.delta, self.txn = spark, table, delta, txn
        self.source, self.key, self.newer = source, key, newer

    def execute(self) -> dict[str, Any]:
        from delta.tables import DeltaTable as SparkDeltaTable

        condition = _matching(self.source, self.key)
        read_at = self.delta.version()
        rows = self.spark.createDataFrame(self.source)
        self.spark.conf.set(_TXN_APP_ID, self.txn.app_id)
        self.spark.conf.set(_TXN_VERSION, str(self.txn.version))
        try:
            (SparkDeltaTable.forPath(self.spark, self.table.uri).alias("t")
             .merge(rows.alias("s"), condition)
             .whenMatchedUpdateAll(condition=self.newer)
             .whenNotMatchedInsertAll()
             .execute())
        except Exception as exc:  # noqa: BLE001 - delta-spark's conflicts become delta-rs's, the rest fails the commit
            raise _as_delta_error(exc) from None
        finally:
            self.spark.conf.unset(_TXN_APP_ID)
            self.spark.conf.unset(_TXN_VERSION)
        self.delta.update_incremental()
        found = _txn_commit(self.table, self.txn, read_at, self.delta.version())
        if found is None:  # it committed nothing: merge_once commits the txn alone (or finds it was there)
            self.delta.load_as_version(read_at)
            return {}
        version, metrics = found
        self.delta.load_as_version(version)
        log.info("delta-spark merged %d changes into %s v%d", self.source.num_rows, self.table.uri, version)
        return {ours: int(metrics.get(theirs) or 0) for theirs, ours in _METRICS.items()}


def _col(alias: str, name: str) -> Column:
    from pyspark.sql import functions as F

    return F.col(f"{alias}.`{name.replace('`', '``')}`")


def _matching(source: pa.Table, key: Sequence[str]) -> Column:
    """The MERGE's condition: every key column equal, and the target's key in the batch's range, as
    ``commit.key_bounds`` gives delta-rs (delta-spark skips files by their statistics on it too).
    Columns, not SQL text: Spark's and delta-rs's SQL quote and escape differently."""
    from functools import reduce

    from pyspark.sql import functions as F

    terms = [_col("t", k) == _col("s", k) for k in key]
    for k, least, most in key_ranges(source, key):
        terms += [_col("t", k) >= F.lit(least), _col("t", k) <= F.lit(most)]
    return reduce(lambda a, b: a & b, terms)


def _txn_commit(table: Table, txn: Txn, after: int, until: int) -> tuple[int, dict[str, Any]] | None:
    """The version after ``after``, up to ``until``, whose commit carries ``txn``, and its operation metrics."""
    filesystem, root = table.store.filesystem(table.uri)
    for version in range(after + 1, until + 1):
        with filesystem.open_input_stream(f"{root.rstrip('/')}/_delta_log/{version:020d}.json") as entry:
            actions = [json.loads(line) for line in entry.read().decode().splitlines() if line.strip()]
        if any(a.get("txn", {}).get("appId") == txn.app_id and a["txn"].get("version") == txn.version for a in actions):
            info: dict[str, Any] = next((a["commitInfo"] for a in actions if "commitInfo" in a), {})
            return version, info.get("operationMetrics") or {}
    return None


def _as_delta_error(exc: Exception) -> Exception:
    """delta-spark's failure as ``merge_once`` handles delta-rs's: a lost race as ``CommitFailedError``
    (merged again), anything else as a ``DeltaError`` with Spark's first line."""
    from delta.exceptions import DeltaConcurrentModificationException
    from deltalake.exceptions import CommitFailedError, DeltaError

    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    if isinstance(exc, DeltaConcurrentModificationException) or "Concurrent" in type(exc).__name__:
        return CommitFailedError(f"delta-spark: {first}")
    return DeltaError(f"delta-spark: {first}")
