"""How a table's columns follow a subject's schema: new fields are added, nothing else changes.

``merge_schema(table, incoming)`` is the table's schema with every field of ``incoming`` it lacks
added (as nullable, at any depth: a new field of a nested record too). A field whose type changed
cannot go into the same column without rewriting the table, so it raises ``TypeChange`` naming the
field's path and both types; the caller turns that into the run's ``schema_incompatible`` error. A
field the subject dropped stays in the table and is null from then on. Nullability is not compared:
every column Inlet writes is nullable, so that old rows can lack a newer field.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa


@dataclass(frozen=True)
class TypeChange(Exception):
    path: str
    table_type: pa.DataType
    new_type: pa.DataType

    def __str__(self) -> str:
        return f"field {self.path} is {self.table_type} in the table and {self.new_type} in the schema"


def plain(data_type: pa.DataType) -> pa.DataType:
    """``data_type`` with the storage variants a Delta table reads back as (large, view) made plain, at every depth."""
    if data_type in (pa.large_string(), pa.string_view()):
        return pa.string()
    if data_type in (pa.large_binary(), pa.binary_view()):
        return pa.binary()
    if pa.types.is_struct(data_type):
        return pa.struct([f.with_type(plain(f.type)) for f in data_type.fields])
    if pa.types.is_list(data_type) or pa.types.is_large_list(data_type) or pa.types.is_list_view(data_type):
        return pa.list_(data_type.value_field.with_type(plain(data_type.value_type)))
    if pa.types.is_map(data_type):
        return pa.map_(plain(data_type.key_type), data_type.item_field.with_type(plain(data_type.item_type)))
    return data_type


def merge_schema(table: pa.Schema, incoming: pa.Schema) -> pa.Schema:
    """``table`` plus the fields of ``incoming`` it lacks; ``TypeChange`` where a field's type differs."""
    return pa.schema(_merge_fields(list(table), list(incoming), ""))


def _merge_fields(table: list[pa.Field], incoming: list[pa.Field], prefix: str) -> list[pa.Field]:
    have = {f.name: f for f in table}
    merged = [f.with_type(_merge(f.type, new.type, f"{prefix}{f.name}")) if (new := _named(incoming, f.name)) else f for f in table]
    return merged + [f.with_nullable(True) for f in incoming if f.name not in have]


def _named(fields: list[pa.Field], name: str) -> pa.Field | None:
    return next((f for f in fields if f.name == name), None)


def _merge(old: pa.DataType, new: pa.DataType, path: str) -> pa.DataType:
    old, new = plain(old), plain(new)
    if pa.types.is_struct(old) and pa.types.is_struct(new):
        return pa.struct(_merge_fields(list(old.fields), list(new.fields), f"{path}."))
    if pa.types.is_list(old) and pa.types.is_list(new):
        return pa.list_(old.value_field.with_type(_merge(old.value_type, new.value_type, f"{path}[]")))
    if pa.types.is_map(old) and pa.types.is_map(new) and old.key_type == new.key_type:
        return pa.map_(old.key_type, old.item_field.with_type(_merge(old.item_type, new.item_type, f"{path}{{}}")))
    if old != new:
        raise TypeChange(path, old, new)
    return old


def field_paths(schema: pa.Schema) -> set[str]:
    """Every field's path, nested ones included (``a.b``, ``a[].c``, ``m{}.d``)."""
    found: set[str] = set()

    def walk(data_type: pa.DataType, path: str) -> None:
        data_type = plain(data_type)
        if pa.types.is_struct(data_type):
            for f in data_type.fields:
                found.add(f"{path}.{f.name}")
                walk(f.type, f"{path}.{f.name}")
        elif pa.types.is_list(data_type):
            walk(data_type.value_type, f"{path}[]")
        elif pa.types.is_map(data_type):
            walk(data_type.item_type, f"{path}{{}}")

    for f in schema:
        found.add(f.name)
        walk(f.type, f.name)
    return found
