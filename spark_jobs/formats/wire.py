"""Values in the Confluent wire format (a magic byte 0, a 4-byte big-endian schema id, the payload)
decoded into the columns of a subject's schema.

The driver resolves the subject once per run (``resolve``): the version the pipeline pins, or the
latest one. That reader schema gives the columns (``SubjectSchema.columns``). On the executors,
``WireDecoder`` decodes each record with the writer schema its id names, fetched once per process
(``RegistryClient.by_id`` caches it), into the reader's shape. A record it cannot decode (no magic
byte, an id the registry does not know, a payload that does not parse, a value that does not fit
the columns) keeps a reason and goes to the quarantine table.

Following the latest version, a record written with a version of the subject newer than the one the
run read would lose the fields it added: the run fails as ``schema_changed`` instead (retried; the
next attempt reads the newer version and evolves the table). A writer schema that Avro's resolution
rules cannot read as the reader fails the run as ``schema_incompatible``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spark_jobs.errors import JobError
from spark_jobs.formats import avro
from spark_jobs.formats.avro_blocks import BlockReader
from spark_jobs.registry import RegisteredSchema, RegistryClient, RegistryConfig

RegistryFormat = Literal["avro", "protobuf", "json_schema"]
Part = Literal["value", "key"]
_TYPES = {"avro": "AVRO", "protobuf": "PROTOBUF", "json_schema": "JSON"}
_WIRE_HEADER = 5


@dataclass(frozen=True)
class SubjectSchema:
    """The reader schema of a run's values (or keys): resolved on the driver, pickled to executors."""

    part: Part
    format: RegistryFormat
    subject: str
    version: int
    schema: RegisteredSchema
    follow_latest: bool
    arrow_type: pa.DataType
    files: tuple[bytes, ...] = ()  # protobuf: the serialized file descriptor
    read_type: pa.DataType | None = None  # of the decoded values, where it differs from arrow_type (cast after)

    @property
    def columns(self) -> list[pa.Field]:
        """The table columns: a value record's fields, else one column named after the part."""
        if self.part == "value" and pa.types.is_struct(self.arrow_type):
            return [f.with_nullable(True) for f in self.arrow_type.fields]
        return [pa.field(self.part, self.arrow_type)]

    def describe(self) -> str:
        return f"subject {self.subject!r} version {self.version} (schema id {self.schema.id})"


def resolve(config: RegistryConfig, part: Part, fmt: RegistryFormat, subject: str, version: int | Literal["latest"]) -> SubjectSchema:
    """The subject's schema at ``version``, with its columns; ``schema_incompatible`` where the schema
    cannot be columns (a recursive type, a reference Inlet cannot follow)."""
    from spark_jobs.formats import UnsupportedSchema, avro, json_schema, protobuf

    with RegistryClient(config) as registry:
        schema = registry.version(subject, version)
        if schema.schema_type != _TYPES[fmt]:
            raise JobError("schema_incompatible", f"{part}_format is {fmt}, but subject {subject!r} version {schema.version} "
                                                  f"is registered as {schema.schema_type}")
        files: tuple[bytes, ...] = ()
        read_type = None
        try:
            if fmt == "avro":
                if schema.references:
                    raise UnsupportedSchema("Avro schema references are not supported")
                arrow = avro.arrow_type(avro.load(schema.schema))
                read_type = avro.arrow_type(avro.load(schema.schema), as_read=True)
            elif fmt == "protobuf":
                if schema.references:
                    raise UnsupportedSchema("Protobuf schema references to other subjects are not supported")
                files = (registry.serialized_protobuf(schema.id),)
                pool, file = protobuf.file_pool(list(files))
                arrow = protobuf.arrow_type(protobuf.message_at(pool, file, [0]))
            else:
                if schema.references:
                    raise UnsupportedSchema("JSON Schema references to other subjects are not supported")
                arrow = json_schema.arrow_type(json_schema.load(schema.schema))
        except ValueError as exc:  # UnsupportedSchema, and unparseable schemas
            raise JobError("schema_incompatible", f"subject {subject!r} version {schema.version}: {exc}") from None
    assert schema.version is not None  # asked by subject and version
    return SubjectSchema(part, fmt, subject, schema.version, schema, version == "latest", arrow, files,
                         read_type if read_type != arrow else None)


