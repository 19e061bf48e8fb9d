"""Spark's ``from_json`` rules for one record, exactly: the slow path of ``json_values``.

Python's own ``json`` module parses the record (keeping float literals' text, every key of an object
in order, and ``NaN`` / ``Infinity`` / ``-Infinity``, which Spark's Jackson accepts); then each
field of the schema becomes its column value by the rule Spark's ``JacksonParser`` applies to that
type, and a value that breaks a rule makes the whole record bad (Spark's PERMISSIVE mode sets the
corrupt-record column, and Inlet quarantines it):

- integers: integer literals in the type's range; floats: any number, or the strings ``NaN``,
  ``Infinity``, ``+Infinity``, ``+INF``, ``-Infinity``, ``-INF``; booleans: ``true`` / ``false``;
- decimals: a number, or a string Java's ``BigDecimal`` reads, rounded half up to the scale, bad if
  it then has more digits than the precision;
- strings: a JSON string, or any other value as the compact JSON text Jackson writes for it (floats
  as Java prints a double; ``NaN`` quoted);
- binary: base64 (padded, white space allowed between groups of four);
- dates and timestamps: ``spark_datetime``; a timestamp may also be an integer of epoch seconds;
- arrays, maps and structs: an array, or an object, whose members follow their own types.

The record itself: leading JSON white space is skipped and anything after the first value is
ignored (as Spark's parser never reads on); the value must be an object, nested at most 1000 deep,
with no number of more than 1000 digits (Jackson's limits).
"""

from __future__ import annotations

import base64
import binascii
import decimal
import json
import math
import re
import sys
from collections.abc import Callable
from typing import Any

from pyspark.sql import types as T

from spark_jobs.formats.spark_datetime import (
    Zone,
    epoch_seconds_to_micros,
    json_date,
    json_timestamp,
    string_to_timestamp,
)

MAX_DEPTH = 1000  # Jackson refuses a document nested deeper
MAX_DIGITS = 1000  # Jackson's longest number
SPECIAL_FLOATS = {"NaN": math.nan, "Infinity": math.inf, "+Infinity": math.inf, "+INF": math.inf,
                   "-Infinity": -math.inf, "-INF": -math.inf}
# Java's BigDecimal(String): its digits are any Unicode decimal digits, as Python's \d.
_BIG_DECIMAL = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
# Java rounds 1e-N to a scale by dividing by 10^N, a BigInteger it cannot build past 2^31 bits.
_MAX_SCALE_DROP = 646_456_992
_DECIMALS = decimal.Context(prec=MAX_DIGITS * 2, rounding=decimal.ROUND_HALF_UP, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)
_JSON_SPACE = " \t\n\r"
INT_RANGES: dict[type[T.DataType], tuple[int, int]] = {
    T.ByteType: (-(2**7), 2**7 - 1), T.ShortType: (-(2**15), 2**15 - 1),
    T.IntegerType: (-(2**31), 2**31 - 1), T.LongType: (-(2**63), 2**63 - 1),
}
_BASE64 = re.compile(r"[A-Za-z0-9+/]{2}(?:==|[A-Za-z0-9+/]=|[A-Za-z0-9+/]{2})")


class Bad(ValueError):
    """The record is not JSON of the schema (Spark's corrupt record)."""


class FloatText(str):
    """A float literal's text (or NaN / Infinity / -Infinity): Spark reads its exact digits for decimals
    (``json_values``' decoder keeps a decimal's float literals as this too)."""


class _Object(list[Any]):
    """An object's (key, value) pairs, in order, duplicates kept."""


def _int(text: str) -> int:
    if len(text) - (text[0] == "-") > MAX_DIGITS:
        raise Bad("number too long")
    return int(text)


def _float(text: str) -> FloatText:
    if len(text) > MAX_DIGITS and sum(c.isdigit() for c in text) > MAX_DIGITS:  # Jackson counts every digit
        raise Bad("number too long")
    return FloatText(text)


_DECODER = json.JSONDecoder(object_pairs_hook=_Object, parse_float=_float, parse_int=_int, parse_constant=FloatText, strict=True)


_ENCODED_SURROGATE = re.compile(rb"\xed[\xa0-\xbf][\x80-\xbf]?")


def java_text(value: bytes) -> str:
    """Bytes as Java's InputStreamReader reads them: each malformed sequence becomes U+FFFD, an
    encoded surrogate (ED A0-BF …) one U+FFFD as a whole, where Python would replace each byte."""
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return _ENCODED_SURROGATE.sub(b"\xef\xbf\xbd", value).decode("utf-8", "replace")


def parse(value: bytes) -> _Object:
    """The record's first JSON value, as Spark's parser reads it; ``Bad`` unless it is an object."""
    parsed = parse_value(value)
    if type(parsed) is not _Object:
        raise Bad("not an object")  # an array of objects too: from_json reads one record per value
    return parsed


