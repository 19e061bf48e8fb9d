"""Protobuf: a registered schema's Arrow type, and payloads decoded with the ``protobuf`` runtime.

Schemas come from the registry as serialized ``FileDescriptorProto``s (``?format=serialized``), so no
``.proto`` parser is needed; they may import Google's well-known types (references to other subjects
are refused for now: Karapace 6.2 cannot serve such a schema serialized, so they could not be tested). The record's message is the one its message indexes name in the writer's
file; it is decoded with the reader's message of the same full name, so fields a newer writer added
are skipped and fields it lacks read as their defaults: Protobuf's own evolution rules.

=====================================  ===========================================================
Protobuf                               Arrow / Delta
=====================================  ===========================================================
bool, string, bytes                    bool, string, binary
int32, sint32, sfixed32                int32
int64, sint64, sfixed64, uint32        int64 (uint32 widened: Delta has no unsigned types)
uint64, fixed64                        decimal128(20, 0)
fixed32                                int64
float, double                          float32, float64
enum                                   string (the value's name; an unknown number as its digits)
message                                struct (recursive messages are refused)
google.protobuf.Timestamp              timestamp[us, UTC]
repeated T, map<K, V>                  list<T>, map<K, V>
oneof                                  one nullable column per member: only the set one has a value
=====================================  ===========================================================

Scalars without presence read as their default (0, "", false) when unset, as Protobuf defines;
message fields, ``optional`` scalars and oneof members not set are null.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pyarrow as pa
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from spark_jobs.formats import UnsupportedSchema

_WELL_KNOWN = "google/protobuf/"
_TIMESTAMP = "google.protobuf.Timestamp"

_SCALARS: dict[int, pa.DataType] = {
    FieldDescriptor.TYPE_BOOL: pa.bool_(),
    FieldDescriptor.TYPE_STRING: pa.string(),
    FieldDescriptor.TYPE_BYTES: pa.binary(),
    FieldDescriptor.TYPE_INT32: pa.int32(),
    FieldDescriptor.TYPE_SINT32: pa.int32(),
    FieldDescriptor.TYPE_SFIXED32: pa.int32(),
    FieldDescriptor.TYPE_INT64: pa.int64(),
    FieldDescriptor.TYPE_SINT64: pa.int64(),
    FieldDescriptor.TYPE_SFIXED64: pa.int64(),
    FieldDescriptor.TYPE_UINT32: pa.int64(),
    FieldDescriptor.TYPE_FIXED32: pa.int64(),
    FieldDescriptor.TYPE_UINT64: pa.decimal128(20, 0),
    FieldDescriptor.TYPE_FIXED64: pa.decimal128(20, 0),
    FieldDescriptor.TYPE_FLOAT: pa.float32(),
    FieldDescriptor.TYPE_DOUBLE: pa.float64(),
    FieldDescriptor.TYPE_ENUM: pa.string(),
}
_UNSIGNED_64 = (FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_FIXED64)


def file_pool(files: list[bytes]) -> tuple[descriptor_pool.DescriptorPool, descriptor_pb2.FileDescriptorProto]:
    """A pool holding serialized ``files`` (dependencies first, the schema's own file last), with
    Google's well-known types added where imported; returns it with the last file's proto."""
    pool = descriptor_pool.DescriptorPool()
    protos = [_repaired(descriptor_pb2.FileDescriptorProto.FromString(raw)) for raw in files]
    added: set[str] = set()
    for proto in protos:
        for dependency in proto.dependency:
            if dependency.startswith(_WELL_KNOWN) and dependency not in added:
                _add_well_known(pool, dependency, added)
        if proto.name not in added:
            pool.Add(proto)
            added.add(proto.name)
    return pool, protos[-1]


_MAP = re.compile(r"^map<\s*([\w.]+)\s*,\s*([\w.]+)\s*>$")
_SCALAR_NAMES = {name.removeprefix("TYPE_").lower(): number for name, number in FieldDescriptor.__dict__.items()
                 if name.startswith("TYPE_") and name not in ("TYPE_MESSAGE", "TYPE_ENUM", "TYPE_GROUP")}


def _repaired(file: descriptor_pb2.FileDescriptorProto) -> descriptor_pb2.FileDescriptorProto:
    """A file as ``protoc`` would describe it. Some registries (Karapace 6) serialize a ``map<K, V>``
    field as a field of type name ``map<K, V>``, and an ``optional`` proto3 field without its
    synthetic oneof; both are made what they stand for, so that the pool accepts the file."""
    if not file.name:
        file.name = f"{file.package or 'schema'}.proto"
    for message in file.message_type:
        _repair_message(message)
    return file


def _repair_message(message: descriptor_pb2.DescriptorProto) -> None:
    for nested in message.nested_type:
        _repair_message(nested)
    for field in message.field:
        found = _MAP.match(field.type_name) if field.type_name else None
        if found:
            entry = message.nested_type.add(name="".join(p.capitalize() for p in field.name.split("_")) + "Entry")
            entry.options.map_entry = True
            for number, (name, kind) in enumerate((("key", found.group(1)), ("value", found.group(2))), start=1):
                part = entry.field.add(name=name, number=number, label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
                if kind in _SCALAR_NAMES:
                    part.type = _SCALAR_NAMES[kind]
                else:
                    part.type_name = kind
            field.type_name = entry.name
            field.label = descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED
            field.ClearField("proto3_optional")
        elif field.proto3_optional and not field.HasField("oneof_index"):
            field.oneof_index = len(message.oneof_decl)
            message.oneof_decl.add(name=f"_{field.name}")


def _add_well_known(pool: descriptor_pool.DescriptorPool, name: str, added: set[str]) -> None:
    # Importing a well-known type's module puts its file into the default pool.
    importlib.import_module(name.removesuffix(".proto").replace("/", ".") + "_pb2")
    known = descriptor_pool.Default().FindFileByName(name)
    for dependency in known.dependencies:
        if dependency.name not in added:
            _add_well_known(pool, dependency.name, added)
    proto = descriptor_pb2.FileDescriptorProto()
    known.CopyToProto(proto)
    pool.Add(proto)
    added.add(name)


def message_at(pool: descriptor_pool.DescriptorPool, file: descriptor_pb2.FileDescriptorProto, indexes: list[int]) -> Descriptor:
    """The message that Confluent's message indexes name in ``file`` ([0]: its first message)."""
    package = f"{file.package}." if file.package else ""
    if not file.message_type or indexes[0] >= len(file.message_type):
        raise ValueError(f"message index {indexes[0]} is not a message of {file.name}")
    proto = file.message_type[indexes[0]]
    name = package + proto.name
    for index in indexes[1:]:
        if index >= len(proto.nested_type):
            raise ValueError(f"nested message index {index} is not a message of {name}")
        proto = proto.nested_type[index]
        name = f"{name}.{proto.name}"
    return pool.FindMessageTypeByName(name)


def read_indexes(payload: bytes, at: int) -> tuple[list[int], int]:
    """Confluent's message indexes at ``payload[at:]``: zig-zag varints, a count first; a count of
    0 means [0]. Returns them and where the message starts."""
    count, at = _zigzag(payload, at)
    if count == 0:
        return [0], at
    if count < 0 or count > 64:
        raise ValueError(f"message index count {count} is not plausible")
    indexes = []
    for _ in range(count):
        index, at = _zigzag(payload, at)
        indexes.append(index)
    return indexes, at


def _zigzag(payload: bytes, at: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        if at >= len(payload):
            raise ValueError("the message indexes run past the payload")
        byte = payload[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (value >> 1) ^ -(value & 1), at
        shift += 7
        if shift > 63:
            raise ValueError("a message index varint is too long")


def arrow_type(message: Descriptor) -> pa.DataType:
    return _struct(message, (), message.full_name)


def _struct(message: Descriptor, seen: tuple[str, ...], path: str) -> pa.DataType:
    if message.full_name in seen:
        raise UnsupportedSchema(f"{path}: the recursive message {message.full_name} cannot be a column")
    return pa.struct([pa.field(f.name, _field_type(f, (*seen, message.full_name), f"{path}.{f.name}")) for f in message.fields])


def _field_type(field: FieldDescriptor, seen: tuple[str, ...], path: str) -> pa.DataType:
    if _is_map(field):
        key, value = _message_of(field).fields_by_name["key"], _message_of(field).fields_by_name["value"]
        return pa.map_(_single_type(key, seen, path), _single_type(value, seen, path))
    single = _single_type(field, seen, path)
    return pa.list_(single) if _repeated(field) else single


def _single_type(field: FieldDescriptor, seen: tuple[str, ...], path: str) -> pa.DataType:
    if field.type in (FieldDescriptor.TYPE_MESSAGE, FieldDescriptor.TYPE_GROUP):
        if _message_of(field).full_name == _TIMESTAMP:
            return pa.timestamp("us", tz="UTC")
        return _struct(_message_of(field), seen, path)
    return _SCALARS[field.type]


def _repeated(field: FieldDescriptor) -> bool:
    return field.label == FieldDescriptor.LABEL_REPEATED


def _message_of(field: FieldDescriptor) -> Descriptor:
    """The message type of a message field (which always has one)."""
    assert field.message_type is not None
    return field.message_type


def _is_map(field: FieldDescriptor) -> bool:
    return _repeated(field) and field.type == FieldDescriptor.TYPE_MESSAGE and _message_of(field).GetOptions().map_entry


def message_class(message: Descriptor) -> Any:
    return message_factory.GetMessageClass(message)


def converter(message: Descriptor) -> Callable[[Any], dict[str, Any]]:
    """A function from a parsed message to the dict ``arrow_type`` describes."""
    steps = [(f.name, _field_reader(f)) for f in message.fields]

    def convert(msg: Any) -> dict[str, Any]:
        return {name: read(msg) for name, read in steps}

    return convert


def _field_reader(field: FieldDescriptor) -> Callable[[Any], Any]:
    name = field.name
    if _is_map(field):
        value_field = _message_of(field).fields_by_name["value"]
        value = _value_reader(value_field)
        return lambda msg: [(k, value(v)) for k, v in getattr(msg, name).items()]
    single = _value_reader(field)
    if _repeated(field):
        return lambda msg: [single(v) for v in getattr(msg, name)]
    if field.has_presence:  # messages, optional scalars, oneof members: null when not set
        return lambda msg: single(getattr(msg, name)) if msg.HasField(name) else None
    return lambda msg: single(getattr(msg, name))


def _value_reader(field: FieldDescriptor) -> Callable[[Any], Any]:
    if field.type in (FieldDescriptor.TYPE_MESSAGE, FieldDescriptor.TYPE_GROUP):
        if _message_of(field).full_name == _TIMESTAMP:
            return lambda ts: datetime.fromtimestamp(ts.seconds, UTC).replace(microsecond=ts.nanos // 1000)
        return converter(_message_of(field))
    if field.type == FieldDescriptor.TYPE_ENUM:
        assert field.enum_type is not None  # an enum field has its type
        names = {v.number: v.name for v in field.enum_type.values}
        return lambda number: names.get(number, str(number))
    if field.type in _UNSIGNED_64:
        return Decimal
    return _same


def _same(value: Any) -> Any:
    return value
