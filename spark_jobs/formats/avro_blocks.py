"""Avro payloads decoded a batch to one call: the records of a batch written with the reader's own
schema, read by Polars' Avro reader (Rust, into Arrow) as one block of an Avro object container file.

A payload in the Confluent wire format (magic byte 0, a 4-byte schema id, the Avro body) is itself
the Avro encoding of a record with a 5-byte ``fixed`` field before the schema's own fields. So a
batch's payloads, concatenated as they are in their Arrow column, are one block of a container file
whose schema is that wrapper: nothing is sliced or copied record by record to build it.

A block has no record boundaries: each record is read from where the one before it ended. The rows
are kept only when every row's canonical encoding (minimal varints, an array in one block) is exactly
as long as its payload. No decoder consumes fewer bytes than a value's canonical encoding, and none
reads past its block. So when the sizes all match, each record was read from exactly its own bytes.
Anything else gives None: a malformed record, a non-canonical encoding, a type this module does not
size, an error or a panic from Polars. The caller then decodes the batch record by record with
fastavro, the reference this path is held to (``tests/formats/test_avro_blocks.py``).

Sized here, so read in blocks: records, null, boolean, int, long, float, double, string, bytes,
enum, fixed, arrays of those, and unions of null and one of them. Their logical types are read as
the underlying type (as fastavro is asked to; see ``avro._raw``), except decimal, which this path
leaves to fastavro, as it does maps and unions of several types.
"""

from __future__ import annotations

import io
import itertools
import json
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spark_jobs.formats import avro

_HEADER_FIELD = "_inlet_wire_header"
_SYNC = b"inlet-avro-block"  # the container's 16-byte sync marker: any 16 bytes do
_FIXED_SIZES = {"boolean": 1, "float": 4, "double": 8}
_PRIMITIVES = {*_FIXED_SIZES, "null", "int", "long", "string", "bytes"}
_NAMED = ("record", "error", "enum", "fixed")


