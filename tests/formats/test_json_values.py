"""``JsonValues`` without Spark's JVM (the fast suite): it pickles small and decodes after, the fast
and exact paths agree inside one batch, and the deliberate differences give what docs/formats.md
says. ``test_json_conformance.py`` holds every case to Spark itself."""

from __future__ import annotations

import pickle
from decimal import Decimal

import pyarrow as pa
import pytest
from pyspark.sql import types as T

from spark_jobs.formats import json_rules, spark_datetime
from spark_jobs.formats.json_values import NOT_SCHEMA, NULL_VALUE, JsonValues

ORDER = T.StructType([
    T.StructField("id", T.LongType()), T.StructField("customer", T.StringType()), T.StructField("amount", T.DoubleType()),
    T.StructField("placed_at", T.TimestampType()), T.StructField("qty", T.ByteType()),
    T.StructField("price", T.DecimalType(5, 2)), T.StructField("tags", T.MapType(T.StringType(), T.IntegerType())),
])


def _decode(decoder: JsonValues, *values: bytes | None) -> list[tuple[str | None, dict[str, object]]]:
    columns, reasons = decoder.decode(pa.array(values, pa.binary()))
    return list(zip(reasons.to_pylist(), columns.to_pylist(), strict=True))


def _row(**values: object) -> dict[str, object]:
    return {"id": None, "customer": None, "amount": None, "placed_at": None, "qty": None, "price": None, "tags": None,
            **values}


def test_pickles_without_its_msgspec_types_and_decodes_after() -> None:
    decoder = JsonValues(ORDER, "UTC")
    _decode(decoder, b'{"id":1}')  # builds the plan, which must not travel
    copy = pickle.loads(pickle.dumps(decoder))
    assert copy._plan is None
    [(reason, row)] = _decode(copy, b'{"id":1,"placed_at":"2026-11-24T00:00:00.001+00:00","price":"1.005"}')
    assert reason is None
    assert (row["id"], row["price"], str(row["placed_at"])) == (1, Decimal("1.01"), "2026-11-24 00:00:00.001000+00:00")


def test_fast_and_exact_paths_in_one_batch() -> None:
    decoder = JsonValues(ORDER, "UTC")
    rows = _decode(
        decoder,
        b'{"id":1,"customer":"a","amount":2.5,"placed_at":1700000000,"qty":3}',  # fast
        b'{"id":2,"customer":7.50,"amount":"NaN"}',  # exact: a number as a STRING, NaN as a string
        None,
        b'{"id":"3"}',
        b'{"id":4,"price":"x","price":1}',  # a raw JSON column's key twice: the earlier value spoils it
        b'{"id":5} and then some',  # Spark reads the first value only
    )
    assert rows[0] == (None, _row(id=1, customer="a", amount=2.5, placed_at=rows[0][1]["placed_at"], qty=3))
    assert rows[0][1]["placed_at"].timestamp() == 1700000000  # type: ignore[union-attr]
    assert rows[1][0] is None and rows[1][1]["customer"] == "7.5" and rows[1][1]["amount"] != rows[1][1]["amount"]
    assert rows[2:] == [(NULL_VALUE, _row()), (NOT_SCHEMA, _row()), (NOT_SCHEMA, _row()), (None, _row(id=5))]


def test_a_batch_read_a_slice_at_a_time_keeps_every_record_in_its_place() -> None:
    """Values with no tombstone, raw JSON column or long value are decoded a slice at a time: a value
    msgspec refuses sends its slice record by record, and a timestamp without an offset sends its
    column to the reading that tells zoned from local times. Each record as it decodes alone."""
    decoder = JsonValues(T.StructType([T.StructField("id", T.LongType()), T.StructField("customer", T.StringType()),
                                       T.StructField("placed_at", T.TimestampType())]), "UTC")
    values = [b'{"id":%d,"customer":"c%d","placed_at":"2026-11-24T10:00:%02d+01:00"}' % (i, i, i % 60) for i in range(2_500)]
    values[1_500] = b'{"id":"1500"}'
    values[2_100] = b'{"id":2100,"customer":7}'  # a number in a STRING column: its text
    values[2_200] = b'{"id":2200,"placed_at":"2026-11-24T10:00:00"}'  # no offset: the session's zone
    rows = _decode(decoder, *values)
    assert rows == [_decode(decoder, value)[0] for value in values]
    assert [reason for reason, _ in rows] == [None] * 1_500 + [NOT_SCHEMA] + [None] * 999
    assert (rows[1_499][1]["id"], rows[1_501][1]["id"], rows[2_100][1]["customer"]) == (1_499, 1_501, "7")
    assert str(rows[59][1]["placed_at"]) == "2026-11-24 09:00:59+00:00"
    assert str(rows[2_200][1]["placed_at"]) == "2026-11-24 10:00:00+00:00"


