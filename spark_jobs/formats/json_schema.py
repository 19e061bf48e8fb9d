"""JSON Schema: a registered schema's Arrow type, and JSON payloads made to fit it.

=====================================  ===========================================================
JSON Schema                            Arrow / Delta
=====================================  ===========================================================
boolean, integer, number               bool, int64, float64
string; enum of strings                string
string, format date-time / date        timestamp[us, UTC] / date32
object with properties                 struct (in the properties' order)
object with only additionalProperties  map<string, …>
array with items                       list
["T", "null"], anyOf/oneOf [T, null]   T (nullable)
$ref to #/definitions or #/$defs       the referenced schema (recursion refused)
anything else (free-form, unions)      string holding the value's JSON text
=====================================  ===========================================================

A value is checked against the columns' types, not validated against every keyword of the schema: a
number where an integer belongs, an array where an object belongs or a string that is not a
date-time sends the record to quarantine with the reason; properties the columns lack are dropped.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, date, datetime
from typing import Any

import pyarrow as pa

from spark_jobs.formats import UnsupportedSchema

_JSON_TEXT = pa.string()


class Misfit(ValueError):
    """A value that does not fit its column."""


def load(schema: str) -> dict[str, Any]:
    loaded = json.loads(schema)
    if not isinstance(loaded, dict):
        raise UnsupportedSchema("a JSON Schema is an object")
    return loaded


def arrow_type(schema: dict[str, Any]) -> pa.DataType:
    return _Mapper(schema).map(schema, "", ())


class _Mapper:
    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root

    def resolve(self, node: dict[str, Any], path: str, seen: tuple[str, ...]) -> tuple[dict[str, Any], tuple[str, ...]]:
        while "$ref" in node:
            ref = node["$ref"]
            if not ref.startswith("#/"):
                raise UnsupportedSchema(f"{path or 'the schema'}: $ref {ref!r} is not local (references to other subjects are not supported)")
            if ref in seen:
                raise UnsupportedSchema(f"{path}: the recursive $ref {ref!r} cannot be a column")
            target: Any = self.root
            for part in ref[2:].split("/"):
                target = target.get(part) if isinstance(target, dict) else None
            if not isinstance(target, dict):
                raise UnsupportedSchema(f"{path}: $ref {ref!r} points at nothing")
            node, seen = target, (*seen, ref)
        return node, seen

    def map(self, node: Any, path: str, seen: tuple[str, ...]) -> pa.DataType:
        if not isinstance(node, dict):
            return _JSON_TEXT
        node, seen = self.resolve(node, path, seen)
        kind = _nullable_single(node)
        if kind is None:
            for key in ("anyOf", "oneOf"):
                others = [b for b in node.get(key, []) if not (isinstance(b, dict) and b.get("type") == "null")]
                if key in node and len(others) == 1:
                    return self.map(others[0], path, seen)
            if "enum" in node and all(isinstance(v, str) for v in node["enum"]):
                return pa.string()
            if "properties" in node:
                kind = "object"
            else:
                return _JSON_TEXT
        if kind == "object":
            properties = node.get("properties") or {}
            if not properties and isinstance(node.get("additionalProperties"), dict):
                return pa.map_(pa.string(), self.map(node["additionalProperties"], f"{path}{{}}", seen))
            if not properties:
                return _JSON_TEXT
            return pa.struct([pa.field(name, self.map(sub, f"{path}.{name}".lstrip("."), seen)) for name, sub in properties.items()])
        if kind == "array":
            items = node.get("items")
            return pa.list_(self.map(items, f"{path}[]", seen)) if isinstance(items, dict) else _JSON_TEXT
        if kind == "string":
            return {"date-time": pa.timestamp("us", tz="UTC"), "date": pa.date32()}.get(node.get("format", ""), pa.string())
        return {"boolean": pa.bool_(), "integer": pa.int64(), "number": pa.float64()}.get(kind, _JSON_TEXT)


def _nullable_single(node: dict[str, Any]) -> str | None:
    kind = node.get("type")
    if isinstance(kind, list):
        others = [k for k in kind if k != "null"]
        return others[0] if len(others) == 1 else None
    return kind if isinstance(kind, str) and kind != "null" else None


def fitter(data_type: pa.DataType, path: str = "") -> Callable[[Any], Any]:
    """A function from a parsed JSON value to the Python value of ``data_type``; ``Misfit`` naming the
    place (``path``) where it does not fit."""
    where = path or "the value"
    if pa.types.is_struct(data_type):
        fields = [(f.name, fitter(f.type, f"{path}.{f.name}".lstrip("."))) for f in data_type.fields]

        def struct(value: Any) -> Any:
            if value is None:
                return None
            if not isinstance(value, dict):
                raise Misfit(f"{where} is not an object")
            return {name: fit(value.get(name)) for name, fit in fields}

        return struct
    if pa.types.is_list(data_type):
        item = fitter(data_type.value_type, f"{path}[]")

        def array(value: Any) -> Any:
            if value is None:
                return None
            if not isinstance(value, list):
                raise Misfit(f"{where} is not an array")
            return [item(v) for v in value]

        return array
    if pa.types.is_map(data_type):
        entry = fitter(data_type.item_type, f"{path}{{}}")

        def mapping(value: Any) -> Any:
            if value is None:
                return None
            if not isinstance(value, dict):
                raise Misfit(f"{where} is not an object")
            return [(k, entry(v)) for k, v in value.items()]

        return mapping
    if pa.types.is_timestamp(data_type):
        return _parsing(where, "a date-time", lambda v: _aware(datetime.fromisoformat(v)))
    if pa.types.is_date32(data_type):
        return _parsing(where, "a date", date.fromisoformat)
    if data_type == pa.bool_():
        return _checking(where, "a boolean", lambda v: isinstance(v, bool))
    if data_type == pa.int64():
        return _checking(where, "an integer", lambda v: isinstance(v, int) and not isinstance(v, bool))
    if data_type == pa.float64():
        return _checking(where, "a number", lambda v: isinstance(v, (int, float)) and not isinstance(v, bool))
    # Strings: a string as it is; anything else (free-form parts) as its JSON text.
    return lambda v: v if v is None or isinstance(v, str) else json.dumps(v, separators=(",", ":"))


def _checking(where: str, what: str, ok: Callable[[Any], bool]) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if value is None or ok(value):
            return value
        raise Misfit(f"{where} is not {what}")

    return check


def _parsing(where: str, what: str, parse: Callable[[str], Any]) -> Callable[[Any], Any]:
    def convert(value: Any) -> Any:
        if value is None:
            return None
        try:
            return parse(value)
        except (TypeError, ValueError):
            raise Misfit(f"{where} is not {what}") from None

    return convert


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def decoder(reader_type: pa.DataType) -> Callable[[bytes], Any]:
    fit = fitter(reader_type)

    def decode(payload: bytes) -> Any:
        return fit(json.loads(payload))

    return decode
