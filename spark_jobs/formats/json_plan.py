"""What json values' fast path (``json_values``) needs for one schema, built once per process: the
msgspec types each value is decoded into, the leaves read a batch at a time rather than value by value
(dates, timestamps, binary and decimals, at the top level or inside structs and arrays), and the checks
that send a record to the exact path (``json_rules``): a key that may appear twice, a number or a
nesting past Jackson's limits.
"""

from __future__ import annotations

import decimal
import json
import operator
import re
from typing import TYPE_CHECKING, Annotated, Any, TypedDict, cast

import msgspec
import pyarrow as pa

from spark_jobs.formats import json_rules, spark_datetime

if TYPE_CHECKING:
    from pyspark.sql.types import DataType, StructType

_TIME = r"[0-9]{4}-[0-9]{2}-[0-9]{2}[T ](?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]{1,6})?"
_OFFSET = r"(?:Z|[+-](?:0[0-9]|1[0-7]):[0-5][0-9]|[+-]18:00)"
_PLAIN = {  # RE2's syntax, as Arrow's ``match_substring_regex`` runs it: ``$`` is the end of the text
    "date": r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$",
    "ntz": rf"^{_TIME}$",
    "timestamp": rf"^{_TIME}{_OFFSET}$",
    "binary": r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$",
}
_UTC_TIMESTAMP = rf"^{_TIME}{_OFFSET}?$"  # where the session's zone is UTC: a local time too
ZONED = f"{_OFFSET}$"
# Epoch seconds whose microseconds fit a 64-bit integer.
_EPOCH_SECONDS = Annotated[int, msgspec.Meta(ge=-(2**63) // 1_000_000 + 1, le=(2**63 - 1) // 1_000_000)]
# Each string of a JSON text in turn, and a colon after it if it is a key (possessive: linear time).
_STRING = re.compile(rb'("(?:[^"\\]++|\\.)*+")[ \t\n\r]*+(:?)')
_LONG_NUMBER = re.compile(rb"[0-9]{300}")  # any number of more than 1000 digits has a run this long
# Where a leaf was found: its container (a dict or list msgspec made), its key or index there, its
# value as msgspec took it, its record.
Found = tuple[Any, Any, Any, int]


class Leaf:
    """A date, timestamp, binary or decimal type as a DECIMAL column or inside a struct or array:
    msgspec takes its values loosely (a string; a decimal as any JSON value, its float literals as
    their text) and they are read together, the plain ones fast (dates and times by Arrow, a decimal
    with no more digits than its type holds by ``decimal``) and any other by ``json_rules``."""

    def __init__(self, kind: str, data_type: DataType, zone: spark_datetime.Zone) -> None:
        self.kind = kind
        self.reader = json_rules.converter(data_type, zone)
        self.msgspec_type: Any = Any if kind == "decimal" else (
            str | _EPOCH_SECONDS | None if kind == "timestamp" else str | None)
        self.pattern = "" if kind == "decimal" else (
            _UTC_TIMESTAMP if kind == "timestamp" and zone.offset_s == 0 else _PLAIN[kind])
        if kind == "decimal":  # digits that need no rounding and fit: Spark reads them as they are
            precision, scale = data_type.precision, data_type.scale  # type: ignore[attr-defined]  # a DecimalType here
            whole = precision - scale
            digits = "0" if whole == 0 else f"(?:0|[1-9][0-9]{{0,{whole - 1}}})"
            plain = rf"-?{digits}(?:\.[0-9]{{1,{scale}}})?" if scale else f"-?{digits}"
            self.decimal_pattern = f"^{plain}$"  # the same, in RE2 for Arrow
            self.arrow_type = pa.decimal128(precision, scale)
            self._plain_decimal = re.compile(plain).fullmatch
            self._limit = 10**whole

    def decimal(self, value: Any) -> Any:
        """A decimal as Spark reads it (an int or ``Decimal``, which Arrow scales exactly); ``json_rules.Bad``
        if Spark would not."""
        kind = type(value)
        if kind is int:
            if -self._limit < value < self._limit:
                return value
        elif (kind is str or kind is json_rules.FloatText) and self._plain_decimal(value) is not None:
            return decimal.Decimal(value)
        return self.reader(value)


class SchemaPlan:
    """What the fast path needs for one schema, built once per process (msgspec types don't pickle)."""

    def __init__(self, schema: StructType, zone: spark_datetime.Zone) -> None:
        from pyspark.sql import types as T

        self.T = T
        self.zone = zone
        self.exact = json_rules.struct_converter(schema, zone)
        self.leaves: dict[str, Leaf] = {}  # by the type's simple string
        # name, kind, and what reads it: a per-value reader (raw JSON, dates, timestamps, binary), the
        # ``Leaf`` of a DECIMAL column, the type of a struct or array column with leaves inside
        self.columns: list[tuple[str, str, Any]] = []
        raw_names: list[str] = []  # columns kept as raw JSON, whose earlier values msgspec does not check
        fields = []
        for i, f in enumerate(schema.fields):
            kind, msgspec_type, reader = self._column(f.dataType)
            self.columns.append((f.name, kind, reader))
            if kind == "void":
                continue
            if kind == "raw":
                raw_names.append(f.name)
            # A raw JSON column missing from a record reads as JSON null, but a VARIANT's as NULL (its JSON
            # null is a VARIANT null): its empty default tells the two apart.
            default = (msgspec.Raw(b"") if isinstance(f.dataType, T.VariantType) else msgspec.Raw(b"null")) if kind == "raw" else None
            fields.append((f"f{i}", msgspec_type, default))
        record = msgspec.defstruct("Record", fields, rename={f"f{i}": f.name for i, f in enumerate(schema.fields)},
                                   gc=False)
        self.empty = record()
        self.decoder = msgspec.json.Decoder(record, float_hook=json_rules.FloatText)  # only decimals take Any
        self.getters = {f.name: operator.attrgetter(f"f{i}") for i, f in enumerate(schema.fields)}
        self.raw_names = frozenset(raw_names)
        self.quoted = [json.dumps(name, ensure_ascii=False).encode() for name in raw_names]
        # Date, timestamp and binary text: msgspec takes any string, and Arrow checks the column's text
        # against the form both read alike (RE2, many times faster than msgspec's per-value ``re``).
        self.texts = [(name, _UTC_TIMESTAMP if kind == "timestamp" and zone.offset_s == 0 else _PLAIN[kind])
                      for name, kind, _ in self.columns if kind in _PLAIN]
        self.decimals = [name for name, kind, _ in self.columns if kind == "decimal"]
        # a struct or array column, and whether its name is the key nearest its leaves
        self.nested = [(name, data_type, self._keyless(data_type)) for name, kind, data_type in self.columns
                       if kind == "nested"]
        # The keys whose values msgspec took loosely: a date, timestamp, binary or decimal column's, and
        # inside a struct or array column the key nearest each leaf (a struct's field, or the column),
        # counted in a batch; and for a record alone, every key on the way to a leaf.
        names = [name for name, _ in self.texts] + self.decimals
        on_the_way = list(names)
        for name, data_type, _ in self.nested:
            names += self._leaf_keys(data_type, name)
            on_the_way += [name, *self._path_keys(data_type)]
        self.checked_names = list(dict.fromkeys(names))
        self.checked_keys = [json.dumps(name, ensure_ascii=False).encode() for name in self.checked_names]
        self.path_names = frozenset(on_the_way)
        self.path_keys = [json.dumps(name, ensure_ascii=False).encode() for name in dict.fromkeys(on_the_way)]

    def checked_key_twice(self, payload: bytes) -> bool:
        """Whether a key on the way to a value msgspec took loosely may appear twice in this record (its
        quoted name more than once anywhere, or a key with escapes that spells it): msgspec gave the
        last value, which the checks see, but Spark refuses the record if an earlier one is not of its
        type."""
        return _key_may_repeat(payload, self.path_keys, self.path_names)

    def find_leaves(self, data_type: DataType, values: list[tuple[Any, int]], found: dict[str, list[Found]],
                    counts: dict[str, int]) -> None:
        """Puts in ``found``, by type, each leaf of ``values`` (of ``data_type``, a struct or array; each
        not null, with its record), and counts in ``counts`` the non-null values of each key nearest a
        leaf (for ``_each_key_once``). A level of the type at a time, for the batch's values together."""
        T = self.T
        if isinstance(data_type, T.ArrayType):
            element = data_type.elementType
            if self._leaf(element) is not None:
                found[element.simpleString()].extend(
                    [(array, j, x, i) for array, i in values for j, x in enumerate(array) if x is not None])
            else:
                self.find_leaves(element, [(x, i) for array, i in values for x in array if x is not None], found, counts)
            return
        for f in cast("StructType", data_type).fields:
            name = f.name
            if self._leaf(f.dataType) is not None:
                leaves = [(struct, name, x, i) for struct, i in values if (x := struct.get(name)) is not None]
                found[f.dataType.simpleString()].extend(leaves)
                counts[name] += len(leaves)
            elif self._has_leaves(f.dataType):
                members = [(x, i) for struct, i in values if (x := struct.get(name)) is not None]
                if self._keyless(f.dataType):
                    counts[name] += len(members)
                self.find_leaves(f.dataType, members, found, counts)

    def _leaf(self, data_type: DataType) -> Leaf | None:
        T = self.T
        kind = "decimal" if isinstance(data_type, T.DecimalType) else {
            T.TimestampType: "timestamp", T.DateType: "date", T.TimestampNTZType: "ntz",
            T.BinaryType: "binary"}.get(type(data_type))
        if kind is None:
            return None
        key = data_type.simpleString()
        if key not in self.leaves:
            self.leaves[key] = Leaf(kind, data_type, self.zone)
        return self.leaves[key]

    def _has_leaves(self, data_type: DataType) -> bool:
        T = self.T
        if self._leaf(data_type) is not None:
            return True
        if isinstance(data_type, T.ArrayType):
            return self._has_leaves(data_type.elementType)
        if isinstance(data_type, T.MapType):
            return self._has_leaves(data_type.valueType)
        if isinstance(data_type, T.StructType):
            return any(self._has_leaves(f.dataType) for f in data_type.fields)
        return False

    def _keyless(self, data_type: DataType) -> bool:
        """Whether the leaves of ``data_type`` have no key of their own (leaves, or arrays of them)."""
        if isinstance(data_type, self.T.ArrayType):
            return self._keyless(data_type.elementType)
        return self._leaf(data_type) is not None

    def _path_keys(self, data_type: DataType) -> list[str]:
        """The struct fields on the way from a value of ``data_type`` to its leaves."""
        if isinstance(data_type, self.T.ArrayType):
            return self._path_keys(data_type.elementType)
        if isinstance(data_type, self.T.StructType):
            return [key for f in data_type.fields if self._has_leaves(f.dataType)
                    for key in (f.name, *self._path_keys(f.dataType))]
        return []

    def _leaf_keys(self, data_type: DataType, name: str) -> list[str]:
        """The keys nearest the leaves of ``data_type``, a value of key ``name``."""
        if self._keyless(data_type):
            return [name]
        if isinstance(data_type, self.T.ArrayType):
            return self._leaf_keys(data_type.elementType, name)
        if isinstance(data_type, self.T.StructType):
            return [key for f in data_type.fields if self._has_leaves(f.dataType) for key in self._leaf_keys(f.dataType, f.name)]
        return []

    def needs_exact(self, payload: bytes) -> bool:
        """Whether the fast path cannot judge this record alone: a raw JSON column's key appears twice
        (or a key has escapes, which may spell it), or the record is long enough to nest past Jackson's
        depth limit or to hold a number past its digit limit."""
        if self.quoted and _key_may_repeat(payload, self.quoted, self.raw_names):
            return True
        if len(payload) < json_rules.MAX_DEPTH:
            return False
        return payload.count(b"[") + payload.count(b"{") >= json_rules.MAX_DEPTH or (
            len(payload) > json_rules.MAX_DIGITS and _LONG_NUMBER.search(payload) is not None)

    def _column(self, data_type: DataType) -> tuple[str, Any, Any]:
        T = self.T
        if isinstance(data_type, T.NullType):
            return "void", None, None
        if isinstance(data_type, T.StringType):  # a number or boolean there: its JSON text, as Jackson writes it
            return "string", str | int | float | bool | None, None
        native = self._native(data_type)
        if native is not None:
            return "native", native, None
        kind = {T.TimestampType: "timestamp", T.DateType: "date", T.TimestampNTZType: "ntz",
                T.BinaryType: "binary"}.get(type(data_type))
        if kind is not None:  # any string here; its text is checked a column at a time (``JsonValues._check_texts``)
            reader = json_rules.converter(data_type, self.zone)
            return kind, (str | _EPOCH_SECONDS | None) if kind == "timestamp" else str | None, reader
        if isinstance(data_type, T.DecimalType):
            return "decimal", Any, self._leaf(data_type)
        loose = self._native(data_type, loose=True)
        if loose is not None:  # a struct or array with leaves inside, read by ``JsonValues._read_leaves``
            return "nested", loose, data_type
        convert = json_rules.converter(data_type, self.zone)
        return "raw", msgspec.Raw, lambda raw: convert(json_rules.parse_fragment(raw)) if raw else None

    def _native(self, data_type: DataType, loose: bool = False) -> Any:
        """The msgspec type that checks a value exactly as Spark would, or None where there is none;
        ``loose``: with its leaves (dates, timestamps, binary, decimals) taken loosely, except in a map,
        whose repeated keys would hide an earlier value that ``_each_key_once`` cannot count."""
        T = self.T
        leaf = self._leaf(data_type) if loose else None
        if leaf is not None:
            return leaf.msgspec_type
        if type(data_type) in json_rules.INT_RANGES:
            low, high = json_rules.INT_RANGES[type(data_type)]
            return Annotated[int, msgspec.Meta(ge=low, le=high)] | None
        simple = {T.FloatType: float, T.DoubleType: float, T.BooleanType: bool, T.StringType: str}.get(type(data_type))
        if simple is not None:
            return simple | None
        if isinstance(data_type, T.ArrayType):
            element = self._native(data_type.elementType, loose)
            return None if element is None else list[element] | None  # type: ignore[valid-type]  # a type built at run time
        if isinstance(data_type, T.MapType):
            value = self._native(data_type.valueType)
            return None if value is None else dict[str, value] | None  # type: ignore[valid-type]  # a type built at run time
        if isinstance(data_type, T.StructType):
            members = {}
            for f in data_type.fields:
                if isinstance(f.dataType, T.NullType):
                    continue
                member = self._native(f.dataType, loose)
                if member is None:
                    return None
                members[f.name] = member
            return TypedDict("Member", members, total=False) | None  # type: ignore[operator]  # a TypedDict built at run time
        return None


def _key_may_repeat(payload: bytes, quoted: list[bytes], names: frozenset[str]) -> bool:
    """Whether one of ``names`` (``quoted``: as JSON writes them) may be a key twice in this JSON text:
    its quoted name occurs more than once anywhere, or a key written with escapes spells it."""
    return any(payload.count(key) > 1 for key in quoted) or (b"\\" in payload and _escaped_key_of(payload, names))


def _escaped_key_of(payload: bytes, names: frozenset[str]) -> bool:
    """Whether a key of this JSON text is written with escapes and spells one of ``names`` (at any
    depth: a nested key only sends its record to the exact path, which is never wrong)."""
    for text, colon in _STRING.findall(payload):
        if colon and b"\\" in text:
            try:
                if json.loads(text) in names:
                    return True
            except ValueError:  # not JSON: the exact path judges the record
                return True
    return False