class BlockReader:
    """Reads batches of one schema's payloads (each with the wire header ``header``) in one block."""

    def __init__(self, schema: Any, header: bytes) -> None:
        self._raw = avro._raw(schema)
        raw = _inline(self._raw, "", {})  # Polars' reader follows no reference to a named type
        self.header = header
        self.is_record = isinstance(raw, dict) and raw.get("type") in ("record", "error")
        self.fields: list[dict[str, Any]] = list(raw["fields"]) if self.is_record else [{"name": "value", "type": raw}]
        self.read_type = avro.arrow_type(schema, as_read=True)
        wrapper = {"type": "record", "name": "InletWireRecord", "fields": [
            {"name": _HEADER_FIELD, "type": {"type": "fixed", "name": "InletWireHeader", "size": len(header)}},
            *self.fields,
        ]}
        text = json.dumps(_for_polars(wrapper, itertools.count())).encode()
        self._container = (b"Obj\x01" + _long(2) + _bytes(b"avro.schema") + _bytes(text)
                           + _bytes(b"avro.codec") + _bytes(b"null") + _long(0) + _SYNC)

    def usable(self) -> bool:
        """Whether this schema is read in blocks: every type one this module sizes, a record with
        fields, a schema fastavro (the fallback) parses and Polars reads (tried on an empty file)."""
        import polars as pl
        from fastavro import parse_schema
        from polars.exceptions import PanicException

        if (self.is_record and not self.fields) or any(f["name"] == _HEADER_FIELD for f in self.fields):
            return False
        if not all(_supports(f["type"]) for f in self.fields):
            return False
        try:
            parse_schema(self._raw)
            pl.read_avro(io.BytesIO(self._container))
        except (Exception, PanicException):  # noqa: BLE001 - a schema either refuses is read record by record
            return False
        return True

    def read(self, payloads: pa.Array) -> pa.Array | None:
        """``payloads`` (binary, none null, each starting with the header) decoded into ``read_type``;
        None where the block cannot be trusted (the caller decodes record by record)."""
        import polars as pl
        from polars.exceptions import PanicException

        data = payloads.cast(pa.binary()) if payloads.type != pa.binary() else payloads
        offsets = np.frombuffer(data.buffers()[1], np.int32, len(data) + 1, data.offset * 4)
        body = data.buffers()[2][offsets[0]:offsets[-1]]
        block = b"".join((self._container, _long(len(data)), _long(len(body)), body, _SYNC))
        try:
            table = pl.read_avro(io.BytesIO(block)).to_arrow()
        except (Exception, PanicException):  # noqa: BLE001 - any failure: fastavro decodes, and names the bad records
            return None
        columns = [table.column(f["name"]).combine_chunks() for f in self.fields]
        layout = _Layout(np.frombuffer(data.buffers()[2], np.uint8))
        present = np.ones(len(data), bool)
        sizes = np.full(len(data), len(self.header), np.int64)
        try:
            for f, column in zip(self.fields, columns, strict=True):
                sizes += layout.sizes(f["type"], column, offsets[:-1] + sizes, present)
        except _Refused:
            return None
        if not np.array_equal(sizes, np.diff(offsets)):
            return None
        try:
            columns = [_from_polars(f["type"], column) for f, column in zip(self.fields, columns, strict=True)]
            if self.is_record:
                return pa.StructArray.from_arrays(columns, names=[f["name"] for f in self.fields]).cast(self.read_type)
            return columns[0].cast(self.read_type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            return None


def _inline(node: Any, namespace: str, named: dict[str, Any]) -> Any:
    """``node`` with every reference to a named type replaced by the type (a schema ``avro.arrow_type``
    accepted has no recursion, so this ends). An unknown name stays, and is not supported. ``namespace``
    is the one a short name resolves in: the enclosing named type's (the Avro specification's rule)."""
    if isinstance(node, str):
        if node in _PRIMITIVES:
            return node
        return named.get(f"{namespace}.{node}" if namespace and "." not in node else node) or named.get(node, node)
    if isinstance(node, list):
        return [_inline(branch, namespace, named) for branch in node]
    kind = node.get("type")
    out = dict(node)
    if kind in _NAMED:
        name = node["name"]
        namespace = name.rpartition(".")[0] if "." in name else node.get("namespace", namespace)
        full = f"{namespace}.{name.rpartition('.')[2]}".lstrip(".")
        if kind in ("record", "error"):
            out["fields"] = [{**f, "type": _inline(f["type"], namespace, named)} for f in node["fields"]]
        named[full] = out
    elif kind == "array":
        out["items"] = _inline(node["items"], namespace, named)
    elif kind == "map":
        out["values"] = _inline(node["values"], namespace, named)
    elif kind in _PRIMITIVES and node.get("logicalType") != "decimal":
        return kind  # {"type": "boolean"} and the like: the primitive's name, as every function here takes it
    elif isinstance(kind, (dict, list)) or (isinstance(kind, str) and kind not in _PRIMITIVES):
        return _inline(kind, namespace, named)  # {"type": {...}} or {"type": "Name"}: the type itself
    return out


def _for_polars(node: Any, names: Iterator[int]) -> Any:
    """An inlined schema as Polars' reader is given it. Each named type gets a name of its own (the
    inlined copies of one type would otherwise be defined twice). Two types are given as others of the
    same encoding, read back by ``_from_polars``:
    - an int as a long: Polars wraps an int's varint past 32 bits into the int's range, where fastavro
      gives a value that does not fit the column (quarantined); read as a long, it fails the cast back;
    - an enum as a long (its index): Polars reads an enum only as a top-level field, not in a union,
      a record or an array;
    - a boolean as a 1-byte fixed: Polars reads a byte other than 0 and 1 as false, fastavro (Inlet's
      reference) as true."""
    if node == "boolean":
        return {"type": "fixed", "name": f"InletBoolean_{next(names)}", "size": 1}
    if node == "int":
        return "long"
    if isinstance(node, list):
        return [_for_polars(branch, names) for branch in node]
    if not isinstance(node, dict):
        return node
    if node.get("type") == "enum":
        return "long"
    out = {k: v for k, v in node.items() if k != "namespace"}
    if node.get("type") in _NAMED:
        out["name"] = f"{node['name'].rpartition('.')[2]}_{next(names)}"
    if "fields" in node:  # a field's name and type only: Polars refuses most defaults
        out["fields"] = [{"name": f["name"], "type": _for_polars(f["type"], names)} for f in node["fields"]]
    if "items" in node:
        out["items"] = _for_polars(node["items"], names)
    return out


def _from_polars(node: Any, array: pa.Array) -> pa.Array:
    """``array`` with the stand-ins ``_for_polars`` gave Polars read as the types they stand for: an
    int's long as an int (raising out of range), an enum's index as its symbol (``_Layout`` has
    checked every index), a boolean's byte as fastavro reads it (any byte but 0 is true). Arrays
    without stand-ins are returned as they are."""
    if not _has_stand_in(node):
        return array
    if node == "boolean":
        return pc.not_equal(array, pa.scalar(b"\x00", array.type))
    if node == "int":
        return array.cast(pa.int32())  # a safe cast: a value out of the int's range raises
    if isinstance(node, list):
        return _from_polars(next(b for b in node if b != "null"), array)
    if node["type"] == "enum":
        return pc.take(pa.array(node["symbols"], pa.string()), array)
    mask = array.is_null() if array.null_count else None
    if node["type"] in ("record", "error"):
        names = [f["name"] for f in node["fields"]]
        children = [_from_polars(f["type"], array.field(f["name"])) for f in node["fields"]]
        return pa.StructArray.from_arrays(children, names=names, mask=mask)
    lists = pa.LargeListArray if pa.types.is_large_list(array.type) else pa.ListArray  # an array of them
    return lists.from_arrays(array.offsets, _from_polars(node["items"], array.values), mask=mask)


def _has_stand_in(node: Any) -> bool:
    if isinstance(node, str):
        return node in ("boolean", "int")
    if isinstance(node, list):
        return any(_has_stand_in(b) for b in node)
    if node.get("type") in ("record", "error"):
        return any(_has_stand_in(f["type"]) for f in node["fields"])
    return node.get("type") == "enum" or (node.get("type") == "array" and _has_stand_in(node["items"]))


def _supports(node: Any) -> bool:
    """Whether an inlined schema is made of types ``_sizes`` sizes and Polars reads."""
    if isinstance(node, str):
        return node in _PRIMITIVES and node != "null"  # a field of type null: Polars reads none
    if isinstance(node, list):
        others = [b for b in node if b != "null"]
        return len(node) == 2 and len(others) == 1 and _supports(others[0])
    kind = node.get("type")
    if kind in ("record", "error"):
        return all(_supports(f["type"]) for f in node["fields"])
    if kind == "array":
        return _supports(node["items"])
    if node.get("logicalType") == "decimal":
        return False
    return kind in ("enum", "fixed") or (kind in _PRIMITIVES and kind != "null")


class _Refused(Exception):
    """A record whose bytes the block read cannot be trusted to have read as fastavro does."""


class _Layout:
    """Where each value of a block lies, from its decoded values (an inlined, supported schema):
    ``sizes`` gives each row's canonical encoding length, and checks the bytes that sizes cannot
    tell apart. A union's branch index is one byte whether it is valid or not, and Polars reads
    any index but null's as the other branch, where fastavro refuses it. So each index is read
    where the values before it put it. An enum's index is checked against its symbols."""

    def __init__(self, data: np.ndarray) -> None:
        self.data = data  # the block's bytes (the Arrow column's data buffer)

    def sizes(self, node: Any, array: pa.Array, starts: np.ndarray | None, present: np.ndarray) -> np.ndarray:
        """``array``'s values' lengths; ``starts``: where each begins in ``data`` (None: not known yet,
        unions not checked); ``present``: rows with a value in the encoding (not under a union's null)."""
        if isinstance(node, dict) and node["type"] not in (*_NAMED, "array"):
            node = node["type"]  # a primitive with a logical type
        if isinstance(node, str):
            if node in _FIXED_SIZES:
                return np.full(len(array), _FIXED_SIZES[node], np.int64)
            if node in ("int", "long"):
                return _varint_sizes(_numbers(array))
            lengths = _numbers(pc.binary_length(array))  # string, bytes
            return _varint_sizes(lengths) + lengths
        if isinstance(node, list):  # null and one type: the branch's index, then the value if there is one
            valid = array.is_valid().to_numpy(zero_copy_only=False)
            null_first = node[0] == "null"
            if starts is not None:
                index = np.take(self.data, starts[present], mode="clip")
                if not np.array_equal(index, np.where(valid[present] != null_first, 0, 2)):  # zig-zag 0 and 1
                    raise _Refused
            other = node[1] if null_first else node[0]
            inner = self.sizes(other, array, None if starts is None else starts + 1, present & valid)
            return 1 + np.where(valid, inner, 0)
        kind = node["type"]
        if kind in ("record", "error"):
            total = np.zeros(len(array), np.int64)
            for f in node["fields"]:
                total += self.sizes(f["type"], array.field(f["name"]), None if starts is None else starts + total, present)
            return total
        if kind == "enum":  # read as its index (``_for_polars``)
            index = _numbers(array)
            if np.any(present & ((index < 0) | (index >= len(node["symbols"])))):
                raise _Refused
            return _varint_sizes(index)
        if kind == "fixed":
            return np.full(len(array), int(node["size"]), np.int64)
        return self._array(node["items"], array, starts, present)

    def _array(self, items_node: Any, array: pa.Array, starts: np.ndarray | None, present: np.ndarray) -> np.ndarray:
        """An array's length: one block of its items (a count, then the items), then an empty one."""
        lengths = _numbers(pc.list_value_length(array))
        items = array.flatten()
        parents = _numbers(pc.list_parent_indices(array))
        # Sized once without a start (an item's start needs the sizes of the items before it), then,
        # where items hold unions to check, again from where each item begins.
        item_sizes = self.sizes(items_node, items, None, present[parents])
        if starts is not None and _has_union(items_node) and len(items):
            ends = np.cumsum(item_sizes)
            first = np.cumsum(lengths) - lengths  # each list's first item among the flattened items
            item_starts = (starts + _varint_sizes(lengths))[parents] + (ends - item_sizes) - (ends - item_sizes)[first[parents]]
            self.sizes(items_node, items, item_starts, present[parents])
        sums = np.bincount(parents, weights=item_sizes, minlength=len(array)).astype(np.int64)
        return np.where(lengths > 0, _varint_sizes(lengths) + sums, 0) + 1


def _has_union(node: Any) -> bool:
    if isinstance(node, list):
        return True
    if isinstance(node, dict) and node.get("type") in ("record", "error"):
        return any(_has_union(f["type"]) for f in node["fields"])
    return isinstance(node, dict) and node.get("type") == "array" and _has_union(node["items"])


def _numbers(array: pa.Array, missing: int = 0) -> np.ndarray:
    if array.type == pa.int64() and array.null_count == 0:
        return array.to_numpy()  # no copy
    return pc.fill_null(array.cast(pa.int64()), missing).to_numpy(zero_copy_only=False)


def _varint_sizes(values: np.ndarray) -> np.ndarray:
    """The length of each value's zig-zag varint, as Avro writes an int or a long."""
    zigzag = ((values << 1) ^ (values >> 63)).view(np.uint64)
    sizes = np.ones(len(values), np.int64)
    top = int(zigzag.max()) if len(zigzag) else 0
    for k in range(1, 10):
        if top < 1 << (7 * k):
            break  # no value takes another byte
        sizes += zigzag >= np.uint64(1 << (7 * k))
    return sizes


def _long(value: int) -> bytes:
    return bytes(_varint(value))


def _varint(value: int) -> bytearray:
    n = (value << 1) ^ (value >> 63)
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return out


def _bytes(value: bytes) -> bytes:
    return _long(len(value)) + value
