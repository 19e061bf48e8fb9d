"""Avro: a registered schema's Arrow type, and payloads decoded into the reader's shape with fastavro.

Types (the Delta column types follow from the Arrow ones):

=====================================  ===========================================================
Avro                                   Arrow / Delta
=====================================  ===========================================================
boolean, int, long, float, double      bool, int32, int64, float32, float64
string, enum; uuid                     string
bytes, fixed                           binary
decimal (bytes or fixed)               decimal128(precision, scale) (precision at most 38)
date                                   date32
time-millis, time-micros               int32 milliseconds, int64 microseconds (as Spark's from_avro)
timestamp-millis, timestamp-micros     timestamp[us, UTC]
local-timestamp-millis/-micros         timestamp[us] (Delta timestamp_ntz)
record                                 struct (recursive records are refused)
array, map                             list, map<string, …>
union of null and one type             that type (nullable)
union of several types                 struct<member0, member1, …>: the branch a value took is set
=====================================  ===========================================================

Every field is nullable in Arrow: a column added by a newer version is null in older rows.
A record written with an older or other schema is resolved into the reader's with Avro's own rules
(fields the reader added take their defaults; fields it dropped are skipped).
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pyarrow as pa

from spark_jobs.formats import UnsupportedSchema

_PRIMITIVES: dict[str, pa.DataType] = {
    "boolean": pa.bool_(), "int": pa.int32(), "long": pa.int64(), "float": pa.float32(), "double": pa.float64(),
    "bytes": pa.binary(), "string": pa.string(), "null": pa.null(),
}
# The columns of logical types; any other logical type (time-*, uuid, unknown ones) is its underlying type.
_LOGICAL: dict[str, pa.DataType] = {
    "date": pa.date32(),
    "timestamp-millis": pa.timestamp("us", tz="UTC"),
    "timestamp-micros": pa.timestamp("us", tz="UTC"),
    "local-timestamp-millis": pa.timestamp("us"),
    "local-timestamp-micros": pa.timestamp("us"),
}
# As decoded: fastavro reads every logical type but decimal as its underlying number (no datetime
# objects to build and take apart again), which Arrow takes as these types, then casts to the columns.
_AS_READ: dict[str, pa.DataType] = {
    **_LOGICAL, "timestamp-millis": pa.timestamp("ms", tz="UTC"), "local-timestamp-millis": pa.timestamp("ms"),
}


def load(schema: str) -> Any:
    return json.loads(schema)


def _raw(node: Any) -> Any:
    """``node`` with every logical type but decimal removed: what fastavro is given to decode."""
    if isinstance(node, list):
        return [_raw(n) for n in node]
    if isinstance(node, dict):
        return {k: _raw(v) for k, v in node.items() if not (k == "logicalType" and v != "decimal")}
    return node


def arrow_type(schema: Any, *, as_read: bool = False) -> pa.DataType:
    """The Arrow type of a loaded schema's columns; ``as_read``: of the values ``decoder`` returns."""
    return _Mapper(_AS_READ if as_read else _LOGICAL).map(schema, "")


class _Mapper:
    def __init__(self, logical: dict[str, pa.DataType]) -> None:
        self.logical = logical
        self.named: dict[str, Any] = {}
        self.resolving: set[int] = set()  # ids of the records being mapped: a reference back is recursion

    def map(self, node: Any, path: str, namespace: str = "") -> pa.DataType:
        if isinstance(node, str):
            if node in _PRIMITIVES:
                return _PRIMITIVES[node]
            target = self.named.get(node) or self.named.get(f"{namespace}.{node}")
            if target is None:
                raise UnsupportedSchema(f"{path or 'the schema'}: unknown type {node!r} (references to other subjects are not supported)")
            if id(target) in self.resolving:
                raise UnsupportedSchema(f"{path}: the recursive type {node!r} cannot be a column")
            return self.map(target, path, namespace)
        if isinstance(node, list):
            return self._union(node, path, namespace)
        kind, logical = node["type"], node.get("logicalType")
        if kind in ("record", "error", "enum", "fixed"):
            namespace = node.get("namespace", namespace)
            self.named[node["name"]] = self.named[f"{namespace}.{node['name']}".lstrip(".")] = node
        if logical == "decimal" and kind in ("bytes", "fixed"):
            precision, scale = int(node["precision"]), int(node.get("scale", 0))
            if precision > 38:
                raise UnsupportedSchema(f"{path}: decimal precision {precision} is over 38, Delta's limit")
            return pa.decimal128(precision, scale)
        if logical in self.logical:
            return self.logical[logical]
        if kind in ("record", "error"):
            self.resolving.add(id(node))
            try:
                return pa.struct([pa.field(f["name"], self.map(f["type"], f"{path}.{f['name']}".lstrip("."), namespace))
                                  for f in node["fields"]])
            finally:
                self.resolving.discard(id(node))
        if kind == "enum":
            return pa.string()
        if kind == "fixed":
            return pa.binary()
        if kind == "array":
            return pa.list_(self.map(node["items"], f"{path}[]", namespace))
        if kind == "map":
            return pa.map_(pa.string(), self.map(node["values"], f"{path}{{}}", namespace))
        return self.map(kind, path, namespace)

    def _union(self, branches: list[Any], path: str, namespace: str) -> pa.DataType:
        others = [b for b in branches if b != "null"]
        if len(others) == 1:
            return self.map(others[0], path, namespace)
        if not others:
            return pa.null()
        return pa.struct([pa.field(f"member{i}", self.map(b, f"{path}.member{i}", namespace)) for i, b in enumerate(others)])


