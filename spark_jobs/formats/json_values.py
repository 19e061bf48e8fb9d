"""json values decoded on Arrow in an executor: the columns of the pipeline's DDL schema, and per
record whether it goes to quarantine and why, as Spark's ``from_json`` (PERMISSIVE) decides it.

``JsonValues(schema, time_zone).decode(values)`` takes a batch of Kafka values (binary) and gives the
schema's columns (Arrow, as ``to_arrow_schema`` types them; null in quarantined records) and the
reasons (``"value is null"`` for a tombstone, ``"value is not JSON of the pipeline's schema"``
where Spark's parser sets the corrupt-record column; null for a record that decoded).

Two paths give the same answer (``tests/formats/test_json_conformance.py`` holds both to Spark):

- fast: msgspec decodes each value into a typed struct of the schema, checking in C what Spark
  checks: integers in their range, floats, booleans, strings, and arrays, maps and structs of them;
  dates, timestamps and binary as text (or epoch seconds), which Arrow checks a column at a time for
  their plain forms (ISO 8601 as Spark and Arrow read it alike, unbroken base64) and then reads;
  decimals and columns with dates, decimals or binary nested inside are kept as raw JSON and read by
  ``json_rules``;
- exact: a record the fast path refuses, or cannot judge alone (one long enough to nest past
  Jackson's depth limit or hold a number past its digit limit; date, timestamp or binary text not in
  its plain form; a record where a raw JSON, date, timestamp or binary column's key may appear twice,
  which could hide an earlier bad value: its quoted name more than once anywhere, or a key with
  escapes that spells it), is parsed again by
  ``json_rules``, which follows Spark's rules for every case (a number where a string belongs,
  ``NaN``, ``"+INF"``, a timestamp in another zone or form, invalid UTF-8, text after the object …).

On the bench's orders (``bench/json_decode.py``) one core decodes about 475,000 records/s, 3.8 times
``from_json`` inside Spark's JVM on one core (2026-11-29).

Deliberate differences from Spark (docs/formats.md): single-quoted JSON and the number tokens
``+INF``, ``-INF`` and ``+Infinity``, which Jackson accepts and no JSON parser does, are
quarantined; a TINYINT of 128 to 255 is quarantined (Jackson wraps it to a negative byte); a map
with a repeated key keeps the last value (Spark keeps both entries); a number in a STRING column
is printed as Java 19 and later print a double (``json_rules.java_double``); and the two in
``spark_datetime``.
"""

from __future__ import annotations

import base64
import json
import operator
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, TypedDict, cast

import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from spark_jobs.formats import json_rules, spark_datetime

if TYPE_CHECKING:
    from pyspark.sql.types import DataType, StructType

NULL_VALUE = "value is null"
NOT_SCHEMA = "value is not JSON of the pipeline's schema"

