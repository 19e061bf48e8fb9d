"""How a table's columns follow a subject's schema (or a json pipeline's DDL), by the pipeline's
evolution policy (``contract.evolution``).

``merge_schema(table, incoming, policy)`` is the table's schema as the run writes it:

- ``add`` (the default): every field of ``incoming`` the table lacks is added (as nullable, at any
  depth: a new field of a nested record too); a field whose type changed cannot go into the same
  column, so it raises ``TypeChange`` naming the field's path and both types;
- ``widen``: as ``add``, and a type that widens (``widens``: Delta's type widening, which delta-spark
  applies to the table's metadata and reads old files through) takes the column's place; any other
  change raises ``TypeChange``. A column never narrows: a type narrower than the column's is a
  ``TypeChange`` too (the tasks write the run's types as they decode them);
- ``fail``: a new field raises ``NewField``, a changed type ``TypeChange``.

The caller turns either into the run's ``schema_incompatible`` error. A field the subject dropped
stays in the table and is null from then on. Nullability is not compared: every column Inlet writes
is nullable, so that old rows can lack a newer field. ``widenings`` lists what a merged schema widened.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import pyarrow as pa

Policy = Literal["add", "widen", "fail"]


@dataclass(frozen=True)
class TypeChange(Exception):
    path: str
    table_type: pa.DataType
    new_type: pa.DataType

    def __str__(self) -> str:
        return f"field {self.path} is {self.table_type} in the table and {self.new_type} in the schema"


@dataclass(frozen=True)
class NewField(Exception):
    """A field the table lacks, under the policy ``fail``."""

    path: str
    new_type: pa.DataType

    def __str__(self) -> str:
        return f"field {self.path} ({self.new_type}) is not in the table, and the pipeline's evolution policy is fail"


_INTEGERS = (pa.int8(), pa.int16(), pa.int32(), pa.int64())


def widens(old: pa.DataType, new: pa.DataType) -> bool:
    """Whether ``new`` holds every value of ``old`` exactly, Delta's type widening makes one into the
    other, and a record written as ``old`` decodes as ``new`` to the same value: an integer to a wider
    one, FLOAT or an integer up to INT to DOUBLE, a DECIMAL's precision up at the same scale. Not
    DATE to TIMESTAMP_NTZ nor a DECIMAL's scale up, which Delta widens but Avro's resolution (which
    ignores logical types) would read older records of wrongly: days as microseconds, the unscaled
    digits at the new scale."""
    if old in _INTEGERS and new in _INTEGERS:
        return _INTEGERS.index(new) > _INTEGERS.index(old)
    if new == pa.float64():
        return old in (pa.float32(), pa.int8(), pa.int16(), pa.int32())
    if pa.types.is_decimal(old) and pa.types.is_decimal(new):
        return bool(new.scale == old.scale and new.precision > old.precision)
    return False


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


def merge_schema(table: pa.Schema, incoming: pa.Schema, policy: Policy = "add") -> pa.Schema:
    """``table`` as ``policy`` makes it take ``incoming``'s fields; ``TypeChange`` where a field's type
    changed as the policy does not allow, ``NewField`` where the policy is ``fail`` and a field is new."""
    return pa.schema(_merge_fields(list(table), list(incoming), "", policy))


def _merge_fields(table: list[pa.Field], incoming: list[pa.Field], prefix: str, policy: Policy) -> list[pa.Field]:
    have = {f.name for f in table}
    merged = [f.with_type(_merge(f.type, new.type, f"{prefix}{f.name}", policy)) if (new := _named(incoming, f.name))
              else f for f in table]
    added = [f.with_nullable(True) for f in incoming if f.name not in have]
    if added and policy == "fail":
        raise NewField(f"{prefix}{added[0].name}", plain(added[0].type))
    return merged + added


def _named(fields: list[pa.Field], name: str) -> pa.Field | None:
    return next((f for f in fields if f.name == name), None)


def _merge(old: pa.DataType, new: pa.DataType, path: str, policy: Policy) -> pa.DataType:
    old, new = plain(old), plain(new)
    if pa.types.is_struct(old) and pa.types.is_struct(new):
        return pa.struct(_merge_fields(list(old.fields), list(new.fields), f"{path}.", policy))
    if pa.types.is_list(old) and pa.types.is_list(new):
        return pa.list_(old.value_field.with_type(_merge(old.value_type, new.value_type, f"{path}[]", policy)))
    if pa.types.is_map(old) and pa.types.is_map(new) and old.key_type == new.key_type:
        return pa.map_(old.key_type, old.item_field.with_type(_merge(old.item_type, new.item_type, f"{path}{{}}", policy)))
    if old == new:
        return old
    if policy == "widen" and widens(old, new):
        return new
    raise TypeChange(path, old, new)


@dataclass(frozen=True)
class Widening:
    """A column (or nested field) whose type ``merge_schema`` widened; ``column`` is its path as Spark
    SQL's ALTER TABLE ... ALTER COLUMN names it (``a.b``, ``a.element``, ``m.value``, quoted)."""

    path: str
    column: str
    table_type: pa.DataType
    new_type: pa.DataType


def widenings(table: pa.Schema, merged: pa.Schema) -> list[Widening]:
    """What ``merged`` (``merge_schema``'s answer for ``table``) widened."""
    found: list[Widening] = []

    def walk(old: pa.DataType, new: pa.DataType, path: str, column: str) -> None:
        old, new = plain(old), plain(new)
        if pa.types.is_struct(old) and pa.types.is_struct(new):
            for f in old.fields:
                if (g := _named(list(new.fields), f.name)) is not None:
                    walk(f.type, g.type, f"{path}.{f.name}", f"{column}.{_quoted(f.name)}")
        elif pa.types.is_list(old) and pa.types.is_list(new):
            walk(old.value_type, new.value_type, f"{path}[]", f"{column}.element")
        elif pa.types.is_map(old) and pa.types.is_map(new):
            walk(old.item_type, new.item_type, f"{path}{{}}", f"{column}.value")
        elif old != new:
            found.append(Widening(path, column, old, new))

    for f in table:
        if (g := _named(list(merged), f.name)) is not None:
            walk(f.type, g.type, f.name, _quoted(f.name))
    return found


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


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