def parse_value(value: bytes) -> Any:
    """The record's first JSON value, as Spark's parser reads it, whatever it is (a whole value read
    as a VARIANT)."""
    text = java_text(value)
    start = len(text) - len(text.lstrip(_JSON_SPACE))
    if start == len(text):
        raise Bad("empty")
    try:
        parsed, _ = _DECODER.raw_decode(text, start)
    except RecursionError:  # deep, but maybe within Jackson's limit: again with enough stack
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(max(limit, 4 * MAX_DEPTH))
        try:
            parsed, _ = _DECODER.raw_decode(text, start)
        except (ValueError, RecursionError) as exc:
            raise Bad(str(exc)) from None
        finally:
            sys.setrecursionlimit(limit)
    except ValueError as exc:  # JSONDecodeError, and ints past Python's digit limit
        raise Bad(str(exc)) from None
    if text.count("[") + text.count("{") >= MAX_DEPTH and _depth(parsed) > MAX_DEPTH:
        raise Bad("nested too deep")
    return parsed


def parse_fragment(raw: bytes | memoryview | Any) -> Any:
    """One JSON value that msgspec already found well formed (``msgspec.Raw``), parsed like ``parse``."""
    text = java_text(bytes(raw))
    try:
        return _DECODER.raw_decode(text.strip(_JSON_SPACE))[0]
    except (ValueError, RecursionError) as exc:
        raise Bad(str(exc)) from None


def check_supported(schema: T.StructType) -> None:
    """``TypeError`` naming a type these rules do not cover: a run of such a schema fails as
    ``invalid_spec`` (and ``api/pipelines/ddl.py`` refuses it at definition time)."""
    converter(schema, Zone(0))


def _depth(value: Any) -> int:
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, list):  # arrays and objects
            deepest = max(deepest, level)
            stack.extend((v[1] if type(node) is _Object else v, level + 1) for v in node)
    return deepest


Converter = Callable[[Any], Any]


def converter(data_type: T.DataType, zone: Zone) -> Converter:
    """The function that turns a parsed JSON value into the Arrow-ready value of ``data_type``
    (ints, floats, str, bytes, Decimal, days, microseconds, lists, (key, value) lists, dicts)."""
    kind = type(data_type)
    if kind in INT_RANGES:
        low, high = INT_RANGES[kind]
        return lambda v: v if v is None or (type(v) is int and low <= v <= high) else _bad(v)
    if kind in (T.FloatType, T.DoubleType):
        return _double
    if kind is T.BooleanType:
        return lambda v: v if v is None or type(v) is bool else _bad(v)
    if kind is T.StringType:
        return _string
    if kind is T.BinaryType:
        return lambda v: None if v is None else _binary(v)
    if isinstance(data_type, T.DecimalType):
        precision, scale = data_type.precision, data_type.scale
        return lambda v: None if v is None else _decimal(v, precision, scale)
    if kind is T.DateType:
        return lambda v: None if v is None else _checked(json_date(v) if type(v) is str and v else None)
    if kind is T.TimestampType:
        return lambda v: None if v is None else _checked(_timestamp(v, zone))
    if kind is T.TimestampNTZType:
        return lambda v: None if v is None else _checked(
            string_to_timestamp(v, zone, allow_zone=False) if type(v) is str and v else None)
    if kind is T.NullType:
        return lambda v: None
    if isinstance(data_type, T.ArrayType):
        element = converter(data_type.elementType, zone)
        return lambda v: None if v is None else [element(e) for e in v] if type(v) is list else _bad(v)
    if isinstance(data_type, T.MapType):
        value_of = converter(data_type.valueType, zone)
        return lambda v: None if v is None else _map(v, value_of)
    if isinstance(data_type, T.StructType):
        return struct_converter(data_type, zone)
    if kind is T.VariantType:  # JSON null too: a VARIANT null, as Spark reads it (a missing field stays NULL)
        from spark_jobs.formats import variant

        return variant.encode
    raise TypeError(f"{data_type.simpleString()} is not decoded outside Spark")


def struct_converter(schema: T.StructType, zone: Zone) -> Callable[[Any], dict[str, Any] | None]:
    """An object's fields by name: the last of repeated keys wins, and a bad one spoils the record."""
    fields = {f.name: (f.name, converter(f.dataType, zone)) for f in schema.fields}

    def convert(value: Any) -> dict[str, Any] | None:
        if value is None:
            return None
        if type(value) is not _Object:
            _bad(value)
        row: dict[str, Any] = {}
        for key, member in value:
            field = fields.get(key)
            if field is not None:
                row[field[0]] = field[1](member)
        return row

    return convert


def _bad(value: Any) -> Any:
    raise Bad(f"unexpected {type(value).__name__}")


def _checked(value: int | None) -> int:
    if value is None:
        raise Bad("not a date or time")
    return value


def _double(v: Any) -> float | None:
    if v is None:
        return None
    kind = type(v)
    if kind is FloatText:
        return SPECIAL_FLOATS.get(v) if v in SPECIAL_FLOATS else float(v)
    if kind is int:
        try:
            return float(v)
        except OverflowError:
            return math.inf if v > 0 else -math.inf
    if kind is str and v in SPECIAL_FLOATS:
        return SPECIAL_FLOATS[v]
    return _bad(v)


def _timestamp(v: Any, zone: Zone) -> int | None:
    if type(v) is int:
        return epoch_seconds_to_micros(v)
    if type(v) is str and v:
        return json_timestamp(v, zone)
    return None


