"""A pipeline's sensitive fields (``contract.sensitive``) in the executors: each decoded batch's rows
protected before anything of them is written, and the quarantine's raw records sealed.

Per field (a top-level column, or a dotted path into structs for ``hash`` and ``redact``):

- ``hash``: HMAC-SHA-256 of the value's UTF-8 bytes keyed with the tenant's field key (kept in the
  secret store, one per tenant), as 64 hex characters: a value hashes the same in every pipeline of a
  tenant (joins and counts by it still work) and differently in another tenant's.
- ``redact``: the fixed mask ``REDACTED``.
- ``drop``: the column is not written (``dropped``; the table's columns are planned without it).

Null stays null. ``hash`` and ``redact`` apply to STRING fields.

A pipeline with a sensitive field **seals** its quarantine: the raw ``key`` and ``value`` of a record
set aside (it did not decode, or broke a quarantine rule) are encrypted with AES-256-GCM under the
tenant's seal key, as ``SEALED`` + a 12-byte nonce + the ciphertext and its tag, so no file holds
what the pipeline protects; reprocessing opens them with the same key (``open_sealed``).

Pickled to the tasks with their plan: no pydantic here.
"""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import pyarrow as pa
import pyarrow.compute as pc

from spark_jobs.errors import JobError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    from spark_jobs.contract.spec import SensitiveFieldSpec

Action = Literal["hash", "redact", "drop"]
MASK = "REDACTED"
SEALED = b"inlet-sealed:1:"  # a sealed quarantine value's first bytes
_AAD = b"inlet quarantine"
_NONCE = 12
_STRINGS = (pa.string(), pa.large_string())


@dataclass(frozen=True)
class FieldKey:
    """A tenant's field key as the run's spec carries it (base64 of 64 bytes): the first half keys the
    hashes, the second seals the quarantine."""

    hmac: bytes
    seal: bytes

    @classmethod
    def of(cls, encoded: str) -> FieldKey:
        raw = base64.b64decode(encoded)
        if len(raw) != 64:
            raise JobError("invalid_spec", "the tenant's field key is not 64 bytes")
        return cls(raw[:32], raw[32:])



def new_field_key() -> str:
    """A new tenant's field key, as the secret store keeps it and a run's spec carries it."""
    return base64.b64encode(os.urandom(64)).decode()


