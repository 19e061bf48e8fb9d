"""Turning Kafka records into the rows a pipeline writes, per ``value_format``, on Arrow in the
executors (``delta_tables.direct_write``'s tasks).

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

raw and string records become rows as they are (``decode_arrow``). json values are read as Spark's
``from_json`` reads them (``decode_json``: ``formats.json_values``, held to Spark by a conformance
test); avro, protobuf and json_schema values (the Confluent wire format) become the columns of their
subject's schema (``decode_framed``: ``spark_jobs.formats``); a registry format of the key makes
``key`` a column of the key subject's type.

A record whose value (or key) does not decode becomes a quarantine row instead
(``quarantine_struct``): ``key`` and ``value`` as read (BINARY), the metadata columns,
``_inlet_quarantine_reason`` and ``_inlet_run_id``. A json value that is null goes there as
``value is null``, one that does not parse as the schema as ``value is not JSON of the pipeline's
schema``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    MapType,
    StringType,
    StructField,
    StructType,
    VariantType,
    _parse_datatype_string,
)

from spark_jobs.columns import INLET_PREFIX, QUARANTINE_REASON, RESERVED, RUN_ID, WHOLE_VALUE, reserved_in
from spark_jobs.errors import JobError
from spark_jobs.formats.wire import SubjectSchema, WireDecoder
from spark_jobs.registry import RegistryConfig

if TYPE_CHECKING:  # pydantic costs every Python worker ~1 s to import
    from spark_jobs.contract.rows import RowContract
    from spark_jobs.formats.json_values import JsonValues
    from spark_jobs.spec import SourceSpec


def decoded_struct(source: SourceSpec) -> StructType:
    """The table's columns for raw, string and json records (registry formats: ``framed_schema``)."""
    from spark_jobs.kafka_source import kafka_struct

    kind = BinaryType() if source.value_format == "raw" else StringType()
    schema = StructType()
    for f in kafka_struct(source.include_headers).fields:
        if f.name == "value" and source.value_format == "json":
            for column in json_columns(source.schema_ or "").fields:
                schema.add(column)
        else:
            schema.add(f.name, kind if f.name in ("key", "value") else f.dataType, f.nullable)
    return schema.add(RUN_ID, StringType(), False)  # a literal: never null


def decode_arrow(batch: pa.RecordBatch, value_format: str, run_id: str, schema: pa.Schema) -> pa.Table:
    """Raw and string records as table rows (in ``schema``).

    Strings are the bytes as they are, unchecked, as Spark's cast of BINARY to STRING keeps them.
    """
    strings = {p: batch.column(p).view(pa.string()) for p in ("key", "value")} if value_format == "string" else {}
    return _rows(batch, schema, run_id, strings)


def decode_json(batch: pa.RecordBatch, values: JsonValues, run_id: str, schema: pa.Schema,
                quarantine_schema: pa.Schema, contract: RowContract | None = None) -> tuple[pa.Table, pa.Table]:
    """json records as table rows (in ``schema``) and quarantine rows (with the reason): ``values``
    reads each value as Spark's ``from_json`` would (``formats.json_values``); keys are strings, as
    for string records. ``contract``: the pipeline's, applied to the rows (``split_rows``)."""
    columns, reasons = values.decode(batch.column("value"))
    decoded = {"key": batch.column("key").view(pa.string()), **dict(zip(columns.column_names, columns.columns, strict=True))}
    return split_rows(_rows(batch, schema, run_id, decoded), batch, reasons, run_id, quarantine_schema, contract)


def _rows(batch: pa.RecordBatch, schema: pa.Schema, run_id: str, decoded: Mapping[str, pa.Array | pa.ChunkedArray]) -> pa.Table:
    """``schema``'s columns for ``batch``: the ``decoded`` ones, else the record's own, the run id, or
    nulls (an existing table's columns, which this run lacks)."""
    n = batch.num_rows
    columns: list[pa.Array | pa.ChunkedArray] = []
    for f in schema:
        if f.name in decoded:
            column = decoded[f.name]
        elif f.name in batch.schema.names:
            column = batch.column(f.name)
        elif f.name == RUN_ID:
            column = pa.repeat(pa.scalar(run_id, pa.string()), n)
        else:
            column = pa.nulls(n, f.type)
        columns.append(column if column.type == f.type else column.cast(f.type))
    return pa.Table.from_arrays(columns, schema=schema)


