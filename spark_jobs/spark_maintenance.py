"""A table's maintenance by delta-spark, in a job on the Spark cluster (``spark_jobs/compact.py``),
for the tables delta-rs cannot maintain or not fully: a clustered table (liquid clustering, which only
delta-spark's OPTIMIZE clusters; delta-rs cannot write it at all), any other table only delta-spark
writes (``table_features.SPARK_WRITES``: row tracking, in-commit timestamps...), and a table whose
files carry deletion vectors (delta-rs's compaction leaves those files as they are; OPTIMIZE and
``REORG ... APPLY (PURGE)`` rewrite them without their deleted rows). ``maintenance.wants_delta_spark``
decides; the maintenance worker sends such a table here (``maintenance.Offload``).

    properties  the policy's (``upkeep.wanted_properties``) that differ, by ALTER TABLE.
    compact     OPTIMIZE (clustered: by its clustering columns; else bin-packing, or ZORDER BY the
                policy's columns), then REORG TABLE ... APPLY (PURGE) where a file still carries a
                deletion vector.
    vacuum      VACUUM ... RETAIN the policy's hours: delta-spark knows which deletion vectors are live.
    checkpoint  a checkpoint of the table's latest version, then the expired log entries cleaned.

Every commit is tagged with the job's token (its ``userMetadata``: ``offload.CompactionJob.settle``
finds it by that). A concurrent writer's commit that wins is ``conflict``, tried again by a later task.
"""

from __future__ import annotations

import json
import re
import time
from typing import TYPE_CHECKING, Any

from spark_jobs.errors import classify
from spark_jobs.maintenance import (
    CheckpointResult,
    CompactionResult,
    MaintenanceSteps,
    SparkMaintenance,
    StepOutcome,
    TablePolicy,
    VacuumResult,
)
from spark_jobs.maintenance.compaction import TOKEN_KEY
from spark_jobs.maintenance.upkeep import properties_to_set
from spark_jobs.table_features import TableFeatures, has_deletion_vectors, writer_for

if TYPE_CHECKING:
    from deltalake import DeltaTable
    from pyspark.sql import SparkSession

_CONCURRENT = re.compile(r"Concurrent\w*Exception|ConcurrentModification")
USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"


def maintain_on_spark(spark: SparkSession, delta: DeltaTable, uri: str, policy: TablePolicy, ops: MaintenanceSteps,
                      token: str) -> SparkMaintenance:
    """``ops`` on the table at ``uri`` by delta-spark on ``spark``, each step reported, none raising."""
    spark.conf.set(USER_METADATA, json.dumps({TOKEN_KEY: token, "inlet.maintenance": "delta-spark"}))
    try:
        properties, unset = _properties(spark, delta, uri, policy)
        return SparkMaintenance(
            properties_set=properties, properties_error=unset,
            compaction=_compact(spark, delta, uri, policy) if ops.compact else None,
            vacuum=_vacuum(spark, delta, uri, policy) if ops.vacuum else None,
            checkpoint=_checkpoint(spark, uri) if ops.checkpoint else None)
    finally:
        spark.conf.unset(USER_METADATA)


def _properties(spark: SparkSession, delta: DeltaTable, uri: str, policy: TablePolicy) -> tuple[dict[str, str], str | None]:
    """The policy's table properties that differ, set first (so the steps' commits follow them)."""
    try:
        writer_for(delta, "properties", uri, spark=True)
        changed = properties_to_set(delta, policy.properties())
        if changed:
            pairs = ", ".join(f"'{k}' = '{v}'" for k, v in sorted(changed.items()))  # Inlet's own keys and values
            spark.sql(f"ALTER TABLE {_ref(uri)} SET TBLPROPERTIES ({pairs})")
            delta.update_incremental()
    except Exception as exc:  # noqa: BLE001 - reported; the next task sets them
        return {}, _failure(exc)
    return changed, None


