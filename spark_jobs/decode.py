"""Turning Kafka records into the rows a pipeline writes, per ``value_format``.

Output columns, in order (the Delta table's schema):

- ``key``: BINARY for raw, STRING for string and json.
- the payload: ``value`` (BINARY for raw, STRING for string), or for json the top-level fields of
  the pipeline's DDL schema.
- the record's coordinates and metadata, named as Spark's Kafka source names them: ``topic``
  STRING, ``partition`` INT, ``offset`` BIGINT, ``timestamp`` TIMESTAMP, ``timestampType`` INT and,
  with include_headers, ``headers`` ARRAY<STRUCT<key STRING, value BINARY>>.
- ``_inlet_run_id`` STRING: the run that wrote the row.

(``topic``, ``partition``, ``offset``) identifies a row; replace-mode replays rely on it. A json
schema may therefore not reuse any of these names (``invalid_spec``).

A json value that does not parse as the schema (or is null) becomes a quarantine row instead:
``key`` and ``value`` as raw BINARY, the metadata columns, ``_inlet_quarantine_reason`` and
``_inlet_run_id``. The decoded DataFrame carries both shapes; the writer splits them on
``_inlet_quarantine_reason`` so the source is read once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, StringType, StructType, _parse_datatype_string

from spark_jobs.columns import METADATA, QUARANTINE_REASON, RAW_KEY, RAW_VALUE, RESERVED, RUN_ID
from spark_jobs.errors import JobError

if TYPE_CHECKING:  # pydantic costs every Python worker ~1 s to import
    from spark_jobs.spec import KafkaSource


_CORRUPT = "_inlet_corrupt_record"


def decode(records: DataFrame, source: KafkaSource, run_id: str) -> DataFrame:
    """Output rows (and, for json, quarantine material) from Spark-Kafka-shaped ``records``."""
    metadata = [F.col(c) for c in METADATA] + ([F.col("headers")] if source.include_headers else [])
    run = F.lit(run_id).alias(RUN_ID)
    if source.value_format == "raw":
        return records.select("key", "value", *metadata, run)
    if source.value_format == "string":
        return records.select(_string("key"), _string("value"), *metadata, run)

    schema = json_schema(source.schema_ or "")
    parsed = F.from_json(
        F.col("value").cast("string"),
        schema.add(_CORRUPT, "string"),
        {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": _CORRUPT},
    )
    reason: Column = (
        F.when(F.col("value").isNull(), F.lit("value is null"))
        .when(F.col("_parsed").isNull() | F.col(f"_parsed.{_CORRUPT}").isNotNull(), F.lit("value is not JSON of the pipeline's schema"))
    )
    return records.withColumn("_parsed", parsed).select(
        _string("key"),
        *[F.col(f"_parsed.`{f.name}`").alias(f.name) for f in schema.fields if f.name != _CORRUPT],
        *metadata,
        run,
        reason.alias(QUARANTINE_REASON),
        F.col("key").alias(RAW_KEY),
        F.col("value").alias(RAW_VALUE),
    )


def decoded_struct(source: KafkaSource) -> StructType:
    """The schema ``decode`` gives raw and string records, without building a DataFrame."""
    from spark_jobs.kafka_source import kafka_struct

    kind = StringType() if source.value_format == "string" else BinaryType()
    schema = StructType()
    for f in kafka_struct(source.include_headers).fields:
        schema.add(f.name, kind if f.name in ("key", "value") else f.dataType, f.nullable)
    return schema.add(RUN_ID, StringType(), False)  # a literal: never null


def decode_arrow(batch: pa.RecordBatch, value_format: str, run_id: str, schema: pa.Schema) -> pa.Table:
    """``decode`` of raw and string records on Arrow, in an executor; ``schema`` may hold more
    columns (an existing table's, which this run lacks): they are null.

    Strings are the bytes as they are, unchecked, as Spark's cast of BINARY to STRING keeps them.
    """
    n = batch.num_rows
    columns = []
    for f in schema:
        if f.name in batch.schema.names:
            column = batch.column(f.name)
            if f.name in ("key", "value") and value_format == "string":
                column = column.view(pa.string())
        elif f.name == RUN_ID:
            column = pa.repeat(pa.scalar(run_id, pa.string()), n)
        else:
            column = pa.nulls(n, f.type)
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=schema)


def json_schema(ddl: str) -> StructType:
    try:
        schema = _parse_datatype_string(ddl)
    except Exception as exc:  # Spark's parser raises several exception types
        raise JobError("invalid_spec", f"schema is not valid Spark DDL: {str(exc).splitlines()[0]}") from None
    if not isinstance(schema, StructType):
        raise JobError("invalid_spec", "schema must describe a struct (column list)")
    clashes = sorted(RESERVED & {f.name for f in schema.fields})
    if clashes:
        raise JobError("invalid_spec", f"schema fields {clashes} clash with Inlet's reserved columns {sorted(RESERVED)}")
    return schema


def _string(column: str) -> Column:
    return F.col(column).cast("string").alias(column)