def _decimal(v: Any, precision: int, scale: int) -> decimal.Decimal:
    kind = type(v)
    if kind is int or (kind is FloatText and v not in SPECIAL_FLOATS):
        number = decimal.Decimal(v)
    elif kind is str and _BIG_DECIMAL.fullmatch(text := v.replace(",", "")):  # Spark drops commas first
        number = decimal.Decimal(text)
    else:
        return _bad(v)
    exponent = number.as_tuple().exponent
    if not isinstance(exponent, int) or -exponent - scale > _MAX_SCALE_DROP or exponent >= 2**31:
        raise Bad("decimal exponent out of Java's range")
    if number and number.adjusted() >= precision - scale + 1:  # too big even before rounding
        raise Bad("decimal overflow")
    rounded = number.quantize(decimal.Decimal(1).scaleb(-scale, _DECIMALS), context=_DECIMALS)
    if len(rounded.as_tuple().digits) > precision and rounded:
        raise Bad("decimal overflow")
    return rounded


def _binary(v: Any) -> bytes:
    """Jackson's base64: groups of four, padded; white space (any char up to U+0020) between groups."""
    if type(v) is not str:
        return _bad(v)
    out, i, n = bytearray(), 0, len(v)
    while True:
        while i < n and v[i] <= " ":
            i += 1
        if i >= n:
            return bytes(out)
        quad = v[i:i + 4]
        if not _BASE64.fullmatch(quad):
            raise Bad("not base64")
        try:
            out += base64.b64decode(quad, validate=True)
        except binascii.Error:
            raise Bad("not base64") from None
        i += 4


def _map(v: Any, value_of: Converter) -> list[tuple[str, Any]]:
    if type(v) is not _Object:
        return _bad(v)
    # Deliberate: a repeated key keeps its last value (Spark would keep both entries).
    entries: dict[str, Any] = {}
    for key, member in v:
        entries[key] = value_of(member)
    return list(entries.items())


def _string(v: Any) -> str | None:
    if v is None:
        return None
    if type(v) is str:
        return _java_utf8(v)
    return _java_utf8(render(v))


def _java_utf8(text: str) -> str:
    """Java writes an unpaired surrogate to UTF-8 as '?'."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_NEEDS_ESCAPE = re.compile('["\\\\\x00-\x1f\ud800-\udfff\U00010000-\U0010ffff]')


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if char in _ESCAPES:
        return _ESCAPES[char]
    code = ord(char)
    if code > 0xFFFF:  # Jackson writes a character past the BMP as its escaped surrogate pair
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04X}\\u{0xDC00 + (code & 0x3FF):04X}"
    return f"\\u{code:04X}"


def render(v: Any) -> str:
    """A parsed value as the compact JSON Jackson writes when Spark reads it as a STRING."""
    kind = type(v)
    if v is None:
        return "null"
    if kind is bool:
        return "true" if v else "false"
    if kind is int:
        return str(v)
    if kind is FloatText:
        return java_double(float(v))
    if kind is str:
        return '"' + _NEEDS_ESCAPE.sub(_escape, v) + '"'
    if kind is _Object:
        return "{" + ",".join(render(k) + ":" + render(member) for k, member in v) + "}"
    return "[" + ",".join(render(e) for e in v) + "]"


def render_scalar(v: float | bool) -> str:
    """A number or boolean msgspec decoded, as ``render`` writes its JSON literal."""
    if type(v) is float:
        return java_double(v)
    return render(v)


def java_double(x: float) -> str:
    """A double as Java 19 and later print it (``Double.toString``, which Jackson writes doubles with): the
    shortest decimal that reads back as ``x``, at least two digits, the closer pair when one digit would
    do; non-finite values quoted as Jackson does. Java 17 prints a few doubles with a digit more (1e23
    as 9.999999999999999E22): a deliberate difference, so the column does not depend on the JVM."""
    if math.isnan(x):
        return '"NaN"'
    if math.isinf(x):
        return '"Infinity"' if x > 0 else '"-Infinity"'
    if x == 0:
        return "-0.0" if math.copysign(1, x) < 0 else "0.0"
    sign = "-" if x < 0 else ""
    x = abs(x)
    shortest = decimal.Decimal(repr(x)).normalize()
    digits, exponent = shortest.as_tuple().digits, shortest.adjusted()
    if len(digits) == 1:  # Java prints at least two digits, the pair closest to x
        two = f"{x:.1e}"
        if float(two) == x:
            mantissa, exp = two.split("e")
            digits, exponent = tuple(int(c) for c in mantissa.replace(".", "")), int(exp)
    text = "".join(map(str, digits)).rstrip("0") or "0"
    if 1e-3 <= x < 1e7:
        if exponent >= 0:
            whole = text[:exponent + 1].ljust(exponent + 1, "0")
            fraction = text[exponent + 1:] or "0"
        else:
            whole, fraction = "0", "0" * (-exponent - 1) + text
        return f"{sign}{whole}.{fraction}"
    return f"{sign}{text[0]}.{text[1:] or '0'}E{exponent}"
