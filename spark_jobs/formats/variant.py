"""JSON values as VARIANT: Parquet's Variant binary encoding (parquet-format's VariantEncoding.md),
what Spark 4's ``parse_json`` and Delta's ``variantType`` feature store, a ``metadata`` and a
``value`` binary per value.

``encode(parsed)`` takes a JSON value as ``json_rules.parse`` gives it (objects as their key/value
pairs, float literals as their text) and gives the two binaries, typed as Spark types them: an
integer as the smallest of int8 … int64 that holds it (a longer one as a DECIMAL of scale 0, then a
DOUBLE), a number with a fraction as the DECIMAL of its digits, trailing zeros dropped (past 38
digits a DOUBLE), one with an exponent, ``NaN`` or ``Infinity`` as a DOUBLE; a string of fewer than
64 bytes as a short string. A key repeated in one object is refused (``json_rules.Bad``: the record
goes to quarantine; Spark's ``from_json`` leaves the whole field null). ``decode`` reads the two
binaries back into Python values (tests, and whoever reads a table with delta-rs).

The Arrow form is a struct of ``metadata`` and ``value`` (``variant_type.ARROW``), which
``delta_tables`` turns into Delta's ``variant`` type.
"""

from __future__ import annotations

import decimal
import math
import struct
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from spark_jobs.formats import json_rules
from spark_jobs.formats.variant_type import ARROW, is_variant

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

_NULL, _TRUE, _FALSE = b"\x00", b"\x04", b"\x08"
_INT_TYPES = ((3, -(2**7), 2**7 - 1, 1), (4, -(2**15), 2**15 - 1, 2), (5, -(2**31), 2**31 - 1, 4), (6, -(2**63), 2**63 - 1, 8))
_DECIMALS = ((9, 8, 4), (18, 9, 8), (38, 10, 16))  # (up to this precision, type id, bytes)
_DOUBLE, _STRING = 7, 16
_MAX_SHORT = 63


