"""``JsonValues`` without Spark's JVM (the fast suite): it pickles small and decodes after, the fast
and exact paths agree inside one batch, and the deliberate differences give what docs/formats.md
says. ``test_json_conformance.py`` holds every case to Spark itself."""

from __future__ import annotations

import pickle
from decimal import Decimal

import pyarrow as pa
import pytest
from pyspark.sql import types as T

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
    with pytest.raises(TypeError, match="VARIANT|variant"):
        JsonValues(T.StructType([T.StructField("v", T.VariantType())]), "UTC")
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
