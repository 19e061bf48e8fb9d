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
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

from spark_jobs.delta_tables import Table
from spark_jobs.delta_tables.files import delete_files
from spark_jobs.errors import JobError
from spark_jobs.plans import DataFile

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from spark_jobs.spec import Ranges, Txn

log = logging.getLogger("inlet.delta")


def commit_on_spark(spark: SparkSession, table: Table, txn: Txn, files: Sequence[DataFile], schema: pa.Schema, *,
                    ranges: Ranges | None = None, notes: Mapping[str, str] | None = None) -> int | None:
    """``files``' rows (in ``schema``) appended to ``table`` by delta-spark, or with ``ranges`` put in
    place of the table's rows of those ranges, in one commit tagged with ``txn``; the table's version,
    or None if ``txn`` was committed before (then nothing is written)."""
    from pyspark.sql import functions as F

    from spark_jobs.delta_tables.commit import already_committed
    from spark_jobs.formats.evolution import TypeChange, merge_schema

    try:
        if already_committed(table, txn):
            return None
        delta = table.delta()
        try:
            merge_schema(pa.schema(delta.schema().to_arrow()), schema)
        except TypeChange as change:
            raise JobError("schema_incompatible", f"{table.uri}: {change}") from None
        held = spark.read.format("delta").load(table.uri).schema
        _, root = table.store.filesystem(table.uri)
        paths = [f"{root}/{f.path}" for f in files]
        rows = (spark.read.option("basePath", root).parquet(*paths) if paths
                else spark.createDataFrame([], held))
        for column in table.partition_by:  # read back from the folders' names as Spark guessed their types
            if column in rows.columns:
                rows = rows.withColumn(column, F.col(column).cast(held[column].dataType))
        metadata = json.dumps({"inlet.txn": f"{txn.app_id}:{txn.version}", **(notes or {})})
        writer = (rows.write.format("delta").option("txnAppId", txn.app_id).option("txnVersion", str(txn.version))
                  .option("userMetadata", metadata).option("mergeSchema", "true"))
        before = delta.version()
        if ranges:
            writer = writer.mode("overwrite").option("replaceWhere", ranges_condition(ranges))
        else:
            writer = writer.mode("append")
        try:
            writer.save(table.uri)
        except Exception as exc:  # noqa: BLE001 - delta-spark's error, in words the run's error can carry
            if already_committed(table, txn):
                return None
            raise JobError("target_commit", f"delta-spark's commit to {table.uri} failed: "
                                            f"{str(exc).strip().splitlines()[0][:500]}") from None
        after = table.delta()
        if after.version() == before:  # delta-spark found the txn committed by another attempt meanwhile
            return None
        log.info("delta-spark committed %d files' rows to %s v%d", len(files), table.uri, after.version())
        return after.version()
    finally:
        delete_files(table.store, files, table.uri, table.uri)


def ranges_condition(ranges: Ranges) -> str:
    """``ranges`` as Spark SQL: the rows of any of them (a Kafka topic's name holds no quote:
    ``[a-zA-Z0-9._-]``)."""
    each = [f"(topic = '{t}' AND `partition` = {int(p)} AND `offset` >= {s} "
            f"AND `offset` < {e})" for t, ps in sorted(ranges.items()) for p, (s, e) in sorted(ps.items()) if s < e]
    return " OR ".join(each) or "false"