def arrow_schema(schema: StructType) -> pa.Schema:
    """A Spark schema's Arrow form (``to_arrow_schema``, in UTC) with each VARIANT as ``ARROW``, at
    any depth: the field order delta-rs reads a VARIANT column in."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return pa.schema([f.with_type(_delta_order(f.type)) for f in to_arrow_schema(schema, timezone="UTC")])


def _delta_order(kind: pa.DataType) -> pa.DataType:
    if is_variant(kind):
        return ARROW
    if pa.types.is_struct(kind):
        return pa.struct([f.with_type(_delta_order(f.type)) for f in kind])
    if pa.types.is_list(kind):
        return pa.list_(kind.value_field.with_type(_delta_order(kind.value_type)))
    if pa.types.is_map(kind):
        return pa.map_(kind.key_field, kind.item_field.with_type(_delta_order(kind.item_type)))
    return kind


def encode(parsed: Any) -> dict[str, bytes]:
    """A JSON value (``json_rules.parse``'s) as a VARIANT, in ``ARROW``'s fields."""
    keys: dict[str, int] = {}
    value = _value(parsed, keys)
    return {"metadata": _metadata(list(keys)), "value": value}


def _value(v: Any, keys: dict[str, int]) -> bytes:
    if v is None:
        return _NULL
    kind = type(v)
    if kind is bool:
        return _TRUE if v else _FALSE
    if kind is int:
        return _integer(v)
    if kind is json_rules.FloatText:
        return _number(v)
    if kind is str:
        return _string(v)
    if kind is list:
        return _array([_value(e, keys) for e in v])
    if isinstance(v, list):  # an object: its (key, value) pairs
        return _object(v, keys)
    raise json_rules.Bad(f"no VARIANT form for {kind.__name__}")


def _integer(v: int) -> bytes:
    for type_id, low, high, size in _INT_TYPES:
        if low <= v <= high:
            return bytes([type_id << 2]) + v.to_bytes(size, "little", signed=True)
    return _decimal(decimal.Decimal(v)) or _double(_float(v))


def _float(v: int | str) -> float:
    """A number past a double's range as ±Infinity, as Spark reads it."""
    try:
        return float(v)
    except OverflowError:
        return math.inf if not str(v).startswith("-") else -math.inf


def _number(text: str) -> bytes:
    if text in json_rules.SPECIAL_FLOATS:
        return _double(json_rules.SPECIAL_FLOATS[text])
    if "e" in text or "E" in text:
        return _double(_float(text))
    return _decimal(decimal.Decimal(text)) or _double(_float(text))


def _decimal(number: decimal.Decimal) -> bytes | None:
    """``number`` as the smallest DECIMAL holding its digits, trailing zeros dropped; None past 38 digits."""
    exact = decimal.Context(prec=json_rules.MAX_DIGITS + 1)
    number = number.normalize(exact)
    sign, digits, exponent = number.as_tuple()
    assert isinstance(exponent, int)  # finite: parsed from a JSON number
    if exponent > 0:  # 1.2E+3 once its zeros are dropped: back to scale 0
        sign, digits, exponent = number.quantize(decimal.Decimal(1), context=exact).as_tuple()
        assert isinstance(exponent, int)
    scale = -exponent
    precision = max(len(digits), scale)
    unscaled = int("".join(map(str, digits)) or "0") * (-1 if sign else 1)
    for most, type_id, size in _DECIMALS:
        if precision <= most:
            return bytes([type_id << 2, scale]) + unscaled.to_bytes(size, "little", signed=True)
    return None


def _double(v: float) -> bytes:
    return bytes([_DOUBLE << 2]) + struct.pack("<d", v)


def _utf8(v: str) -> bytes:
    try:
        return v.encode()
    except UnicodeEncodeError:  # a lone surrogate (``\ud800``): no UTF-8 form, which a VARIANT's strings must have
        raise json_rules.Bad("a string that is not UTF-8") from None


def _string(v: str) -> bytes:
    data = _utf8(v)
    if len(data) <= _MAX_SHORT:
        return bytes([len(data) << 2 | 1]) + data
    return bytes([_STRING << 2]) + len(data).to_bytes(4, "little") + data


def _array(values: list[bytes]) -> bytes:
    offsets = _offsets(values)
    size, large = _width(offsets[-1]), len(values) > 255
    header = ((int(large) << 2) | (size - 1)) << 2 | 3
    return (bytes([header]) + len(values).to_bytes(4 if large else 1, "little")
            + b"".join(o.to_bytes(size, "little") for o in offsets) + b"".join(values))


def _object(pairs: list[tuple[str, Any]], keys: dict[str, int]) -> bytes:
    fields: dict[str, bytes] = {}
    for key, member in pairs:
        if key in fields:
            raise json_rules.Bad(f"the key {key!r} twice in one object")
        if key not in keys:
            _utf8(key)  # a key is a string of the metadata's: UTF-8 too
            keys[key] = len(keys)
        fields[key] = _value(member, keys)
    names = sorted(fields, key=str.encode)  # field ids in the byte order of their names
    values = [fields[name] for name in names]
    offsets = _offsets(values)
    ids = [keys[name] for name in names]
    id_size, offset_size, large = _width(max(ids, default=0)), _width(offsets[-1]), len(values) > 255
    header = ((int(large) << 4) | ((id_size - 1) << 2) | (offset_size - 1)) << 2 | 2
    return (bytes([header]) + len(values).to_bytes(4 if large else 1, "little")
            + b"".join(i.to_bytes(id_size, "little") for i in ids)
            + b"".join(o.to_bytes(offset_size, "little") for o in offsets) + b"".join(values))


def _metadata(keys: list[str]) -> bytes:
    data = [k.encode() for k in keys]
    offsets = _offsets(data)
    size = _width(max(offsets[-1], len(keys)))
    header = 1 | ((size - 1) << 6)  # version 1, strings in the order first met
    return (bytes([header]) + len(keys).to_bytes(size, "little")
            + b"".join(o.to_bytes(size, "little") for o in offsets) + b"".join(data))


def _offsets(parts: list[bytes]) -> list[int]:
    offsets, at = [0], 0
    for part in parts:
        at += len(part)
        offsets.append(at)
    return offsets


def _width(largest: int) -> int:
    """The bytes an unsigned field needs to hold ``largest`` (1 to 4)."""
    return 1 if largest < 1 << 8 else 2 if largest < 1 << 16 else 3 if largest < 1 << 24 else 4


def decode(metadata: bytes, value: bytes) -> Any:
    """A VARIANT's two binaries as a Python value: dicts, lists, str, int, Decimal, float, bool, None
    (dates, timestamps, binary and UUIDs, which no JSON value becomes, as their raw ints and bytes)."""
    keys = _keys(metadata)
    return _read(value, 0, keys)


def _keys(metadata: bytes) -> list[str]:
    if metadata[0] & 0x0F != 1:
        raise ValueError(f"variant metadata version {metadata[0] & 0x0F}, not 1")
    size = (metadata[0] >> 6) + 1
    count = int.from_bytes(metadata[1:1 + size], "little")
    offsets = [int.from_bytes(metadata[1 + size * (i + 1):1 + size * (i + 2)], "little") for i in range(count + 1)]
    data = metadata[1 + size * (count + 2):]
    return [data[offsets[i]:offsets[i + 1]].decode() for i in range(count)]


def _read(buffer: bytes, at: int, keys: list[str]) -> Any:
    head = buffer[at]
    basic, header = head & 3, head >> 2
    if basic == 1:
        return buffer[at + 1:at + 1 + header].decode()
    if basic == 0:
        return _primitive(buffer, at + 1, header)
    large = bool(header >> (4 if basic == 2 else 2) & 1)
    count_size = 4 if large else 1
    count = int.from_bytes(buffer[at + 1:at + 1 + count_size], "little")
    offset_size = (header & 3) + 1
    at += 1 + count_size
    names: list[str] = []
    if basic == 2:
        id_size = (header >> 2 & 3) + 1
        names = [keys[int.from_bytes(buffer[at + i * id_size:at + (i + 1) * id_size], "little")] for i in range(count)]
        at += count * id_size
    offsets = [int.from_bytes(buffer[at + i * offset_size:at + (i + 1) * offset_size], "little") for i in range(count + 1)]
    start = at + (count + 1) * offset_size
    members = [_read(buffer, start + offsets[i], keys) for i in range(count)]
    return dict(zip(names, members, strict=True)) if basic == 2 else members


def _primitive(buffer: bytes, at: int, type_id: int) -> Any:
    simple = {0: None, 1: True, 2: False}
    if type_id in simple:
        return simple[type_id]
    for int_id, _, _, size in _INT_TYPES:
        if type_id == int_id:
            return int.from_bytes(buffer[at:at + size], "little", signed=True)
    for _, decimal_id, size in _DECIMALS:
        if type_id == decimal_id:
            unscaled = int.from_bytes(buffer[at + 1:at + 1 + size], "little", signed=True)
            return decimal.Decimal(unscaled).scaleb(-buffer[at], decimal.Context(prec=39))
    if type_id == _DOUBLE:
        return struct.unpack("<d", buffer[at:at + 8])[0]
    if type_id == 14:  # float
        return struct.unpack("<f", buffer[at:at + 4])[0]
    if type_id in (15, _STRING):
        length = int.from_bytes(buffer[at:at + 4], "little")
        data = buffer[at + 4:at + 4 + length]
        return data.decode() if type_id == _STRING else data
    sizes = {11: 4, 12: 8, 13: 8, 17: 8, 18: 8, 19: 8, 20: 16}
    if type_id in sizes:
        return int.from_bytes(buffer[at:at + sizes[type_id]], "little", signed=type_id != 20)
    raise ValueError(f"variant primitive type {type_id} is unknown")

