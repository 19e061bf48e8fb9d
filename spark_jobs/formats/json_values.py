"""json values decoded on Arrow in an executor: the columns of the pipeline's DDL schema, and per
record whether it goes to quarantine and why, as Spark's ``from_json`` (PERMISSIVE) decides today.

``JsonValues(schema, time_zone).decode(values)`` takes a batch of Kafka values (binary) and gives the
schema's columns (Arrow, as ``to_arrow_schema`` types them; null in quarantined records) and the
reasons (``"value is null"`` for a tombstone, ``"value is not JSON of the pipeline's schema"``
where Spark's parser sets the corrupt-record column; null for a record that decoded).

Two paths give the same answer (``tests/formats/test_json_conformance.py`` holds both to Spark):

- fast: msgspec decodes each value into a typed struct of the schema (integers in their range,
  floats, booleans, strings, arrays, maps and structs of them checked in C; dates and timestamps
  taken as text and read by Arrow when they are plain ISO 8601, by ``spark_datetime`` otherwise;
  decimals, binary and nested dates kept as raw JSON and read by ``json_rules``);
- exact: a record the fast path refuses, or that it cannot judge alone (a number of hundreds of
  digits, nesting near Jackson's limit, a key spelled twice or with escapes where a date, decimal
  or binary column could hide a bad earlier value), is parsed again by ``json_rules``, which
  follows Spark's rules for every case (a number where a string belongs, ``NaN``, ``"+INF"``,
  invalid UTF-8, trailing text after the object …).

Deliberate differences from Spark (docs/formats.md): single-quoted JSON and the number tokens
``+INF``, ``-INF`` and ``+Infinity``, which Jackson accepts and no JSON parser does, are
quarantined; a TINYINT of 128 to 255 is quarantined (Jackson wraps it to a negative byte); a map
with a repeated key keeps the last value (Spark keeps both entries); and the two in
``spark_datetime``.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, TypedDict

import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from spark_jobs.formats import json_rules, spark_datetime

if TYPE_CHECKING:
    from pyspark.sql.types import DataType, StructType

NULL_VALUE = "value is null"
NOT_SCHEMA = "value is not JSON of the pipeline's schema"

_TIMESTAMP = r"\d{4}-\d\d-\d\d[T ]([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d{1,6})?"
_ZONED = f"^{_TIMESTAMP}(Z|[+-](0\\d|1[0-7]):[0-5]\\d|[+-]18:00)$"
_LOCAL = f"^{_TIMESTAMP}$"
_DATE = r"^\d{4}-\d\d-\d\d$"
# A quoted key holding a backslash: it may spell a column's name another way.
_ESCAPED_KEY = r'"(?:[^"\\]|\\.)*\\(?:[^"\\]|\\.)*"[ \t\n\r]*:'
_LONG_NUMBER = "[0-9]{300}"  # any number of more than 1000 digits has a run this long


class _Plan:
    """What the fast path needs for one schema, built once per process (msgspec types don't pickle)."""

    def __init__(self, schema: StructType, zone: spark_datetime.Zone) -> None:
        from pyspark.sql import types as T

        self.T = T
        self.zone = zone
        self.exact = json_rules.struct_converter(schema, zone)
        self.columns: list[tuple[str, str, Callable[[Any], Any] | None]] = []  # name, kind, per-value reader
        self.checked_names: list[str] = []  # columns whose earlier values msgspec would not check
        fields = []
        for i, f in enumerate(schema.fields):
            kind, msgspec_type, reader = self._column(f.dataType)
            self.columns.append((f.name, kind, reader))
            if kind == "void":
                continue
            if kind != "native":
                self.checked_names.append(f.name)
            fields.append((f"f{i}", msgspec_type, msgspec.Raw(b"null") if msgspec_type is msgspec.Raw else None))
        record = msgspec.defstruct("Record", fields, rename={f"f{i}": f.name for i, f in enumerate(schema.fields)},
                                   gc=False)
        self.empty = record()
        self.decoder = msgspec.json.Decoder(record)
        self.getters = {f.name: operator.attrgetter(f"f{i}") for i, f in enumerate(schema.fields)}

    def _column(self, data_type: DataType) -> tuple[str, Any, Callable[[Any], Any] | None]:
        T = self.T
        if isinstance(data_type, T.NullType):
            return "void", None, None
        native = self._native(data_type)
        if native is not None:
            return "native", native, None
        if isinstance(data_type, T.TimestampType):
            return "timestamp", str | int | None, json_rules.converter(data_type, self.zone)
        if isinstance(data_type, (T.DateType, T.TimestampNTZType, T.BinaryType)):
            kind = {T.DateType: "date", T.TimestampNTZType: "ntz", T.BinaryType: "binary"}[type(data_type)]
            return kind, str | None, json_rules.converter(data_type, self.zone)
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
            return None if element is None else list[element] | None  # type: ignore[valid-type]
        if isinstance(data_type, T.MapType):
            value = self._native(data_type.valueType)
            return None if value is None else dict[str, value] | None  # type: ignore[valid-type]
        if isinstance(data_type, T.StructType):
            members = {}
            for f in data_type.fields:
                if isinstance(f.dataType, T.NullType):
                    continue
                member = self._native(f.dataType)
                if member is None:
                    return None
                members[f.name] = member
            return TypedDict("Member", members, total=False) | None  # type: ignore[operator]
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
        exact = self._needs_exact(values)
        rows: list[Any] = [plan.empty] * n
        slow: dict[int, dict[str, Any]] = {}
        decode = plan.decoder.decode
        for i, payload in enumerate(payloads):
            if payload is None:
                continue
            if not exact[i]:
                try:
                    rows[i] = decode(payload)
                    continue
                except Exception:  # noqa: BLE001 - whatever msgspec refuses, the exact path judges
                    pass
            try:
                slow[i] = plan.exact(json_rules.parse(payload)) or {}  # never None: parse gives an object
            except json_rules.Bad:
                reasons[i] = NOT_SCHEMA
        columns: dict[str, list[Any]] = {}
        for name, kind, reader in plan.columns:
            if kind == "void":
                continue
            column = list(map(plan.getters[name], rows))
            if kind != "native":
                assert reader is not None
                self._read(kind, reader, column, reasons, slow)
            for i, row in slow.items():
                column[i] = row.get(name)
            columns[name] = column
        bad = [i for i, r in enumerate(reasons) if r is not None]
        arrays = []
        for field in self.arrow_schema:
            if field.name not in columns:  # VOID
                arrays.append(pa.nulls(n, field.type))
                continue
            column = columns[field.name]
            for i in bad:
                column[i] = None
            arrays.append(pa.array(column, field.type))
        return pa.Table.from_arrays(arrays, schema=self.arrow_schema), pa.array(reasons, pa.string())

    def _needs_exact(self, values: pa.Array) -> list[bool]:
        """Records the fast path cannot judge alone, found with Arrow's string kernels over the batch;
        the costlier checks look only at the values that can need them (long ones, ones with a backslash)."""
        exact = pa.array([False] * len(values))
        if self.plan.checked_names:
            for name in self.plan.checked_names:
                quoted = json.dumps(name, ensure_ascii=False)
                exact = pc.or_(exact, pc.greater(pc.count_substring(values, quoted), 1))
            exact = _or_where(exact, values, pc.match_substring(values, "\\"),
                              lambda some: pc.match_substring_regex(some, _ESCAPED_KEY))
        exact = _or_where(exact, values, pc.greater_equal(pc.binary_length(values), json_rules.MAX_DEPTH), _deep_or_long)
        return [bool(flag) for flag in exact.fill_null(False).to_pylist()]

    def _read(self, kind: str, reader: Callable[[Any], Any], column: list[Any], reasons: list[str | None],
              slow: dict[int, dict[str, Any]]) -> None:
        """Turns the fast path's text (or raw JSON) of one column into values, in place; a value
        Spark would not read marks its record bad."""
        todo = [i for i, v in enumerate(column) if v is not None and reasons[i] is None and i not in slow]
        if kind in ("timestamp", "date", "ntz"):
            todo = self._read_iso(kind, column, todo)
        for i in todo:
            try:
                column[i] = reader(column[i])
            except json_rules.Bad:
                column[i] = None
                reasons[i] = NOT_SCHEMA

    def _read_iso(self, kind: str, column: list[Any], todo: list[int]) -> list[int]:
        """Plain ISO 8601 text read by Arrow, vectorised; returns the rows left for the exact rules."""
        texts = [i for i in todo if type(column[i]) is str]
        if not texts:
            return todo
        strings = pa.array([column[i] for i in texts], pa.string())
        if kind == "date":
            plain, target = pc.match_substring_regex(strings, _DATE), pa.date32()
        elif kind == "ntz" or self.plan.zone.offset_s == 0:
            plain, target = pc.match_substring_regex(strings, _LOCAL), pa.timestamp("us")
        else:
            plain, target = pc.match_substring_regex(strings, "$^"), pa.timestamp("us")
        if kind == "timestamp":
            zoned = pc.match_substring_regex(strings, _ZONED)
        try:
            read = pc.if_else(plain, pc.cast(pc.if_else(plain, strings, None), target), None)
            if kind == "timestamp":
                utc = pc.cast(pc.if_else(zoned, strings, None), pa.timestamp("us", "UTC"))
                read = pc.if_else(zoned, pc.cast(utc, pa.int64()), pc.cast(read, pa.int64()))
                plain = pc.or_(plain, zoned)
            else:
                read = pc.cast(read, pa.int32() if kind == "date" else pa.int64())
        except pa.ArrowInvalid:  # an impossible date among them: every value by the exact rules
            return todo
        done = set()
        for i, ok, value in zip(texts, plain.to_pylist(), read.to_pylist()):
            if ok:
                column[i] = value
                done.add(i)
        return [i for i in todo if i not in done]


def _deep_or_long(values: pa.Array) -> pa.Array:
    """Nested near Jackson's depth limit, or holding a number near its digit limit."""
    depth = pc.add(pc.count_substring(values, "["), pc.count_substring(values, "{"))
    long = pc.and_(pc.greater(pc.binary_length(values), json_rules.MAX_DIGITS), pc.match_substring_regex(values, _LONG_NUMBER))
    return pc.or_(pc.greater_equal(depth, json_rules.MAX_DEPTH), long)


def _or_where(flags: pa.Array, values: pa.Array, candidates: pa.Array, check: Callable[[pa.Array], pa.Array]) -> pa.Array:
    """``flags`` or, for the ``candidates`` only, ``check`` of their values."""
    where = pc.indices_nonzero(candidates.fill_null(False))
    if len(where) == 0:
        return flags
    found = check(values.take(where)).fill_null(False).to_pylist()
    marked = flags.to_pylist()
    for i, hit in zip(where.to_pylist(), found):
        marked[i] = marked[i] or hit
    return pa.array(marked, pa.bool_())