# Text that Spark and Arrow read alike (Arrow checks a column's text for it; ``JsonValues._check_texts``).
_TIME = r"[0-9]{4}-[0-9]{2}-[0-9]{2}[T ](?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]{1,6})?"
_OFFSET = r"(?:Z|[+-](?:0[0-9]|1[0-7]):[0-5][0-9]|[+-]18:00)"
_PLAIN = {  # RE2's syntax, as Arrow's ``match_substring_regex`` runs it: ``$`` is the end of the text
    "date": r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$",
    "ntz": rf"^{_TIME}$",
    "timestamp": rf"^{_TIME}{_OFFSET}$",
    "binary": r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$",
}
_UTC_TIMESTAMP = rf"^{_TIME}{_OFFSET}?$"  # where the session's zone is UTC: a local time too
_ZONED = f"{_OFFSET}$"
# Epoch seconds whose microseconds fit a 64-bit integer.
_EPOCH_SECONDS = Annotated[int, msgspec.Meta(ge=-(2**63) // 1_000_000 + 1, le=(2**63 - 1) // 1_000_000)]
# Each string of a JSON text in turn, and a colon after it if it is a key (possessive: linear time).
_STRING = re.compile(rb'("(?:[^"\\]++|\\.)*+")[ \t\n\r]*+(:?)')
_LONG_NUMBER = re.compile(rb"[0-9]{300}")  # any number of more than 1000 digits has a run this long
_SLICE = 1_000  # values decoded in one call: a value msgspec refuses costs its slice a second pass


class _Plan:
    """What the fast path needs for one schema, built once per process (msgspec types don't pickle)."""

    def __init__(self, schema: StructType, zone: spark_datetime.Zone) -> None:
        from pyspark.sql import types as T

        self.T = T
        self.zone = zone
        self.exact = json_rules.struct_converter(schema, zone)
        self.columns: list[tuple[str, str, Callable[[Any], Any] | None]] = []  # name, kind, per-value reader
        raw_names: list[str] = []  # columns kept as raw JSON, whose earlier values msgspec does not check
        fields = []
        for i, f in enumerate(schema.fields):
            kind, msgspec_type, reader = self._column(f.dataType)
            self.columns.append((f.name, kind, reader))
            if kind == "void":
                continue
            if kind == "raw":
                raw_names.append(f.name)
            fields.append((f"f{i}", msgspec_type, msgspec.Raw(b"null") if kind == "raw" else None))
        record = msgspec.defstruct("Record", fields, rename={f"f{i}": f.name for i, f in enumerate(schema.fields)},
                                   gc=False)
        self.empty = record()
        self.decoder = msgspec.json.Decoder(record)
        self.getters = {f.name: operator.attrgetter(f"f{i}") for i, f in enumerate(schema.fields)}
        self.raw_names = frozenset(raw_names)
        self.quoted = [json.dumps(name, ensure_ascii=False).encode() for name in raw_names]
        # Date, timestamp and binary text: msgspec takes any string, and Arrow checks the column's text
        # against the form both read alike (RE2, many times faster than msgspec's per-value ``re``).
        self.texts = [(name, _UTC_TIMESTAMP if kind == "timestamp" and zone.offset_s == 0 else _PLAIN[kind])
                      for name, kind, _ in self.columns if kind in _PLAIN]
        self.text_names = frozenset(name for name, _ in self.texts)
        self.text_keys = [json.dumps(name, ensure_ascii=False).encode() for name, _ in self.texts]

    def text_key_twice(self, payload: bytes) -> bool:
        """Whether a date, timestamp or binary column's key may appear twice in this record (its quoted
        name more than once anywhere, or a key with escapes that spells it): msgspec gave the last
        value, whose text the column check sees, but Spark refuses the record if an earlier one is not
        of the column's type."""
        return _key_may_repeat(payload, self.text_keys, self.text_names)

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

    def _column(self, data_type: DataType) -> tuple[str, Any, Callable[[Any], Any] | None]:
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
        convert = json_rules.converter(data_type, self.zone)
        return "raw", msgspec.Raw, lambda raw: convert(json_rules.parse_fragment(raw))

    def _native(self, data_type: DataType) -> Any:
        """The msgspec type that checks a value exactly as Spark would, or None where there is none."""
        T = self.T
        if type(data_type) in json_rules.INT_RANGES:
            low, high = json_rules.INT_RANGES[type(data_type)]
            return Annotated[int, msgspec.Meta(ge=low, le=high)] | None
        simple = {T.FloatType: float, T.DoubleType: float, T.BooleanType: bool, T.StringType: str}.get(type(data_type))
        if simple is not None:
            return simple | None
        if isinstance(data_type, T.ArrayType):
            element = self._native(data_type.elementType)
            return None if element is None else list[element] | None  # type: ignore[valid-type]  # a type built at run time
        if isinstance(data_type, T.MapType):
            value = self._native(data_type.valueType)
            return None if value is None else dict[str, value] | None  # type: ignore[valid-type]  # a type built at run time
        if isinstance(data_type, T.StructType):
            members = {}
            for f in data_type.fields:
                if isinstance(f.dataType, T.NullType):
                    continue
                member = self._native(f.dataType)
                if member is None:
                    return None
                members[f.name] = member
            return TypedDict("Member", members, total=False) | None  # type: ignore[operator]  # a TypedDict built at run time
        return None


class JsonValues:
    """Decodes json values into the columns of a DDL schema; pickles small (schema and zone only)."""

    def __init__(self, schema: StructType, time_zone: str) -> None:
        from pyspark.sql.pandas.types import to_arrow_schema

        json_rules.check_supported(schema)
        self.schema = schema
        self.time_zone = time_zone
        self.arrow_schema: pa.Schema = to_arrow_schema(schema, timezone="UTC")
        spark_datetime.session_zone(time_zone)  # fails here, on the driver, for a zone Spark would refuse
        self._plan: _Plan | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_plan": None}

    @property
    def plan(self) -> _Plan:
        if self._plan is None:
            self._plan = _Plan(self.schema, spark_datetime.session_zone(self.time_zone))
        return self._plan

    def decode(self, values: pa.Array) -> tuple[pa.Table, pa.Array]:
        """The schema's columns for ``values`` (binary), and per record the quarantine reason or null."""
        plan = self.plan
        n = len(values)
        payloads: list[bytes | None] = values.to_pylist()
        reasons: list[str | None] = [None if v is not None else NULL_VALUE for v in payloads]
        rows: list[Any] = [plan.empty] * n
        slow: dict[int, dict[str, Any]] = {}
        decode, needs_exact = plan.decoder.decode, plan.needs_exact
        quoted, long = bool(plan.quoted), json_rules.MAX_DEPTH
        # Values that need no record-by-record look (no tombstone, no raw JSON column, none long) are
        # decoded a slice at a time in one call; a slice with a value msgspec refuses is gone through again.
        at_once = not quoted and values.null_count == 0 and (n == 0 or pc.max(pc.binary_length(values)).as_py() < long)
        for start in range(0, n, _SLICE):
            end = min(n, start + _SLICE)
            if at_once:
                try:
                    rows[start:end] = list(map(decode, cast("list[bytes]", payloads[start:end])))  # no None: at_once
                    continue
                except Exception:  # noqa: BLE001, S110 - whatever msgspec refuses, the exact path judges
                    pass
            for i in range(start, end):
                payload = payloads[i]
                if payload is None:
                    continue
                if not ((quoted or len(payload) >= long) and needs_exact(payload)):
                    try:
                        rows[i] = decode(payload)
                        continue
                    except Exception:  # noqa: BLE001, S110 - whatever msgspec refuses, the exact path judges
                        pass
                _exactly(plan, i, payload, reasons, slow)
        texts = self._check_texts(payloads, rows, reasons, slow) if plan.texts else {}
        columns: dict[str, list[Any] | pa.Array] = {}
        for name, kind, reader in plan.columns:
            if kind == "void":
                continue
            column: list[Any] | pa.Array = texts[name][0] if name in texts else list(map(plan.getters[name], rows))
            if kind == "string":
                if len(set(map(type, column)) - {str, type(None)}) > 0:
                    column = [v if v is None or type(v) is str else json_rules.render_scalar(v) for v in column]
            elif kind != "native":
                assert isinstance(column, list)
                column = self._read(kind, column, reasons, slow, reader, texts[name][1] if name in texts else None)
            if slow:
                if not isinstance(column, list):  # as days or microseconds, as the exact path gives them
                    column = column.cast(pa.int32() if kind == "date" else pa.int64()).to_pylist()
                for i, row in slow.items():
                    column[i] = row.get(name)
            columns[name] = column
        return self._table(n, columns, reasons), pa.array(reasons, pa.string())

    def _check_texts(self, payloads: list[bytes | None], rows: list[Any], reasons: list[str | None],
                     slow: dict[int, dict[str, Any]]) -> dict[str, tuple[list[Any], pa.Array]]:
        """The fast path's date, timestamp and binary text checked a column at a time (Arrow's RE2) for
        the forms Spark and Arrow read alike, as msgspec would check each value. A record holding other
        text, or that may hold such a key twice (msgspec checks only that the earlier values are
        strings), is read again by the exact path. Gives each column's values and their text, to be
        read without being taken again (nothing if the exact path took a record: its row changed)."""
        plan = self.plan
        again: set[int] = set()
        texts: dict[str, tuple[list[Any], pa.Array]] = {}
        for name, pattern in plan.texts:
            values = list(map(plan.getters[name], rows))
            try:
                strings = pa.array(values, pa.string())
            except (pa.ArrowInvalid, pa.ArrowTypeError):  # epoch seconds among a timestamp's strings
                strings = pa.array([v if type(v) is str else None for v in values], pa.string())
            texts[name] = values, strings
            plain = pc.match_substring_regex(strings, pattern)
            if plain.false_count:
                again.update(pc.indices_nonzero(pc.invert(plain.fill_null(True))).to_pylist())
        if not _each_key_once(payloads, plan.text_keys, [values for values, _ in texts.values()]):
            again.update(i for i, payload in enumerate(payloads) if payload is not None and reasons[i] is None
                         and i not in slow and plan.text_key_twice(payload))
        for i in sorted(again):
            if reasons[i] is None and i not in slow:
                rows[i] = plan.empty
                _exactly(plan, i, cast("bytes", payloads[i]), reasons, slow)
        return {} if again else texts

    def _table(self, n: int, columns: dict[str, list[Any] | pa.Array], reasons: list[str | None]) -> pa.Table:
        """The columns as the schema's Arrow table, null in every quarantined record."""
        bad = [] if reasons.count(None) == n else [i for i, r in enumerate(reasons) if r is not None]
        good = pa.array([r is None for r in reasons], pa.bool_()) if bad else None
        arrays = []
        for field in self.arrow_schema:
            column = columns.get(field.name)
            if column is None:  # VOID
                arrays.append(pa.nulls(n, field.type))
            elif isinstance(column, list):
                for i in bad:
                    column[i] = None
                arrays.append(pa.array(column, field.type))
            else:
                arrays.append((column if good is None else pc.if_else(good, column, None)).cast(field.type))
        return pa.Table.from_arrays(arrays, schema=self.arrow_schema)

    def _read(self, kind: str, column: list[Any], reasons: list[str | None], slow: dict[int, dict[str, Any]],
              reader: Callable[[Any], Any] | None, strings: pa.Array | None) -> list[Any] | pa.Array:
        """One column of the fast path as values: raw JSON by the exact rules, value by value (a value
        Spark would not read marks its record bad); plain text by Arrow, vectorised (``strings``: the
        column's text, if ``_check_texts`` made it)."""
        if kind == "binary":
            return [None if v is None else base64.b64decode(v) for v in column]
        if kind != "raw":
            try:
                return self._read_plain(kind, column, strings)
            except pa.ArrowInvalid:  # an impossible date among them: each value by the exact rules
                pass
        assert reader is not None
        for i, value in enumerate(column):
            if reasons[i] is None and i not in slow and value is not None:
                try:
                    column[i] = reader(value)
                except json_rules.Bad:
                    reasons[i] = NOT_SCHEMA
        return column

    def _read_plain(self, kind: str, column: list[Any], strings: pa.Array | None) -> list[Any] | pa.Array:
        """Dates and timestamps in plain ISO 8601 (or epoch seconds), read by Arrow."""
        epochs = [i for i, v in enumerate(column) if type(v) is int] if kind == "timestamp" and int in set(map(type, column)) else []
        seconds = {i: column[i] for i in epochs}
        if strings is None:
            strings = pa.array([None if type(v) is int else v for v in column] if epochs else column, pa.string())
        if kind == "date":
            read = pc.cast(strings, pa.date32())
        elif kind == "ntz":
            read = pc.cast(strings, pa.timestamp("us"))
        elif (zoned_only := _zoned(strings)) is not None:
            read = zoned_only
        else:
            zoned = pc.match_substring_regex(strings, _ZONED).fill_null(False)
            utc = pc.cast(pc.if_else(zoned, strings, None), pa.timestamp("us", "UTC")).cast(pa.int64())
            local = pc.cast(pc.if_else(zoned, None, strings), pa.timestamp("us")).cast(pa.int64())
            read = pc.if_else(zoned, utc, local).cast(pa.timestamp("us", "UTC"))
        if not epochs:
            return read
        values = read.cast(pa.int64()).to_pylist()
        for i, s in seconds.items():
            values[i] = s * 1_000_000
        return values


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


def _each_key_once(payloads: list[bytes | None], keys: list[bytes], columns: list[list[Any]]) -> bool:
    """Whether no record can hold one of ``keys`` (quoted names) twice or hold it with a null value,
    told by one search of the batch's bytes, a slice at a time: with no escapes a record can spell a
    key only as written, so a key occurs as often as the records holding a non-null value for it
    only if each of those holds it once and no other record holds it."""
    counts = [0] * len(keys)
    for start in range(0, len(payloads), _SLICE):
        joined = b"".join(filter(None, payloads[start:start + _SLICE]))
        if b"\\" in joined:
            return False
        for k, key in enumerate(keys):
            counts[k] += joined.count(key)
    return all(count == len(column) - column.count(None) for count, column in zip(counts, columns, strict=True))


def _exactly(plan: _Plan, i: int, payload: bytes, reasons: list[str | None], slow: dict[int, dict[str, Any]]) -> None:
    """Record ``i`` read by the exact path: its columns into ``slow``, or its reason if Spark refuses it."""
    try:
        slow[i] = plan.exact(json_rules.parse(payload)) or {}  # never None: parse gives an object
    except json_rules.Bad:
        reasons[i] = NOT_SCHEMA


def _zoned(strings: pa.Array) -> pa.Array | None:
    """Timestamps that all carry a zone offset (as most producers write them), read by Arrow in one
    cast; None if any lacks one (a local time of the session's zone: Arrow refuses it here)."""
    try:
        return pc.cast(strings, pa.timestamp("us", "UTC"))
    except pa.ArrowInvalid:
        return None
