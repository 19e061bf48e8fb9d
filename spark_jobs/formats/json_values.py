"""json values decoded on Arrow in an executor: the columns of the pipeline's DDL schema, and per
record whether it goes to quarantine and why, as Spark's ``from_json`` (PERMISSIVE) decides it.

``JsonValues(schema, time_zone).decode(values)`` takes a batch of Kafka values (binary) and gives the
schema's columns (Arrow, as ``to_arrow_schema`` types them; null in quarantined records) and the
reasons (``"value is null"`` for a tombstone, ``"value is not JSON of the pipeline's schema"``
where Spark's parser sets the corrupt-record column; null for a record that decoded).

Two paths give the same answer (``tests/formats/test_json_conformance.py`` holds both to Spark; the
fast path's plan of a schema is ``json_plan``'s):

- fast: msgspec decodes each value into a typed struct of the schema, checking in C what Spark
  checks: integers in their range, floats, booleans, strings, and arrays, maps and structs of them;
  dates, timestamps and binary as text (or epoch seconds), as columns or inside structs and arrays,
  which Arrow checks a batch at a time for their plain forms (ISO 8601 as Spark and Arrow read it
  alike, unbroken base64) and then reads, any other text by ``json_rules``' rule for it; decimals as
  any JSON value (a number as its literal's text), read by Arrow where each is plain decimal text
  (a string or a number with no more digits than the type holds: nothing to round, nothing to
  overflow) and otherwise one at a time by ``json_rules``' rule; only a map with dates, timestamps,
  binary or decimals inside is kept as raw JSON and read by ``json_rules`` (a repeated map key could
  hide an earlier value, and map keys cannot be counted);
- exact: a record the fast path refuses, or cannot judge alone (one long enough to nest past
  Jackson's depth limit or hold a number past its digit limit; top-level date, timestamp or binary
  text not in its plain form; a record where a key on the way to a raw JSON, date, timestamp, binary
  or decimal value may appear twice, which could hide an earlier bad value: its quoted name more than
  once anywhere, or a key with escapes that spells it), is parsed again by
  ``json_rules``, which follows Spark's rules for every case (a number where a string belongs,
  ``NaN``, ``"+INF"``, a timestamp in another zone or form, invalid UTF-8, text after the object …).

On the bench's orders (``bench/json_decode.py``, one core, 2026-12-07, on a machine shared with other
work) one core decodes about 816,000 flat orders a second, 4.6 times ``from_json`` inside Spark's JVM
on one core, and about 282,000 nested ones (a struct with a timestamp inside, a DECIMAL(12,2) given as
a string, an array of strings, a timestamp, a boolean: issue 55), 1.9 times ``from_json`` (40,000,
0.27 times, when decimals and such structs were read value by value by ``json_rules``).

A VARIANT column (at any depth) is kept as raw JSON and encoded by ``formats.variant``; a column
``value VARIANT`` is the whole value, any JSON, beside the other columns (``_with_whole_value``).

Deliberate differences from Spark (docs/formats.md): single-quoted JSON and the number tokens
``+INF``, ``-INF`` and ``+Infinity``, which Jackson accepts and no JSON parser does, are
quarantined; a TINYINT of 128 to 255 is quarantined (Jackson wraps it to a negative byte); a map
with a repeated key keeps the last value (Spark keeps both entries); a number in a STRING column
is printed as Java 19 and later print a double (``json_rules.java_double``); and the two in
``spark_datetime``.
"""

from __future__ import annotations

import base64
import gc
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import pyarrow as pa
import pyarrow.compute as pc

from spark_jobs.columns import WHOLE_VALUE
from spark_jobs.formats import json_rules, spark_datetime, variant
from spark_jobs.formats.json_plan import ZONED, Found, Leaf, SchemaPlan

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

NULL_VALUE = "value is null"
NOT_SCHEMA = "value is not JSON of the pipeline's schema"

# Text that Spark and Arrow read alike (Arrow checks a column's text for it; ``JsonValues._check_texts``).
_SLICE = 1_000  # values decoded in one call: a value msgspec refuses costs its slice a second pass