def decoder(writer: Any, reader: Any) -> Callable[[bytes], Any]:
    """A function from a payload written with ``writer`` to a value in ``reader``'s shape (both loaded),
    of ``arrow_type(reader, as_read=True)``."""
    from fastavro import parse_schema, schemaless_reader

    parsed_writer = parse_schema(_raw(writer))
    parsed_reader = parse_schema(_raw(reader)) if reader != writer else None
    convert = _converter(reader, {})
    if convert is None:  # the common case: fastavro's values fit as they are
        return lambda payload: schemaless_reader(io.BytesIO(payload), parsed_writer, parsed_reader)

    def decode(payload: bytes) -> Any:
        record = schemaless_reader(io.BytesIO(payload), parsed_writer, parsed_reader, return_record_name=True,
                                   return_record_name_override=True)
        return convert(record)

    return decode


Converter = Callable[[Any], Any] | None


def _converter(node: Any, named: dict[str, Any], namespace: str = "") -> Converter:
    """What must change in fastavro's values to fit ``arrow_type`` (None: nothing, the fast case):
    unions of several types become structs of members, and (name, record) pairs plain records.
    Only called on a schema ``arrow_type`` accepted, so named references never recurse."""
    if isinstance(node, str):
        target = named.get(node) or named.get(f"{namespace}.{node}")
        return _converter(target, named, namespace) if target is not None else None
    if isinstance(node, list):
        others = [b for b in node if b != "null"]
        if len(others) == 1:
            return _converter(others[0], named, namespace)
        return _union_converter(others, named, namespace)
    kind = node.get("type")
    if kind in ("record", "error", "enum", "fixed"):
        space = node.get("namespace", namespace)
        named[node["name"]] = named[f"{space}.{node['name']}".lstrip(".")] = node
    if kind in ("record", "error"):
        fields = [(f["name"], c) for f in node["fields"] if (c := _converter(f["type"], named, space)) is not None]
        if not fields:
            return None

        def record(value: Any) -> Any:
            if value is None:
                return None
            out = dict(value)
            for name, c in fields:
                out[name] = c(out.get(name))
            return out

        return record
    if kind == "array":
        item = _converter(node["items"], named, namespace)
        return None if item is None else (lambda value: None if value is None else [item(v) for v in value])
    if kind == "map":
        entry = _converter(node["values"], named, namespace)
        return None if entry is None else (lambda value: None if value is None else {k: entry(v) for k, v in value.items()})
    return None


def _union_converter(branches: list[Any], named: dict[str, Any], namespace: str) -> Converter:
    """A value of a union of several types → ``{memberN: value}`` for the branch it took."""
    inner = [_converter(b, named, namespace) for b in branches]

    def branch_of(value: Any) -> int:
        for i, b in enumerate(branches):
            if _fits(value, b, named):
                return i
        raise ValueError(f"value {type(value).__name__} matches no branch of the union")

    def member(value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, tuple):  # (record name, record): fastavro names records read from unions
            name, value = value
            i = next(i for i, b in enumerate(branches) if _name_of(b) in (name, name.rsplit(".", 1)[-1]))
        else:
            i = branch_of(value)
        c = inner[i]
        return {f"member{i}": c(value) if c else value}

    return member


def _name_of(branch: Any) -> str | None:
    if isinstance(branch, dict):
        return branch.get("name")
    return branch if isinstance(branch, str) else None


def _fits(value: Any, branch: Any, named: dict[str, Any]) -> bool:
    kind = branch if isinstance(branch, str) else branch.get("type")
    if isinstance(kind, str) and kind in named and isinstance(named[kind], dict):
        kind = named[kind].get("type")
    logical = branch.get("logicalType") if isinstance(branch, dict) else None
    if isinstance(value, bool):
        return kind == "boolean"
    if isinstance(value, int):
        return kind in ("int", "long")
    if isinstance(value, float):
        return kind in ("float", "double")
    if isinstance(value, str):
        return kind in ("string", "enum")
    if isinstance(value, (bytes, bytearray)):
        return kind in ("bytes", "fixed") and logical != "decimal"
    if isinstance(value, Decimal):
        return logical == "decimal"
    if isinstance(value, list):
        return kind == "array"
    if isinstance(value, dict):
        return kind in ("map", "record")
    return logical is not None  # dates and timestamps