Codec = Callable[[bytes], Any]


class WireDecoder:
    """Decodes one part (values or keys) of record batches on an executor."""

    def __init__(self, reader: SubjectSchema, registry: RegistryConfig) -> None:
        self.reader = reader
        self.config = registry
        self._registry: RegistryClient | None = None
        self._codecs: dict[int, Codec | str] = {}  # by schema id; a string is why the id cannot be decoded
        self._block_reader: BlockReader | Literal[False] | None = None  # False: the schema is not read in blocks

    def decode(self, column: pa.Array) -> tuple[pa.Array, list[str | None]]:
        """A batch's keys or values (binary) decoded: the values (null where not decoded) and, per
        record, why it was not (or None). Avro written with the reader's schema is read a batch at a
        time where it can be (``avro_blocks``), any other record one at a time."""
        blocks = self._blocks(column)
        if blocks is not None:
            return blocks
        part = self.reader.part
        payloads: list[bytes | None] = column.to_pylist()
        values: list[Any] = [None] * len(payloads)
        reasons: list[str | None] = [None] * len(payloads)
        for i, payload in enumerate(payloads):
            if payload is None:
                if part == "value":  # a null key is no key; a null value (a tombstone) has no columns
                    reasons[i] = "value is null"
                continue
            if len(payload) < _WIRE_HEADER or payload[0] != 0:
                reasons[i] = f"{part} is not in the Confluent wire format (magic byte 0 and a schema id)"
                continue
            schema_id = int.from_bytes(payload[1:_WIRE_HEADER], "big")
            codec = self._codecs.get(schema_id) or self._codec(schema_id)
            if isinstance(codec, str):
                reasons[i] = codec
                continue
            try:
                values[i] = codec(payload)
            except JobError:
                raise
            except Exception as exc:  # noqa: BLE001 - any decoder's failure is this record's reason
                if type(exc).__name__ == "SchemaResolutionError":  # fastavro: the writer cannot be read as the reader
                    raise JobError("schema_incompatible", f"{part} schema id {schema_id} cannot be read as "
                                                          f"{self.reader.describe()}: {exc}") from None
                reasons[i] = f"{part} does not decode with schema id {schema_id}: {type(exc).__name__}: {str(exc)[:300]}"
        decoded = _to_arrow(values, self.reader.read_type or self.reader.arrow_type, reasons, part)
        return decoded.cast(self.reader.arrow_type) if self.reader.read_type else decoded, reasons

    def _blocks(self, column: pa.Array) -> tuple[pa.Array, list[str | None]] | None:
        """``column`` read by ``avro_blocks`` when every record in it is the reader's Avro, else None."""
        reader = self.reader
        if reader.format != "avro" or len(column) == 0:
            return None
        if self._block_reader is None:
            block_reader = BlockReader(avro.load(reader.schema.schema), b"\x00" + reader.schema.id.to_bytes(4, "big"))
            self._block_reader = block_reader if block_reader.usable() else False
        if self._block_reader is False:
            return None
        present = column.is_valid()
        payloads = column.filter(present)
        header = self._block_reader.header
        if len(payloads) == 0 or not pc.all(pc.equal(pc.binary_slice(payloads, 0, len(header)), pa.scalar(header, pa.binary()))).as_py():
            return None
        decoded = self._block_reader.read(payloads)
        if decoded is None:
            return None
        reasons: list[str | None] = [None] * len(column)
        if len(payloads) < len(column):  # null keys or values (tombstones): null rows, back in their places
            valid = present.to_numpy(zero_copy_only=False)
            decoded = decoded.take(pa.array(np.cumsum(valid) - 1, mask=~valid))
            if reader.part == "value":
                reasons = [None if v else "value is null" for v in valid.tolist()]
        return decoded.cast(reader.arrow_type) if reader.read_type else decoded, reasons

    def _client(self) -> RegistryClient:
        if self._registry is None:
            self._registry = RegistryClient(self.config)
        return self._registry

    def _codec(self, schema_id: int) -> Codec | str:
        reader = self.reader
        if schema_id == reader.schema.id:
            writer: RegisteredSchema | None = reader.schema
        else:
            writer = self._client().by_id(schema_id)
        if writer is None:
            codec: Codec | str = f"{reader.part} names schema id {schema_id}, which the registry does not know"
        elif writer.schema_type != reader.schema.schema_type:
            codec = f"{reader.part} names schema id {schema_id}, a {writer.schema_type} schema, not {reader.schema.schema_type}"
        elif writer.references:
            codec = f"{reader.part} names schema id {schema_id}, which references other subjects (not supported yet)"
        else:
            if writer.id != reader.schema.id and reader.follow_latest:
                self._check_not_newer(writer)
            codec = self._build(writer)
        self._codecs[schema_id] = codec
        return codec

    def _check_not_newer(self, writer: RegisteredSchema) -> None:
        reader = self.reader
        for subject, version in self._client().subject_versions_of(writer.id):
            if subject == reader.subject and version > reader.version:
                raise JobError("schema_changed", f"{reader.part}s use version {version} of subject {subject!r} (schema id "
                                                 f"{writer.id}), registered after this run read version {reader.version}; "
                                                 "the next attempt reads it")

    def _build(self, writer: RegisteredSchema) -> Codec:
        from spark_jobs.formats import json_schema

        reader = self.reader
        if reader.format == "json_schema":
            decode_json = json_schema.decoder(reader.arrow_type)
            return lambda payload: decode_json(payload[_WIRE_HEADER:])
        if reader.format == "avro":
            decode_avro = avro.decoder(avro.load(writer.schema), avro.load(reader.schema.schema))
            return lambda payload: decode_avro(payload[_WIRE_HEADER:])
        writer_files = (self._client().serialized_protobuf(writer.id),) if writer.id != reader.schema.id else reader.files
        return _ProtobufCodec(reader, writer_files)


