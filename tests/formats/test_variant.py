"""The VARIANT encoding (``formats.variant``): JSON values encoded and decoded back, at the sizes where
the encoding changes shape (objects and arrays past 255 members, offsets past one byte, ids past one
byte, long strings, 38-digit decimals), and held to Spark: Spark reads each encoding as it reads its
own ``parse_json`` of the same text, and a json column of type VARIANT gets from Inlet's decoder what
``from_json`` gives it (a JSON null a VARIANT null, a missing field NULL)."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import types as T

from spark_jobs.formats import json_rules, variant
from spark_jobs.formats.json_values import JsonValues
from tests.fixtures.local_spark import local_spark

TEXTS = [
    "null", "true", "false", "0", "-128", "127", "128", "-32769", "2147483648", "-9223372036854775808",
    "9223372036854775808", "12345678901234567890123456789012345678", "123456789012345678901234567890123456789",
    "1.50", "-0.0", "0.000001", "12345678901234567890.123456789012345678", "1.5e300", "-2E-3", '"short"',
    json.dumps("long " * 30), json.dumps("é ☃ 🎉"), "[]", "{}", '[1, [2, [3, {"a": []}]]]',
    json.dumps({f"k{i}": i for i in range(300)}),  # past 255 fields: a large object, two-byte ids
    json.dumps(list(range(300))),  # a large array
    json.dumps({"z": 1, "é": 2, "a": {"z": None, "b": [True, False]}}),  # ids in byte order of the names
    json.dumps({"blob": "x" * 70_000}),  # offsets past two bytes
]


def _python(text: str) -> Any:
    return json.loads(text, parse_float=lambda t: float(t) if "e" in t.lower() else Decimal(t),
                      parse_int=lambda t: int(t) if len(t.lstrip("-")) <= 38 else float(t))


def _encoded(text: str) -> dict[str, bytes]:
    return variant.encode(json_rules.parse_value(text.encode()))


@pytest.mark.parametrize("text", TEXTS, ids=[t[:30] for t in TEXTS])
def test_each_value_decodes_back(text: str) -> None:
    encoded = _encoded(text)

    assert variant.decode(encoded["metadata"], encoded["value"]) == _python(text)


def test_integers_take_the_smallest_type_and_decimals_their_digits() -> None:
    assert [_encoded(t)["value"][0] >> 2 for t in ("1", "300", "70000", "5000000000", "1.5", "1.5e0", "1" * 39)] == [
        3, 4, 5, 6, 8, 7, 7]  # int8, int16, int32, int64, decimal4, double, double
    assert _encoded("1.50")["value"] == _encoded("1.5")["value"]  # trailing zeros dropped, as Spark does


def test_a_number_past_a_doubles_range_is_infinity() -> None:
    assert _decoded_text("[" + "9" * 400 + ", -" + "9" * 400 + ", 1e400]") == [float("inf"), float("-inf"), float("inf")]


def _decoded_text(text: str) -> Any:
    encoded = _encoded(text)
    return variant.decode(encoded["metadata"], encoded["value"])


@pytest.mark.parametrize("text", ['{"a": 1, "a": 2}', '{"b": {"c": 1, "c": 1}}', '"\\ud800"', '{"\\ud800": 1}'])
def test_a_repeated_key_or_a_string_without_utf8_is_refused(text: str) -> None:
    with pytest.raises(json_rules.Bad):
        _encoded(text)


@pytest.mark.slow
def test_spark_reads_each_encoding_as_its_own_parse_json() -> None:
    from pyspark.sql.types import VariantVal

    spark = local_spark()
    ours = spark.createDataFrame([(i, VariantVal(_encoded(t)["value"], _encoded(t)["metadata"])) for i, t in enumerate(TEXTS)],
                                 "i INT, v VARIANT")
    theirs = spark.createDataFrame(list(enumerate(TEXTS)), "i INT, t STRING").selectExpr("i", "parse_json(t) AS v")

    def read(frame: Any) -> dict[int, tuple[str, str]]:
        return {r["i"]: (r["j"], r["s"]) for r in frame.selectExpr("i", "to_json(v) AS j", "schema_of_variant(v) AS s").collect()}

    assert read(ours) == read(theirs)


@pytest.mark.slow
def test_a_variant_column_gets_what_from_json_gives_it() -> None:
    from pyspark.sql.types import VariantVal

    records = [b'{"id": 1, "v": {"a": [1, 2.5]}}', b'{"id": 2}', b'{"id": 3, "v": null}', b'{"id": 4, "v": "x"}',
               b'{"id": 5, "v": 1e3, "w": 1}', b'{"v": [], "id": 6}']
    schema = T.StructType([T.StructField("id", T.IntegerType()), T.StructField("v", T.VariantType())])
    columns, reasons = JsonValues(schema, "UTC").decode(pa.array(records, pa.binary()))
    assert reasons.null_count == len(records)
    spark = local_spark()
    ours = spark.createDataFrame([(r["id"], None if r["v"] is None else VariantVal(r["v"]["value"], r["v"]["metadata"]))
                                  for r in columns.to_pylist()], "id INT, v VARIANT")
    theirs = spark.createDataFrame([(r.decode(),) for r in records], "j STRING").selectExpr(
        "from_json(j, 'id INT, v VARIANT') AS s").selectExpr("s.id AS id", "s.v AS v")

    def read(frame: Any) -> list[tuple[int, bool, str | None]]:
        return sorted((r["id"], r["missing"], r["j"]) for r in frame.selectExpr(
            "id", "v IS NULL AS missing", "to_json(v) AS j").collect())

    assert read(ours) == read(theirs)
