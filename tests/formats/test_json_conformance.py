"""``spark_jobs.formats.json_values`` against Spark's ``from_json``: the oracle.

Every case of ``tests/formats/json_corpus.py`` goes through ``spark_from_json.from_json`` (the
expression json pipelines ran before issue 35, in one local SparkSession, one job per time zone) and through
``JsonValues.decode`` (the whole group as one batch, and each value alone); both must give the same
quarantine reason and, for a record that decoded, the same values (nulls, NaN and -0.0 included).

Where Inlet differs on purpose, ``DELIBERATE`` names the case and says why (docs/formats.md lists
the same); the test checks that Spark still reads such a case its way and Inlet its own.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tests.fixtures.local_spark import local_spark
from tests.formats.json_corpus import FLOAT_SCHEMA, ORDER, Case, corpus, literal

pytestmark = pytest.mark.slow

QUARANTINED = "value is not JSON of the pipeline's schema"

# (schema, value) -> (why Inlet differs, what Inlet gives: QUARANTINED, or the row's values)
DELIBERATE: dict[tuple[str, bytes], tuple[str, Any]] = {
    # Jackson reads 128 to 255 as a byte by wrapping it (200 becomes -56): silent corruption.
    **{literal("TINYINT", n): ("TINYINT out of range", QUARANTINED) for n in ("128", "255")},
    # Jackson's ALLOW_SINGLE_QUOTES (on in Spark) reads 'text' and \' ; no JSON parser does, nor RFC 8259.
    (ORDER, b"{'id':1}"): ("single quotes", QUARANTINED),
    (ORDER, b'{"extra":\'single\',"id":4}'): ("single quotes", QUARANTINED),
    (ORDER, b'{"customer":"it\\\'s"}'): ("single quotes", QUARANTINED),
    # Jackson's non-numeric numbers include +INF, -INF and +Infinity; JSON parsers read NaN,
    # Infinity and -Infinity only.
    (ORDER, b'{"amount":+INF}'): ("+INF", QUARANTINED),
    (ORDER, b'{"extra":-INF,"id":4}'): ("-INF", QUARANTINED),
    (ORDER, b'{"extra":+Infinity,"id":4}'): ("+Infinity", QUARANTINED),
    # A time without a date: Spark gives it the date of the day the run reads it, so a replay
    # (replace mode) would write another value.
    (ORDER, b'{"placed_at":"T10:00:00"}'): ("time without a date", QUARANTINED),
    (ORDER, b'{"placed_at":"10:00:00"}'): ("time without a date", QUARANTINED),
    # Epoch seconds whose microseconds overflow 64 bits: Spark wraps them around silently.
    (ORDER, b'{"placed_at":99999999999999}'): ("epoch seconds overflow", QUARANTINED),
    (ORDER, b'{"placed_at":9223372036855}'): ("epoch seconds overflow", QUARANTINED),
    (ORDER, b'{"placed_at":9223372036854775807}'): ("epoch seconds overflow", QUARANTINED),
    literal("TIMESTAMP", "99999999999999"): ("epoch seconds overflow", QUARANTINED),
    literal("TIMESTAMP", "9223372036854775807"): ("epoch seconds overflow", QUARANTINED),
    # A map whose object repeats a key: Spark keeps both entries, a map no reader can look up
    # consistently (Spark's own map functions refuse to build one); Inlet keeps the last value, as
    # every JSON parser and Spark's struct fields do.
    ("m MAP<STRING, INT>", b'{"m":{"a":1,"a":2}}'): ("repeated map key", {"m": [("a", 2)]}),
    # A number in a STRING column is written as Java prints the double. Java 17's Double.toString
    # (Spark's JVM here) prints some doubles with more digits than they need (1e23 as
    # 9.999999999999999E22); Java 19 and later print the shortest decimal that reads back as the
    # same double, as Inlet does (and as Python's repr), so the column does not depend on the JVM.
    **{(FLOAT_SCHEMA, f'{{"s":{f},"a":[{f},{{"x":{f}}}]}}'.encode()): (
        "Java 17's Double.toString", {"s": java19, "a": [java19, f'{{"x":{java19}}}']})
       for f, java19 in (("1e23", "1.0E23"), ("2e23", "2.0E23"), ("9.999999999999999e22", "1.0E23"),
                         ("8.41e21", "8.41E21"), ("1e-322", "9.9E-323"))},
}


def _groups(cases: list[Case]) -> dict[tuple[str, str], list[Case]]:
    groups: dict[tuple[str, str], list[Case]] = defaultdict(list)
    for case in cases:
        groups[(case.schema, case.time_zone)].append(case)
    return groups


def _plain_type(t: pa.DataType) -> pa.DataType:
    """Dates and timestamps as their numbers: Python's datetime cannot hold every value Spark can."""
    if pa.types.is_date32(t):
        return pa.int32()
    if pa.types.is_timestamp(t):
        return pa.int64()
    if pa.types.is_map(t):
        return pa.map_(t.key_type, _plain_type(t.item_type))
    if pa.types.is_list(t):
        return pa.list_(_plain_type(t.value_type))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _plain_type(f.type)) for f in t])
    return t