@pytest.mark.parametrize(("value", "expected"), [
    (b'{"qty":200}', (NOT_SCHEMA, _row())),  # Spark: -56
    (b"{'id':1}", (NOT_SCHEMA, _row())),  # Spark: id 1
    (b'{"amount":+INF}', (NOT_SCHEMA, _row())),  # Spark: Infinity
    (b'{"placed_at":"10:00:00"}', (NOT_SCHEMA, _row())),  # Spark: today at 10:00
    (b'{"placed_at":99999999999999}', (NOT_SCHEMA, _row())),  # Spark: wrapped around
    (b'{"tags":{"a":1,"a":2}}', (None, _row(tags=[("a", 2)]))),  # Spark: both entries
])
def test_deliberate_differences(value: bytes, expected: tuple[str | None, dict[str, object]]) -> None:
    assert _decode(JsonValues(ORDER, "UTC"), value) == [expected]


def test_refuses_what_it_cannot_decode_and_unknown_zones() -> None:
    with pytest.raises(TypeError, match="is not decoded outside Spark"):
        JsonValues(T.StructType([T.StructField("t", T.CalendarIntervalType())]), "UTC")
    with pytest.raises(ValueError, match="time zone"):
        JsonValues(ORDER, "Mars/Olympus")


def test_timestamp_text_is_checked_a_column_at_a_time_and_a_key_written_twice_is_read_again() -> None:
    """msgspec takes a timestamp's text as any string, and Arrow checks the column; a record whose
    text is not plain, or that writes the key twice (an earlier value msgspec saw only as a string),
    goes to the exact path. One search of the batch's bytes finds that no record does; where it
    cannot tell (escapes, the key's text elsewhere), every record is looked at alone."""
    decoder = JsonValues(T.StructType([T.StructField("id", T.LongType()), T.StructField("customer", T.StringType()),
                                       T.StructField("placed_at", T.TimestampType())]), "UTC")
    clean = [b'{"id":%d,"placed_at":"2026-11-24T10:00:%02dZ"}' % (i, i % 60) for i in range(1_200)]
    odd = {
        100: b'{"id":100,"placed_at":"junk","placed_at":"2026-11-24T10:00:00Z"}',  # Spark: not of the schema
        150: b'{"id":"150","placed_at":"2026-11-24T10:00:00Z"}',  # refused by msgspec: its key counts, its value not
        200: b'{"id":200,"placed_at":"2026-11-24T10:00:00Z","placed_at":null}',  # the last value: null
        300: b'{"id":300,"placed_at":"2026-11-24 10:00:00.5+01:00"}',  # plain: Arrow reads it
        400: b'{"id":400,"placed_at":"2026-11-24T10:00:00.1234567Z"}',  # not plain: Spark's rules
        500: b'{"id":500,"placed_at":"2026-11-24T10:00"}',  # not plain (no seconds): Spark's rules
        600: b'{"id":600,"placed_at":1700000000}',  # epoch seconds
        700: b'{"id":700,"placed_at":"2026-02-30T10:00:00Z"}',  # plain, but no such day: Spark's rules
    }
    with_escapes = {800: b'{"id":800,"pl\\u0061ced_at":"junk","placed_at":"2026-11-24T10:00:00Z"}'}
    with_key_text = {900: b'{"id":900,"customer":"placed_at","placed_at":"2026-11-24T10:00:00Z"}'}
    for extra in ({}, odd, with_escapes, with_key_text, {**odd, **with_escapes, **with_key_text}):
        values = [extra.get(i, value) for i, value in enumerate(clean)]
        rows = _decode(decoder, *values)
        assert rows == [_decode(decoder, value)[0] for value in values]
        assert [i for i, (reason, _) in enumerate(rows) if reason] == sorted({100, 150, 700, 800} & set(extra))
        assert all(row["id"] == i for i, (reason, row) in enumerate(rows) if reason is None)
    rows = _decode(decoder, *odd.values())
    assert [str(row["placed_at"]) for _, row in rows] == [
        "None", "None", "None", "2026-11-24 09:00:00.500000+00:00", "2026-11-24 10:00:00.123456+00:00",
        "2026-11-24 10:00:00+00:00", "2023-11-14 22:13:20+00:00", "None"]