class JsonValues:
    """Decodes json values into the columns of a DDL schema; pickles small (schema and zone only)."""

    def __init__(self, schema: StructType, time_zone: str) -> None:
        from pyspark.sql.types import StructType, VariantType

        json_rules.check_supported(schema)
        self.schema = schema
        self.time_zone = time_zone
        self.arrow_schema: pa.Schema = variant.arrow_schema(schema)
        spark_datetime.session_zone(time_zone)  # fails here, on the driver, for a zone Spark would refuse
        self._plan: SchemaPlan | None = None
        # ``value VARIANT``: the whole value as a VARIANT (any JSON value, with no other column), and
        # the other columns read from it as ever (then it must be an object).
        self.whole = any(f.name == WHOLE_VALUE and isinstance(f.dataType, VariantType) for f in schema.fields)
        rest = StructType([f for f in schema.fields if f.name != WHOLE_VALUE]) if self.whole else None
        self._rest = JsonValues(rest, time_zone) if rest is not None and rest.fields else None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_plan": None}

    @property
    def plan(self) -> SchemaPlan:
        if self._plan is None:
            self._plan = SchemaPlan(self.schema, spark_datetime.session_zone(self.time_zone))
        return self._plan

    def decode(self, values: pa.Array) -> tuple[pa.Table, pa.Array]:
        """The schema's columns for ``values`` (binary), and per record the quarantine reason or null."""
        # A batch makes many dicts, lists and tuples (rows, the leaves found in them) and no cycle among
        # them: the collector, run every 700 new ones, would go through them for nothing. It runs again
        # after the batch.
        if self.whole:
            return self._with_whole_value(values)
        collecting = gc.isenabled()
        gc.disable()
        try:
            return self._decode(values)
        finally:
            if collecting:
                gc.enable()

    def _with_whole_value(self, values: pa.Array) -> tuple[pa.Table, pa.Array]:
        """The whole value as a VARIANT beside the other columns (``_rest``); a value that is not JSON,
        or whose other columns do not decode, goes to quarantine."""
        reasons: list[str | None] = []
        whole: list[dict[str, bytes] | None] = []
        for payload in values.to_pylist():
            try:
                whole.append(None if payload is None else variant.encode(json_rules.parse_value(payload)))
                reasons.append(None if payload is not None else NULL_VALUE)
            except json_rules.Bad:
                whole.append(None)
                reasons.append(NOT_SCHEMA)
        columns: dict[str, pa.Array | pa.ChunkedArray] = {WHOLE_VALUE: pa.array(whole, variant.ARROW)}
        if self._rest is not None:
            rest, theirs = self._rest.decode(values)
            columns.update(zip(rest.column_names, rest.columns, strict=True))
            reasons = [mine or their for mine, their in zip(reasons, theirs.to_pylist(), strict=True)]
        good = pa.array([r is None for r in reasons], pa.bool_())
        arrays = [pc.if_else(good, columns[f.name], pa.scalar(None, f.type)) for f in self.arrow_schema]
        return pa.Table.from_arrays(arrays, schema=self.arrow_schema), pa.array(reasons, pa.string())

    def _decode(self, values: pa.Array) -> tuple[pa.Table, pa.Array]:
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
        texts: dict[str, tuple[list[Any], pa.Array | None]] = {}
        if plan.checked_names:
            texts = self._check_texts(payloads, rows, reasons, slow)
        columns: dict[str, list[Any] | pa.Array] = {}
        for name, kind, reader in plan.columns:
            if kind == "void":
                continue
            column: list[Any] | pa.Array = texts[name][0] if name in texts else list(map(plan.getters[name], rows))
            if kind == "string":
                if len(set(map(type, column)) - {str, type(None)}) > 0:
                    column = [v if v is None or type(v) is str else json_rules.render_scalar(v) for v in column]
            elif kind == "decimal":
                assert isinstance(column, list)
                column = _read_decimals(reader, column, reasons)
            elif kind not in ("native", "nested"):  # a nested column's leaves were read in ``_check_texts``
                assert isinstance(column, list)
                column = self._read(kind, column, reasons, slow, reader, texts[name][1] if name in texts else None)
            if slow:
                if kind == "decimal" and not isinstance(column, list):
                    column = column.to_pylist()
                elif not isinstance(column, list):  # as days or microseconds, as the exact path gives them
                    column = column.cast(pa.int32() if kind == "date" else pa.int64()).to_pylist()
                for i, row in slow.items():
                    column[i] = row.get(name)
            columns[name] = column
        return self._table(n, columns, reasons), pa.array(reasons, pa.string())

    def _check_texts(self, payloads: list[bytes | None], rows: list[Any], reasons: list[str | None],
                     slow: dict[int, dict[str, Any]]) -> dict[str, tuple[list[Any], pa.Array | None]]:
        """The fast path's date, timestamp and binary text checked a column at a time (Arrow's RE2) for
        the forms Spark and Arrow read alike, as msgspec would check each value. A record holding other
        text, or that may hold a key whose values msgspec took loosely twice (msgspec checks only that
        the earlier values are strings, or JSON), is read again by the exact path. The leaves inside
        struct and array columns are read in place (``_read_leaves``). Gives each column's values (and
        a text column's text), to be read without being taken again (nothing if the exact path took a
        record: its row changed)."""
        plan = self.plan
        again: set[int] = set()
        texts: dict[str, tuple[list[Any], pa.Array | None]] = {}
        counts = dict.fromkeys(plan.checked_names, 0)
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
            counts[name] += len(values) - values.count(None)
        for name in plan.decimals:
            values = list(map(plan.getters[name], rows))
            texts[name] = values, None
            counts[name] += len(values) - values.count(None)
        found: dict[str, list[Found]] = {key: [] for key in plan.leaves}
        for name, data_type, nearest in plan.nested:
            values = list(map(plan.getters[name], rows))
            texts[name] = values, None
            present = [(value, i) for i, value in enumerate(values) if value is not None]
            if nearest:
                counts[name] += len(present)
            plan.find_leaves(data_type, present, found, counts)
        if not _each_key_once(payloads, plan.checked_keys, [counts[name] for name in plan.checked_names]):
            again.update(i for i, payload in enumerate(payloads) if payload is not None and reasons[i] is None
                         and i not in slow and plan.checked_key_twice(payload))
        for i in sorted(again):
            if reasons[i] is None and i not in slow:
                rows[i] = plan.empty
                _exactly(plan, i, cast("bytes", payloads[i]), reasons, slow)
        for key, leaves in found.items():
            if leaves:
                self._read_leaves(plan.leaves[key], leaves, reasons, slow)
        return {} if again else texts

    def _read_leaves(self, leaf: Leaf, leaves: list[Found], reasons: list[str | None],
                     slow: dict[int, dict[str, Any]]) -> None:
        """A batch's leaves of one type, read in place where msgspec left them (records the exact path
        took aside): plain ones together, any other by ``json_rules``; a value Spark would not read
        marks its record bad."""
        if slow:
            leaves = [found for found in leaves if found[3] not in slow]
        if leaf.kind == "decimal":
            read = leaf.decimal
            for container, key, value, i in leaves:
                try:
                    container[key] = read(value)
                except json_rules.Bad:
                    reasons[i] = NOT_SCHEMA
            return
        strings = pa.array([v if type(v) is str else None for _, _, v, _ in leaves], pa.string())
        plain = pc.match_substring_regex(strings, leaf.pattern).fill_null(False)
        flags: list[bool] = plain.to_pylist()
        values: list[Any] = [None] * len(leaves)
        if plain.true_count:
            plain_strings = strings if plain.false_count == 0 else pc.if_else(plain, strings, None)
            try:
                if leaf.kind == "binary":
                    values = [None if v is None else base64.b64decode(v) for v in plain_strings.to_pylist()]
                else:
                    read = self._read_strings(leaf.kind, plain_strings)
                    values = read.cast(pa.int32() if leaf.kind == "date" else pa.int64()).to_pylist()
            except pa.ArrowInvalid:  # an impossible date among them: each value by the exact rules
                flags = [False] * len(leaves)
        reader = leaf.reader
        for (container, key, value, i), is_plain, plain_value in zip(leaves, flags, values, strict=True):
            if is_plain:
                container[key] = plain_value
                continue
            try:
                container[key] = reader(value)
            except json_rules.Bad:
                reasons[i] = NOT_SCHEMA

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
        read = self._read_strings(kind, strings)
        if not epochs:
            return read
        values = read.cast(pa.int64()).to_pylist()
        for i, s in seconds.items():
            values[i] = s * 1_000_000
        return values

    @staticmethod
    def _read_strings(kind: str, strings: pa.Array) -> pa.Array:
        """Plain dates and timestamps (the session's zone UTC where a timestamp has no offset), read by Arrow."""
        if kind == "date":
            return pc.cast(strings, pa.date32())
        if kind == "ntz":
            return pc.cast(strings, pa.timestamp("us"))
        zoned_only = _zoned(strings)
        if zoned_only is not None:
            return zoned_only
        zoned = pc.match_substring_regex(strings, ZONED).fill_null(False)
        utc = pc.cast(pc.if_else(zoned, strings, None), pa.timestamp("us", "UTC")).cast(pa.int64())
        local = pc.cast(pc.if_else(zoned, None, strings), pa.timestamp("us")).cast(pa.int64())
        return pc.if_else(zoned, utc, local).cast(pa.timestamp("us", "UTC"))




