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

avro, protobuf and json_schema values (the Confluent wire format) become the columns of their
subject's schema (``decode_framed``, on Arrow in the executors: ``spark_jobs.formats``); a registry
format of the key makes ``key`` a column of the key subject's type.

A json value that does not parse as the schema (or is null) becomes a quarantine row instead:
``key`` and ``value`` as raw BINARY, the metadata columns, ``_inlet_quarantine_reason`` and
``_inlet_run_id``. The decoded DataFrame carries both shapes; the writer splits them on
``_inlet_quarantine_reason`` so the source is read once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, StringType, StructType, _parse_datatype_string

from spark_jobs.columns import METADATA, QUARANTINE_REASON, RAW_KEY, RAW_VALUE, RESERVED, RUN_ID
from spark_jobs.errors import JobError
from spark_jobs.formats.wire import SubjectSchema, WireDecoder
from spark_jobs.registry import RegistryConfig

if TYPE_CHECKING:  # pydantic costs every Python worker ~1 s to import
    from spark_jobs.spec import SourceSpec


_CORRUPT = "_inlet_corrupt_record"


def decode(records: DataFrame, source: SourceSpec, run_id: str) -> DataFrame:
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


def decoded_struct(source: SourceSpec) -> StructType:
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
    except Exception as exc:  # noqa: BLE001 - Spark's parser raises several exception types
        raise JobError("invalid_spec", f"schema is not valid Spark DDL: {str(exc).splitlines()[0]}") from None
    if not isinstance(schema, StructType):
        raise JobError("invalid_spec", "schema must describe a struct (column list)")
    clashes = sorted(RESERVED & {f.name for f in schema.fields})
    if clashes:
        raise JobError("invalid_spec", f"schema fields {clashes} clash with Inlet's reserved columns {sorted(RESERVED)}")
    return schema


def _string(column: str) -> Column:
    return F.col(column).cast("string").alias(column)


@dataclass
class Framed:
    """What a task needs to decode registry-format records (pickled to the executors): the subjects
    the driver resolved and the registry, for the writer schemas the records name."""

    registry: RegistryConfig
    value: SubjectSchema | None
    key: SubjectSchema | None
    quarantine_schema: pa.Schema
    _decoders: dict[str, WireDecoder] = field(default_factory=dict, repr=False)

    def decoder(self, subject: SubjectSchema) -> WireDecoder:
        """One decoder per part for the life of the task: its codecs are built once per schema id."""
        if subject.part not in self._decoders:
            self._decoders[subject.part] = WireDecoder(subject, self.registry)
        return self._decoders[subject.part]


def framed_schema(read_schema: pa.Schema, value_format: str, key_format: str | None,
                  value: SubjectSchema | None, key: SubjectSchema | None) -> pa.Schema:
    """The table's columns for a pipeline with a registry format: ``key``, the value's columns (or
    ``value``), the record's metadata and the run id. A value field named like one of Inlet's
    columns is refused (``schema_incompatible``)."""
    if value is not None:
        clashes = sorted(RESERVED & {f.name for f in value.columns} - {"value"})
        if clashes:
            raise JobError("schema_incompatible", f"{value.describe()}: fields {clashes} clash with the columns Inlet "
                                                  f"writes beside the decoded ones ({', '.join(sorted(RESERVED))})")
    plain = {"raw": pa.binary(), "string": pa.string()}
    key_field = key.columns[0] if key is not None else pa.field("key", plain.get(key_format or "", pa.string()))
    value_fields = value.columns if value is not None else [pa.field("value", plain[value_format])]
    metadata = [f for f in read_schema if f.name not in ("key", "value")]
    return pa.schema([key_field, *value_fields, *metadata, pa.field(RUN_ID, pa.string(), False)])


def quarantine_struct(read_schema: pa.Schema) -> pa.Schema:
    """A quarantine table's columns: the record as read (key and value as bytes), the reason, the run."""
    return pa.schema([*read_schema, pa.field(QUARANTINE_REASON, pa.string()), pa.field(RUN_ID, pa.string(), False)])


def decode_framed(batch: pa.RecordBatch, framed: Framed, run_id: str, schema: pa.Schema) -> tuple[pa.Table, pa.Table]:
    """A batch of Kafka records as table rows (in ``schema``) and quarantine rows (with the reason)."""
    n = batch.num_rows
    reasons: list[str | None] = [None] * n
    decoded: dict[str, pa.Array] = {}
    for subject in (framed.value, framed.key):
        if subject is None:
            continue
        array, why = framed.decoder(subject).decode(batch.column(subject.part).to_pylist())
        decoded[subject.part] = array
        reasons = [mine or theirs for mine, theirs in zip(reasons, why, strict=True)]
    run = pa.repeat(pa.scalar(run_id, pa.string()), n)
    columns = []
    for f in schema:
        if f.name == "key" and "key" in decoded:
            column = decoded["key"]
        elif f.name == "key" or (f.name == "value" and "value" not in decoded):
            column = batch.column(f.name)
            if f.type == pa.string():
                column = column.view(pa.string())
        elif f.name == RUN_ID:
            column = run
        elif f.name in batch.schema.names:
            column = batch.column(f.name)
        elif "value" in decoded and framed.value is not None and any(c.name == f.name for c in framed.value.columns):
            # A value that did not decode is null, and its row goes to quarantine.
            value = decoded["value"]
            column = value.field(f.name) if pa.types.is_struct(framed.value.arrow_type) else value
        else:
            column = pa.nulls(n, f.type)
        columns.append(column.cast(f.type) if column.type != f.type else column)
    rows = pa.Table.from_arrays(columns, schema=schema)
    bad = pa.array([r is not None for r in reasons], pa.bool_())
    quarantine = pa.Table.from_arrays(
        [*(batch.column(name) for name in batch.schema.names), pa.array(reasons, pa.string()), run],
        schema=framed.quarantine_schema,
    )
    return rows.filter(pc.invert(bad)), quarantine.filter(bad)