def _as_numbers(t: pa.DataType) -> pa.DataType:
    """Dates and timestamps as their numbers: Python's datetime cannot hold every value Spark can."""
    if pa.types.is_date32(t):
        return pa.int32()
    if pa.types.is_timestamp(t):
        return pa.int64()
    if pa.types.is_list(t):
        return pa.list_(_as_numbers(t.value_type))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _as_numbers(f.type)) for f in t])
    return t


def _rows_of(table: pa.Table, reasons: list[str | None]) -> list[tuple[str | None, dict[str, object]]]:
    plain = pa.table([c.cast(_as_numbers(c.type)) for c in table.columns], names=table.column_names)
    return list(zip(reasons, plain.to_pylist(), strict=True))


def _fast(decoder: JsonValues, *values: bytes | None) -> list[tuple[str | None, dict[str, object]]]:
    columns, reasons = decoder.decode(pa.array(values, pa.binary()))
    return _rows_of(columns, reasons.to_pylist())


def _exact(decoder: JsonValues, value: bytes | None) -> tuple[str | None, dict[str, object]]:
    """One value read by the exact path alone (``json_rules``), as ``_fast`` gives it."""
    reason, row = None, None
    if value is None:
        reason = NULL_VALUE
    else:
        try:
            row = json_rules.struct_converter(decoder.schema, spark_datetime.session_zone(decoder.time_zone))(json_rules.parse(value))
        except json_rules.Bad:
            reason = NOT_SCHEMA
    table = pa.Table.from_pylist([row or {}], schema=decoder.arrow_schema)
    return _rows_of(table, [reason])[0]


def _agrees_with_the_exact_path(decoder: JsonValues, odd: list[bytes | None]) -> list[tuple[str | None, dict[str, object]]]:
    """``odd`` decoded among clean records (one batch), each alone, and by the exact path: the same rows
    (dates and timestamps as their numbers)."""
    clean = [odd[0]] * 1_200
    values = clean[:600] + odd + clean[600:]
    rows = _fast(decoder, *values)[600:600 + len(odd)]
    assert rows == [_fast(decoder, value)[0] for value in odd]
    assert rows == [_exact(decoder, value) for value in odd]
    return rows


DECIMALS = T.StructType([
    T.StructField("id", T.LongType()), T.StructField("price", T.DecimalType(5, 2)), T.StructField("rate", T.DecimalType(2, 2)),
    T.StructField("big", T.DecimalType(38, 0)),
    T.StructField("item", T.StructType([T.StructField("price", T.DecimalType(5, 2)), T.StructField("n", T.IntegerType())])),
    T.StructField("prices", T.ArrayType(T.DecimalType(5, 2))),
])
DECIMAL_TEXTS = [  # as a JSON string and as a JSON number where it is one
    "12.50", "12.5", "0", "-0", "0.00", "999.99", "-999.99", "999.994", "999.995", "-999.995", "1000", "1000.00", "-1000",
    "0.005", "-0.005", "0.004999", "1.005", "12.345", "1e2", "1E+2", "1.5e-1", "-1.5E1", "9.9999e2", "1e3", "1e-999",
    "12345678901234567890", "1e400", "0.1", "123.456789",
]


