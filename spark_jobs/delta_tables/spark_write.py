"""A run's append, or a replace-mode replay, committed by delta-spark on the run's Spark: for a table
whose features delta-rs cannot write but delta-spark can (``table_features.SPARK_WRITES``: liquid
clustering, row tracking, in-commit timestamps, a column-mapped table's renamed columns, CHECK
constraints...; ``table_features.writer_for`` decides).

The rows of the files the job's tasks wrote are written again by delta-spark, in ONE commit: an append,
or for a replay an overwrite of its ranges (``replaceWhere``), tagged with the run's txn through
delta-spark's idempotent writes (``txnAppId``, ``txnVersion``: a repeat writes nothing). New columns
go in with the commit (``mergeSchema``); a changed type fails the run as ``schema_incompatible`` first,
as delta-rs's commits do. The tasks' files are deleted after the commit: delta-spark wrote its own.
What this costs, beside delta-rs's commit of the files as they are: the run's rows read and written once
more on the run's Spark.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Mapping, Sequence
from functools import reduce
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from spark_jobs.delta_log import commit_actions
from spark_jobs.delta_tables import Table
from spark_jobs.delta_tables.files import delete_files
from spark_jobs.errors import JobError, storage_failure
from spark_jobs.plans import DataFile
from spark_jobs.table_features import writer_for

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from spark_jobs.spec import Ranges, Txn

log = logging.getLogger("inlet.delta")


def commit_on_spark(spark: SparkSession, table: Table, txn: Txn, files: Sequence[DataFile], schema: pa.Schema, *,
                    ranges: Ranges | None = None, notes: Mapping[str, str] | None = None) -> int | None:
    """``files``' rows (in ``schema``) appended to ``table`` by delta-spark, or with ``ranges`` put in
    place of the table's rows of those ranges, in one commit tagged with ``txn``; the table's version,
    or None if ``txn`` was committed before (then nothing is written). The files are deleted after."""
    try:
        return _commit(spark, table, txn, files, schema, ranges, notes)
    except JobError:
        raise
    except Exception as exc:  # noqa: BLE001 - delta-spark's and the store's errors, in words a run's error can carry
        text = str(exc).strip().splitlines()[0][:500] if str(exc).strip() else type(exc).__name__
        if CONCURRENT.search(f"{type(exc).__name__} {text}"):  # another writer's commit won: plan and write again
            raise JobError("target_conflict", f"delta-spark's commit to {table.uri} met a concurrent commit: {text}; "
                                              "the run is retried") from None
        raise storage_failure(exc) or JobError("target_commit", f"delta-spark's commit to {table.uri} failed: "
                                                               f"{text}") from None
    finally:
        delete_files(table.store, files, table.uri, table.uri)


# delta-spark's conflicts (ConcurrentAppendException, ConcurrentDeleteReadException, ...).
CONCURRENT = re.compile(r"Concurrent\w*Exception|ConcurrentModification|concurrent update")


def _commit(spark: SparkSession, table: Table, txn: Txn, files: Sequence[DataFile], schema: pa.Schema,
            ranges: Ranges | None, notes: Mapping[str, str] | None) -> int | None:
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F

    from spark_jobs.delta_tables.commit import already_committed, same_kind
    from spark_jobs.formats.evolution import TypeChange, merge_schema

    if already_committed(table, txn):
        return None
    delta = table.delta()
    writer_for(delta, "replace" if ranges else "append", table.uri, spark=True)  # the table as it is now
    if list(delta.metadata().partition_columns) != list(table.partition_by):
        raise JobError("invalid_spec", f"{table.uri} is partitioned by {delta.metadata().partition_columns}, "
                                       f"the spec says {list(table.partition_by)}")
    same_kind(table, delta, schema)
    try:
        merge_schema(pa.schema(delta.schema().to_arrow()), schema)
    except TypeChange as change:
        raise JobError("schema_incompatible", f"{table.uri}: {change}") from None
    held = spark.read.format("delta").load(table.uri).schema
    _, root = table.store.filesystem(table.uri)
    # Each file read alone, its partition values from its report (a folder's name is made path-safe).
    parts: list[DataFrame] = []
    for file in files:
        rows = spark.read.parquet(f"{root}/{file.path}")
        for column, value in file.partition_values.items():
            rows = rows.withColumn(column, F.lit(value).cast(held[column].dataType))
        parts.append(rows)
    rows = reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), parts) if parts else spark.createDataFrame([], held)
    attempt = f"inlet-write-{uuid.uuid4()}"  # names this attempt's commit among any other attempt's
    metadata = json.dumps({"inlet.txn": f"{txn.app_id}:{txn.version}", "inlet.attempt": attempt, **(notes or {})})
    writer = (rows.write.format("delta").option("txnAppId", txn.app_id).option("txnVersion", str(txn.version))
              .option("userMetadata", metadata).option("mergeSchema", "true"))
    writer = writer.mode("overwrite").option("replaceWhere", ranges_condition(ranges)) if ranges else writer.mode("append")
    before = delta.version()
    writer.save(table.uri)
    after = table.delta()
    for version in range(after.version(), before, -1):
        info: dict[str, Any] = next((a["commitInfo"] for a in commit_actions(table.store, table.uri, version) if "commitInfo" in a), {})
        if attempt in str(info.get("userMetadata") or ""):
            log.info("delta-spark committed %d files' rows to %s v%d", len(files), table.uri, version)
            return version
    if already_committed(table, txn):  # delta-spark skipped it: another attempt committed the txn meanwhile
        return None
    raise JobError("target_commit", f"delta-spark's write to {table.uri} left no commit of its own, and the table "
                                    f"does not hold txn {txn.app_id} v{txn.version}")


def ranges_condition(ranges: Ranges) -> str:
    """``ranges`` as Spark SQL: the rows of any of them (a Kafka topic's name holds no quote:
    ``[a-zA-Z0-9._-]``)."""
    each = [f"(topic = '{t}' AND `partition` = {int(p)} AND `offset` >= {s} "
            f"AND `offset` < {e})" for t, ps in sorted(ranges.items()) for p, (s, e) in sorted(ps.items()) if s < e]
    return " OR ".join(each) or "false"