def _compact(spark: SparkSession, delta: DeltaTable, uri: str, policy: TablePolicy) -> CompactionResult:
    began = time.monotonic()
    try:
        writer_for(delta, "compact", uri, spark=True)
        features = TableFeatures.of(delta)
        order = "" if "clustering" in features.features or not policy.z_order_by else \
            " ZORDER BY (" + ", ".join(f"`{c}`" for c in policy.z_order_by) + ")"
        spark.conf.set("spark.databricks.delta.optimize.maxFileSize", str(policy.target_file_bytes))
        metrics = spark.sql(f"OPTIMIZE {_ref(uri)}{order}").collect()[0].metrics
        removed, added = metrics.filesRemoved, metrics.filesAdded
        counts = [removed.totalFiles, added.totalFiles, removed.totalSize, added.totalSize]
        delta.update_incremental()
        if has_deletion_vectors(delta):  # files OPTIMIZE left (large enough alone) with deleted rows in them
            purged = spark.sql(f"REORG TABLE {_ref(uri)} APPLY (PURGE)").collect()[0].metrics
            counts = [a + b for a, b in zip(counts, [purged.filesRemoved.totalFiles, purged.filesAdded.totalFiles,
                                                     purged.filesRemoved.totalSize, purged.filesAdded.totalSize],
                                            strict=True)]
    except Exception as exc:  # noqa: BLE001 - reported; the next task tries again
        return CompactionResult(_outcome(exc), seconds=_since(began), error=_failure(exc))
    delta.update_incremental()
    return CompactionResult("done" if counts[0] else "nothing", files_removed=counts[0], files_added=counts[1],
                            bytes_removed=counts[2], bytes_added=counts[3], version=delta.version() if counts[0] else None,
                            seconds=_since(began))


def _vacuum(spark: SparkSession, delta: DeltaTable, uri: str, policy: TablePolicy) -> VacuumResult:
    began, hours = time.monotonic(), policy.vacuum_retention_hours
    try:
        delta.update_incremental()
        writer_for(delta, "vacuum", uri, spark=True)
        # The control plane holds the retention's floor (a setting), as for delta-rs's vacuum.
        spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
        before = delta.version()
        spark.sql(f"VACUUM {_ref(uri)} RETAIN {int(hours)} HOURS").collect()
        # Its count is in the log: the metrics of the VACUUM END it committed.
        ended = [r.operationMetrics for r in spark.sql(f"DESCRIBE HISTORY {_ref(uri)} LIMIT 5").collect()
                 if r.operation == "VACUUM END" and r.version > before]
        deleted = int((ended[0] if ended else {}).get("numDeletedFiles") or 0)
    except Exception as exc:  # noqa: BLE001 - as above
        return VacuumResult(_outcome(exc), retention_hours=hours, seconds=_since(began), error=_failure(exc))
    return VacuumResult("done" if deleted else "nothing", files_deleted=deleted, retention_hours=hours,
                        seconds=_since(began))


def _checkpoint(spark: SparkSession, uri: str) -> CheckpointResult:
    began = time.monotonic()
    try:
        jvm: Any = spark._jvm  # py4j's view of the driver's JVM: untyped
        log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, uri)
        log.checkpoint()  # of the latest version; then the expired log entries cleaned, by the table's properties
        version = int(log.unsafeVolatileSnapshot().version())
    except Exception as exc:  # noqa: BLE001 - as above
        return CheckpointResult("failed", seconds=_since(began), error=_failure(exc))
    return CheckpointResult("done", version=version, seconds=_since(began))


def _ref(uri: str) -> str:
    """The table at ``uri`` in Spark SQL; a path holding a backtick is refused, never spliced in."""
    if "`" in uri:
        raise ValueError(f"a table path with a backtick cannot be named in Spark SQL: {uri}")
    return f"delta.`{uri}`"


def _outcome(exc: BaseException) -> StepOutcome:
    return "conflict" if _CONCURRENT.search(f"{type(exc).__name__} {exc}") else "failed"


def _failure(exc: BaseException) -> str:
    error = classify(exc)
    return f"{error.kind}: {error.message}"[:500]


def _since(began: float) -> float:
    return round(time.monotonic() - began, 3)