@pytest.mark.parametrize("field", ["price", "rate", "big", "item", "prices"])
def test_decimals_on_the_fast_path_read_as_the_exact_path_reads_them(field: str) -> None:
    """Decimal text (a string, or a number's literal) with no more digits than the type holds is read
    fast; any other (rounding, overflow, exponents, signs, commas, escapes, other JSON) by Spark's
    rules; every answer the exact path's."""
    decoder = JsonValues(DECIMALS, "UTC")
    assert [kind for _, kind, _ in decoder.plan.columns] == ["native", "decimal", "decimal", "decimal", "nested", "nested"]
    literals = [*DECIMAL_TEXTS, *(f'"{t}"' for t in DECIMAL_TEXTS), '"+1.5"', '".5"', '"5."', '" 1.5"', '"1.5 "', '"1,23.4"',
                '"007.50"', '"\\u0031.5"', '"abc"', '""', '"NaN"', '"Infinity"', "true", "null", "[1]", '{"x":1}']

    def value(literal: str) -> bytes:
        inner = {"item": f'{{"price":{literal},"n":1}}', "prices": f"[1.5,{literal},null]"}.get(field, literal)
        return f'{{"id":1,"{field}":{inner}}}'.encode()

    rows = _agrees_with_the_exact_path(decoder, [value(literal) for literal in literals])
    price = {literal: (reason, row["price"]) for literal, (reason, row) in zip(literals, rows, strict=True)}
    if field == "price":
        assert [price[t] for t in ("12.5", '"12.50"', "-0", "999.994", "999.995", '"-999.995"', "1000", "0.005", '"-0.005"',
                                   "1e2", '"1.5e-1"', '"1,23.4"', '"007.50"', '"\\u0031.5"', "1e-999", '" 1.5"', "true", "null")] == [
            (None, Decimal("12.50")), (None, Decimal("12.50")), (None, Decimal("0.00")), (None, Decimal("999.99")),
            (NOT_SCHEMA, None), (NOT_SCHEMA, None), (NOT_SCHEMA, None), (None, Decimal("0.01")), (None, Decimal("-0.01")),
            (None, Decimal("100.00")), (None, Decimal("0.15")), (None, Decimal("123.40")), (None, Decimal("7.50")),
            (None, Decimal("1.50")), (None, Decimal("0.00")), (NOT_SCHEMA, None), (NOT_SCHEMA, None), (None, None)]


def test_a_decimal_key_written_twice_is_judged_by_its_earlier_value_too() -> None:
    decoder = JsonValues(DECIMALS, "UTC")
    rows = _agrees_with_the_exact_path(decoder, [
        b'{"id":1,"price":"1.50"}', b'{"id":2,"price":"x","price":"1.50"}', b'{"id":3,"price":"1.50","price":null}',
        b'{"id":4,"item":{"price":"x","price":1},"price":2}', b'{"id":5,"item":{"price":"x"},"item":{"price":1}}',
        b'{"id":6,"pr\\u0069ce":"x","price":1}', b'{"id":7,"prices":["x"],"prices":[1]}',
    ])
    assert [(reason, row["id"], row["price"]) for reason, row in rows] == [
        (None, 1, Decimal("1.50")), (NOT_SCHEMA, None, None), (None, 3, None), (NOT_SCHEMA, None, None),
        (NOT_SCHEMA, None, None), (NOT_SCHEMA, None, None), (NOT_SCHEMA, None, None)]


NESTED_TIMES = T.StructType([
    T.StructField("id", T.LongType()),
    T.StructField("customer", T.StructType([T.StructField("name", T.StringType()), T.StructField("since", T.TimestampType()),
                                            T.StructField("born", T.DateType()), T.StructField("local", T.TimestampNTZType())])),
    T.StructField("times", T.ArrayType(T.TimestampType())),
    T.StructField("visits", T.ArrayType(T.StructType([T.StructField("at", T.TimestampType()), T.StructField("days", T.ArrayType(T.DateType()))]))),
    T.StructField("key", T.BinaryType()), T.StructField("keys", T.ArrayType(T.BinaryType())),
])
TIME_TEXTS = [
    "2026-11-24T10:00:00Z", "2026-11-24T10:00:00.123+01:00", "2026-11-24 10:00:00.5", "2026-11-24T10:00:00", "2026-11-24",
    "2026-11-24T10:00:00.1234567Z", "2026-11-24T10:00", "2026-11-24T10:00:00 UTC", "2026-02-30T10:00:00Z", "2026-02-30",
    "2024-02-29", "+12026-06-01T00:00:00", "T10:00:00", "junk", "", " 2026-11-24",
]