def _rows(table: pa.Table) -> list[dict[str, Any]]:
    plain = [c.cast(_plain_type(c.type)) for c in table.columns]
    return pa.table(plain, names=table.column_names).to_pylist()


def _comparable(row: dict[str, Any]) -> str:
    return repr(row)  # repr tells NaN, -0.0 and Decimal scales apart, and NaN equals NaN


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    session = local_spark()  # the process's one: each group sets its session's time zone, put back after
    yield session
    session.conf.set("spark.sql.session.timeZone", "UTC")


SparkResult = tuple[list[str | None], list[dict[str, Any]], list[pa.DataType]]
_NOT_PAYLOAD = ("offset", "_inlet_quarantine_reason")


def _spark_results(spark: Any, time_zone: str, groups: list[tuple[str, list[Case]]]) -> list[SparkResult]:
    """``from_json`` of each group's values with its schema: one Spark job for all the groups of a time
    zone (each group's columns renamed apart, the groups' rows unioned); per group its reasons, rows
    and column types."""
    from pyspark.sql import functions as F

    from spark_jobs.kafka_source import kafka_struct
    from tests.formats.spark_from_json import from_json

    spark.conf.set("spark.sql.session.timeZone", time_zone)
    frames, names = [], []
    for k, (schema, cases) in enumerate(groups):
        records = spark.createDataFrame([(None, c.value, "t", 0, i, None, 0) for i, c in enumerate(cases)],
                                        kafka_struct(False))
        decoded = from_json(records, schema)
        payload = [n for n in decoded.columns if n not in _NOT_PAYLOAD]
        names.append(payload)
        frames.append(decoded.select(F.lit(k).alias("group"), "offset", "_inlet_quarantine_reason",
                                     *[F.col(f"`{n}`").alias(f"g{k}_{i}") for i, n in enumerate(payload)]))
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame, allowMissingColumns=True)
    table = union.toArrow()
    results = []
    for k, payload in enumerate(names):
        mine = table.filter(pc.equal(table.column("group"), k)).sort_by("offset")
        columns = mine.select([f"g{k}_{i}" for i in range(len(payload))]).rename_columns(payload)
        results.append((mine.column("_inlet_quarantine_reason").to_pylist(), _rows(columns),
                        [f.type for f in columns.schema]))
    return results


def _inlet_results(schema: str, time_zone: str, cases: list[Case]) -> tuple[list[str | None], list[dict[str, Any]], Any]:
    from spark_jobs.decode import json_schema
    from spark_jobs.formats.json_values import JsonValues

    decoder = JsonValues(json_schema(schema), time_zone)
    values = pa.array([c.value for c in cases], pa.binary())
    columns, reasons = decoder.decode(values)
    return reasons.to_pylist(), _rows(columns), decoder


def test_json_values_read_like_spark_from_json(spark: Any) -> None:
    cases = corpus()
    assert len(cases) >= 500
    by_zone: dict[str, list[tuple[str, list[Case]]]] = defaultdict(list)
    for (schema, time_zone), group in _groups(cases).items():
        by_zone[time_zone].append((schema, group))
    mismatches, seen_deliberate = [], set()
    for time_zone, groups in by_zone.items():
        for (schema, group), spark_result in zip(groups, _spark_results(spark, time_zone, groups), strict=True):
            spark_reasons, spark_rows, spark_types = spark_result
            reasons, rows, decoder = _inlet_results(schema, time_zone, group)
            assert [f.type for f in decoder.arrow_schema] == spark_types, schema
            for i, case in enumerate(group):
                # Each value alone decodes as it does in the batch (the fast path's batch-wide checks).
                alone_columns, alone_reasons = decoder.decode(pa.array([case.value], pa.binary()))
                alone = (alone_reasons.to_pylist()[0], _comparable(_rows(alone_columns)[0]))
                assert alone == (reasons[i], _comparable(rows[i])), case
                theirs = spark_reasons[i] or _comparable(spark_rows[i])
                ours = reasons[i] or _comparable(rows[i])
                deliberate = DELIBERATE.get((schema, case.value or b""))
                if deliberate is not None:
                    seen_deliberate.add((schema, case.value))
                    why, expected = deliberate
                    assert theirs != ours, f"{why}: Spark now reads {case} as Inlet does"
                    assert ours == (expected if expected == QUARANTINED else _comparable(expected)), (why, case, ours)
                elif theirs != ours:
                    mismatches.append(f"{case}\n  spark: {theirs}\n  inlet: {ours}")
    assert seen_deliberate == set(DELIBERATE), "a deliberate difference lost its case"
    assert not mismatches, f"{len(mismatches)} of {len(cases)} cases differ:\n" + "\n".join(mismatches[:80])