class _ProtobufCodec:
    """Reads the message its indexes name in the writer's file as the reader's message of that name."""

    def __init__(self, reader: SubjectSchema, writer_files: tuple[bytes, ...]) -> None:
        from spark_jobs.formats import protobuf

        self.writer_pool, self.writer_file = protobuf.file_pool(list(writer_files))
        reader_pool, reader_file = protobuf.file_pool(list(reader.files))
        message = protobuf.message_at(reader_pool, reader_file, [0])
        self.name = message.full_name
        self.cls = protobuf.message_class(message)
        self.convert = protobuf.converter(message)
        self.names: dict[tuple[int, ...], str] = {}

    def __call__(self, payload: bytes) -> Any:
        from spark_jobs.formats import protobuf

        indexes, start = protobuf.read_indexes(payload, _WIRE_HEADER)
        key = tuple(indexes)
        if key not in self.names:
            self.names[key] = protobuf.message_at(self.writer_pool, self.writer_file, indexes).full_name
        if self.names[key] != self.name:
            raise ValueError(f"the record is a {self.names[key]}, not the subject's {self.name}")
        return self.convert(self.cls.FromString(payload[start:]))


def _to_arrow(values: list[Any], data_type: pa.DataType, reasons: list[str | None], part: str) -> pa.Array:
    """``values`` as one Arrow array; a value that does not fit its column is nulled, with a reason."""
    try:
        return pa.array(values, type=data_type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError):
        pass
    for i, value in enumerate(values):
        if value is None:
            continue
        try:
            pa.array([value], type=data_type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError) as exc:
            values[i] = None
            reasons[i] = f"{part} does not fit the columns: {str(exc)[:300]}"
    return pa.array(values, type=data_type)