@dataclass(frozen=True)
class Protection:
    """The pipeline's sensitive fields and the tenant's key, shipped to the tasks."""

    fields: tuple[tuple[tuple[str, ...], Action], ...]
    key: FieldKey
    _pads: tuple[bytes, bytes] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        block = self.key.hmac.ljust(64, b"\0")  # SHA-256's block: HMAC's inner and outer pads
        object.__setattr__(self, "_pads", (bytes(b ^ 0x36 for b in block), bytes(b ^ 0x5C for b in block)))

    @classmethod
    def of(cls, specs: Sequence[SensitiveFieldSpec], key: str | None) -> Protection | None:
        """The protection of a run's spec; None without sensitive fields."""
        if not specs:
            return None
        if key is None:
            raise JobError("invalid_spec", "sensitive fields need the tenant's field key")
        return cls(tuple((tuple(s.field.split(".")), s.action) for s in specs), FieldKey.of(key))

    @property
    def dropped(self) -> frozenset[str]:
        """The top-level columns the table is planned without."""
        return frozenset(path[0] for path, action in self.fields if action == "drop")

    def without_dropped(self, schema: pa.Schema) -> pa.Schema:
        return pa.schema([f for f in schema if f.name not in self.dropped])

    def check(self, schema: pa.Schema) -> None:
        """Each hashed or redacted field is a STRING of ``schema`` (a row's columns), on the driver before
        anything is read: ``invalid_spec`` naming it otherwise. A whole value kept as a VARIANT
        (``value VARIANT``) would keep every field of it as it came: refused too."""
        from spark_jobs.columns import WHOLE_VALUE
        from spark_jobs.formats.variant_type import is_variant

        if WHOLE_VALUE in schema.names and is_variant(schema.field(WHOLE_VALUE).type):
            raise JobError("invalid_spec", "sensitive fields are protected in the decoded columns, and a whole value kept "
                                           "as a VARIANT (value VARIANT) keeps them as they came: drop one of the two")
        for path, action in self.fields:
            if action == "drop":
                continue
            kind = _type_at(schema, path)
            if kind is None:
                raise JobError("invalid_spec", f"sensitive field {'.'.join(path)} is not a column of the rows")
            if kind not in _STRINGS:
                raise JobError("invalid_spec", f"sensitive field {'.'.join(path)} is {kind}: {action} applies to "
                                               "STRING fields")

    def protect(self, rows: pa.Table) -> pa.Table:
        """``rows`` with each hashed or redacted field replaced (dropped ones are not in the rows)."""
        for path, action in self.fields:
            if action == "drop" or path[0] not in rows.schema.names:
                continue
            at = rows.schema.get_field_index(path[0])
            column = rows.column(at).combine_chunks()
            change = self._hash if action == "hash" else _redact
            rows = rows.set_column(at, rows.schema.field(at), _replaced(column, path[1:], change))
        return rows

    def seal(self, quarantine: pa.Table) -> pa.Table:
        """The quarantine rows with their raw ``key`` and ``value`` encrypted (``SEALED`` …)."""
        if quarantine.num_rows == 0:
            return quarantine
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        aead = AESGCM(self.key.seal)
        for name in ("key", "value"):
            at = quarantine.schema.get_field_index(name)
            raw = quarantine.column(at).to_pylist()
            sealed = [None if v is None else _sealed(aead, v) for v in raw]
            quarantine = quarantine.set_column(at, quarantine.schema.field(at), pa.array(sealed, pa.binary()))
        return quarantine

    def _hash(self, values: pa.Array) -> pa.Array:
        """HMAC-SHA-256 in hex of each distinct value of ``values`` once (a batch repeats its customers)."""
        encoded = pc.dictionary_encode(values)
        inner_pad, outer_pad = self._pads
        inner, outer = hashlib.sha256(inner_pad), hashlib.sha256(outer_pad)
        digests = []
        for value in encoded.dictionary.to_pylist():
            i = inner.copy()
            i.update(value.encode())
            o = outer.copy()
            o.update(i.digest())
            digests.append(o.hexdigest())
        return pc.take(pa.array(digests, pa.string()), encoded.indices).cast(values.type)


def _sealed(aead: AESGCM, value: bytes) -> bytes:
    nonce = os.urandom(_NONCE)
    return SEALED + nonce + aead.encrypt(nonce, value, _AAD)


def open_sealed(key: FieldKey, value: bytes | None) -> bytes | None:
    """A quarantine value as it was read from Kafka (one not sealed is returned as it is)."""
    if value is None or not value.startswith(SEALED):
        return value
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    body = value[len(SEALED):]
    return AESGCM(key.seal).decrypt(body[:_NONCE], body[_NONCE:], _AAD)


def _redact(values: pa.Array) -> pa.Array:
    mask = pa.scalar(MASK, values.type)
    return pc.if_else(pc.is_null(values), pa.scalar(None, values.type), mask)


def _replaced(column: pa.Array, path: tuple[str, ...], change: Callable[[pa.Array], pa.Array]) -> pa.Array:
    """``column`` with the value at ``path`` (into its structs; empty: the column itself) changed."""
    if not path:
        return change(column)
    assert isinstance(column, pa.StructArray)  # checked against the schema (``check``)
    children = [_replaced(child, path[1:], change) if f.name == path[0] else child
                for child, f in zip(column.flatten(), column.type, strict=True)]
    return pa.StructArray.from_arrays(children, fields=list(column.type), mask=column.is_null())


def _type_at(schema: pa.Schema, path: tuple[str, ...]) -> pa.DataType | None:
    if path[0] not in schema.names:
        return None
    kind = schema.field(path[0]).type
    for name in path[1:]:
        if not pa.types.is_struct(kind) or kind.get_field_index(name) < 0:
            return None
        kind = kind.field(name).type
    return kind