@pytest.mark.parametrize("time_zone", ["UTC", "America/New_York"])
@pytest.mark.parametrize("field", ["since", "born", "local", "times", "at", "days"])
def test_dates_and_timestamps_inside_structs_and_arrays_read_as_the_exact_path_reads_them(field: str, time_zone: str) -> None:
    """Text plain for its type is read by Arrow, a batch's leaves together; any other text, epoch
    seconds and other JSON by Spark's rules; every answer the exact path's, in either zone."""
    decoder = JsonValues(NESTED_TIMES, time_zone)
    assert [kind for _, kind, _ in decoder.plan.columns] == ["native", "nested", "nested", "nested", "binary", "nested"]
    literals = [*(f'"{t}"' for t in TIME_TEXTS), "1700000000", "-1", "99999999999999", "1.5", "null", "true", '["2026-11-24"]']

    def value(literal: str) -> bytes:
        inner = {"since": f'"customer":{{"name":"n","since":{literal}}}', "born": f'"customer":{{"born":{literal}}}',
                 "local": f'"customer":{{"local":{literal}}}', "times": f'"times":["2026-11-24T10:00:00Z",{literal},null]',
                 "at": f'"visits":[{{"at":{literal}}},null,{{"at":"2026-11-24T10:00:00Z"}}]',
                 "days": f'"visits":[{{"days":[{literal},"2026-11-24"]}}]'}[field]
        return f'{{"id":1,{inner}}}'.encode()

    _agrees_with_the_exact_path(decoder, [value(literal) for literal in literals])
    if field == "since" and time_zone == "UTC":
        rows = _decode(decoder, *(value(literal) for literal in literals[:7]))
        assert [(reason, str(row["customer"]["since"])) for reason, row in rows] == [  # type: ignore[index]  # a dict here
            (None, "2026-11-24 10:00:00+00:00"), (None, "2026-11-24 09:00:00.123000+00:00"),
            (None, "2026-11-24 10:00:00.500000+00:00"), (None, "2026-11-24 10:00:00+00:00"), (None, "2026-11-24 00:00:00+00:00"),
            (None, "2026-11-24 10:00:00.123456+00:00"), (None, "2026-11-24 10:00:00+00:00")]


def test_nested_keys_written_twice_and_binary_inside_arrays() -> None:
    decoder = JsonValues(NESTED_TIMES, "UTC")
    rows = _agrees_with_the_exact_path(decoder, [
        b'{"id":1,"customer":{"since":"2026-11-24T10:00:00Z"},"keys":["aGVsbG8=",null,"AAEC"]}',
        b'{"id":2,"customer":{"since":"junk","since":"2026-11-24T10:00:00Z"}}',
        b'{"id":3,"customer":{"since":"junk"},"customer":{"since":"2026-11-24T10:00:00Z"}}',
        b'{"id":4,"customer":{"since":"junk"},"customer":null}',
        b'{"id":5,"customer":{"s\\u0069nce":"junk","since":"2026-11-24T10:00:00Z"}}',
        b'{"id":6,"times":["junk"],"times":["2026-11-24T10:00:00Z"]}',
        b'{"id":7,"visits":[{"at":"junk","at":"2026-11-24T10:00:00Z"}]}',
        b'{"id":8,"customer":{"name":"since","since":"2026-11-24T10:00:00Z"}}',
        b'{"id":9,"keys":["aGVs bG8="]}', b'{"id":10,"keys":["bad!"]}', b'{"id":11,"keys":[7]}',
    ])
    assert [(reason, row["id"]) for reason, row in rows] == [
        (None, 1), (NOT_SCHEMA, None), (NOT_SCHEMA, None), (NOT_SCHEMA, None), (NOT_SCHEMA, None), (NOT_SCHEMA, None),
        (NOT_SCHEMA, None), (None, 8), (None, 9), (NOT_SCHEMA, None), (NOT_SCHEMA, None)]
    assert (rows[0][1]["keys"], rows[8][1]["keys"]) == ([b"hello", None, b"\x00\x01\x02"], [b"hello"])
