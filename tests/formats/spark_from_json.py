"""The oracle json values are held to: Spark's ``from_json`` in PERMISSIVE mode, with the quarantine
reasons Inlet gives, as json pipelines ran inside Spark before ``formats.json_values`` (issue 35).

A stand-in for no real part: it IS Spark's parser, run in a local session by the conformance test
(``test_json_conformance.py``) and ``bench/json_decode.py``, which compare Inlet's decoder with it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spark_jobs.decode import json_schema
from spark_jobs.formats.json_values import NOT_SCHEMA, NULL_VALUE

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

_CORRUPT = "_inlet_corrupt_record"


def from_json(records: DataFrame, ddl: str) -> DataFrame:
    """Records in the columns of Spark's Kafka source, decoded: the schema's columns, the record's
    offset and ``_inlet_quarantine_reason`` (null for a record that decoded)."""
    from pyspark.sql import functions as F

    schema = json_schema(ddl)
    parsed = F.from_json(
        F.col("value").cast("string"),
        schema.add(_CORRUPT, "string"),
        {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": _CORRUPT},
    )
    reason = (
        F.when(F.col("value").isNull(), F.lit(NULL_VALUE))
        .when(F.col("_parsed").isNull() | F.col(f"_parsed.{_CORRUPT}").isNotNull(), F.lit(NOT_SCHEMA))
    )
    return records.withColumn("_parsed", parsed).select(
        *[F.col(f"_parsed.`{f.name}`").alias(f.name) for f in schema.fields if f.name != _CORRUPT],
        "offset",
        reason.alias("_inlet_quarantine_reason"),
    )