def _each_key_once(payloads: list[bytes | None], keys: list[bytes], values: list[int]) -> bool:
    """Whether no record can hold one of ``keys`` (quoted names) twice in one object or hold it with a
    null value, told by one search of the batch's bytes, a slice at a time: with no escapes a record
    can spell a key only as written, so a key occurs as often as the non-null ``values`` msgspec found
    for it only if each object holding one holds it once and no other text spells it."""
    counts = [0] * len(keys)
    for start in range(0, len(payloads), _SLICE):
        joined = b"".join(filter(None, payloads[start:start + _SLICE]))
        if b"\\" in joined:
            return False
        for k, key in enumerate(keys):
            counts[k] += joined.count(key)
    return counts == values


def _read_decimals(leaf: Leaf, column: list[Any], reasons: list[str | None]) -> list[Any] | pa.Array:
    """A DECIMAL column as Spark reads it: by Arrow if every value is plain decimal text (a string, a
    number's literal, an integer), else value by value in place; a value Spark would not read marks
    its record bad."""
    kinds = set(map(type, column))
    if kinds <= {str, json_rules.FloatText, int, type(None)}:
        strings = pa.array([str(v) if type(v) is int else v for v in column] if int in kinds else column, pa.string())
        if pc.all(pc.match_substring_regex(strings, leaf.decimal_pattern)).as_py() is not False:  # nulls aside
            return pc.cast(strings, leaf.arrow_type)
    read = leaf.decimal
    for i, value in enumerate(column):
        if value is not None:
            try:
                column[i] = read(value)
            except json_rules.Bad:
                reasons[i] = NOT_SCHEMA
    return column


def _exactly(plan: SchemaPlan, i: int, payload: bytes, reasons: list[str | None], slow: dict[int, dict[str, Any]]) -> None:
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