def split_rows(rows: pa.Table, batch: pa.RecordBatch, reasons: pa.Array, run_id: str,
               quarantine_schema: pa.Schema, contract: RowContract | None = None) -> tuple[pa.Table, pa.Table]:
    """The rows of the records that decoded (``reasons`` null) and pass the expectations' quarantine
    rules, and the others as quarantine rows; ``contract``: the pipeline's expectations (counted) and
    sensitive fields (protected in the rows, sealed in the quarantine's raw records)."""
    if contract is not None:
        rows, reasons = contract.apply(rows, reasons)
    if reasons.null_count == len(reasons):
        return rows, quarantine_schema.empty_table()
    bad = pc.is_valid(reasons)
    run = pa.repeat(pa.scalar(run_id, pa.string()), batch.num_rows)
    quarantine = pa.Table.from_arrays([*batch.columns, reasons, run], schema=quarantine_schema)
    quarantine = quarantine.filter(bad)
    return rows.filter(pc.invert(bad)), contract.sealed(quarantine) if contract is not None else quarantine


def json_schema(ddl: str) -> StructType:
    """A json pipeline's DDL schema, checked: ``invalid_spec`` if it is not a struct Inlet can write."""
    try:
        schema = _parse_datatype_string(ddl)
    except Exception as exc:  # noqa: BLE001 - Spark's parser raises several exception types
        raise JobError("invalid_spec", f"schema is not valid Spark DDL: {str(exc).splitlines()[0]}") from None
    if not isinstance(schema, StructType):
        raise JobError("invalid_spec", "schema must describe a struct (column list)")
    whole = [f.name for f in schema.fields if f.name == WHOLE_VALUE and isinstance(f.dataType, VariantType)]
    if clashes := [c for c in reserved_in(f.name for f in schema.fields) if c not in whole]:
        raise JobError("invalid_spec", f"schema fields {clashes} clash with Inlet's reserved columns {sorted(RESERVED)} "
                                       f"or its namespace ({INLET_PREFIX}…)")
    return schema


def json_columns(ddl: str) -> StructType:
    """The columns a json pipeline's values give: the DDL schema's fields, nullable at every depth,
    as ``from_json`` makes them (a value may lack any field)."""
    nullable = _nullable(json_schema(ddl))
    assert isinstance(nullable, StructType)
    return nullable


def _nullable(data_type: DataType) -> DataType:
    if isinstance(data_type, StructType):
        return StructType([StructField(f.name, _nullable(f.dataType), True, f.metadata) for f in data_type.fields])
    if isinstance(data_type, ArrayType):
        return ArrayType(_nullable(data_type.elementType), True)
    if isinstance(data_type, MapType):
        return MapType(_nullable(data_type.keyType), _nullable(data_type.valueType), True)
    return data_type


@dataclass
class Framed:
    """What a task needs to decode registry-format records (pickled to the executors): the subjects
    the driver resolved and the registry, for the writer schemas the records name."""

    registry: RegistryConfig
    value: SubjectSchema | None
    key: SubjectSchema | None
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


def decode_framed(batch: pa.RecordBatch, framed: Framed, run_id: str, schema: pa.Schema,
                  quarantine_schema: pa.Schema, contract: RowContract | None = None) -> tuple[pa.Table, pa.Table]:
    """A batch of Kafka records as table rows (in ``schema``) and quarantine rows (with the reason);
    ``contract``: the pipeline's, applied to the rows (``split_rows``)."""
    n = batch.num_rows
    reasons: list[str | None] = [None] * n
    decoded: dict[str, pa.Array] = {}
    for subject in (framed.value, framed.key):
        if subject is None:
            continue
        array, why = framed.decoder(subject).decode(batch.column(subject.part))
        decoded[subject.part] = array
        if any(why):  # most batches decode whole: no record to look at one by one
            reasons = [mine or theirs for mine, theirs in zip(reasons, why, strict=True)]
    run = pa.repeat(pa.scalar(run_id, pa.string()), n)
    # The decoded value's columns: a record's fields, or one named "value" (framed_schema refuses a
    # field named like another of Inlet's columns). A value that did not decode is null, and its row
    # goes to quarantine.
    value_columns = {c.name for c in framed.value.columns} if framed.value is not None and "value" in decoded else set()
    columns = []
    for f in schema:
        if f.name == "key" and "key" in decoded:
            column = decoded["key"]
        elif f.name in value_columns:
            assert framed.value is not None
            value = decoded["value"]
            column = value.field(f.name) if pa.types.is_struct(framed.value.arrow_type) else value
        elif f.name in ("key", "value"):
            column = batch.column(f.name)
            if f.type == pa.string():
                column = column.view(pa.string())
        elif f.name == RUN_ID:
            column = run
        elif f.name in batch.schema.names:
            column = batch.column(f.name)
        else:
            column = pa.nulls(n, f.type)
        columns.append(column.cast(f.type) if column.type != f.type else column)
    rows = pa.Table.from_arrays(columns, schema=schema)
    return split_rows(rows, batch, pa.array(reasons, pa.string()), run_id, quarantine_schema, contract)
