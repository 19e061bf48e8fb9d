"""Arrow schemas as Delta's, where delta-rs's own conversion falls short: a VARIANT column
(``formats.variant_type.ARROW``, a struct of two binaries to Arrow) is Delta's ``variant``, and a table
given table features for one lists the ``invariants`` delta-spark needs of it."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from spark_jobs.formats.variant_type import is_variant

if TYPE_CHECKING:
    from deltalake import DeltaTable, Field, Schema


def delta_schema(schema: pa.Schema) -> Schema:
    """``schema`` as Delta's, each top-level VARIANT's struct (``formats.variant_type.ARROW``) as Delta's
    ``variant`` (delta-rs's own conversion makes a struct of two binaries of it), nested ones too."""
    from deltalake import Schema

    return Schema([delta_field(f) for f in schema])


def delta_field(field: pa.Field) -> Field:
    from deltalake import Field, Schema
    from deltalake.schema import ArrayType, MapType, StructType, VariantType

    kind = field.type
    metadata = {k.decode(): v.decode() for k, v in (field.metadata or {}).items()}
    if is_variant(kind):
        return Field(field.name, VariantType(), nullable=field.nullable, metadata=metadata)
    if pa.types.is_struct(kind) and holds_variant(kind):
        return Field(field.name, StructType([delta_field(f) for f in kind]), nullable=field.nullable, metadata=metadata)
    if pa.types.is_list(kind) and holds_variant(kind):
        element = delta_field(kind.value_field)
        return Field(field.name, ArrayType(element.type, contains_null=element.nullable), nullable=field.nullable, metadata=metadata)
    if pa.types.is_map(kind) and holds_variant(kind):
        keys, values = delta_field(kind.key_field), delta_field(kind.item_field)
        return Field(field.name, MapType(keys.type, values.type, value_contains_null=values.nullable), nullable=field.nullable,
                     metadata=metadata)
    [converted] = Schema.from_arrow(pa.schema([field])).fields
    return converted


def holds_variant(kind: pa.DataType) -> bool:
    if is_variant(kind):
        return True
    if pa.types.is_struct(kind):
        return any(holds_variant(f.type) for f in kind)
    if pa.types.is_list(kind):
        return holds_variant(kind.value_type)
    if pa.types.is_map(kind):
        return holds_variant(kind.item_type)
    return False


def holds_variant_column(delta: DeltaTable) -> bool:
    """Whether the table has a VARIANT column, at any depth (its Arrow form says a struct)."""
    return '"type":"variant"' in delta.schema().to_json()


def list_invariants(delta: DeltaTable) -> None:
    """A table delta-rs gave table features (writer version 7: a VARIANT column needs them) lists only
    the one it needed, and delta-spark refuses it: its NOT NULL columns (``_inlet_run_id``) are
    ``invariants``, which the legacy versions implied and a table of features must list."""
    from deltalake import TableFeatures

    protocol = delta.protocol()
    if (protocol.min_writer_version >= 7 and "invariants" not in (protocol.writer_features or [])
            and any(not f.nullable for f in delta.schema().fields)):
        delta.alter.add_feature([TableFeatures.Invariants], allow_protocol_versions_increase=True)
