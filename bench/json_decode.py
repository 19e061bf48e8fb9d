"""Benchmark: json values decoded by Inlet on Arrow against Spark's ``from_json``, same values, same run.

Two shapes of orders, each measured in the same run: ``flat``, ``bench/kafka_bench.py``'s JSON orders
(about 140 bytes each, every column a scalar), and ``nested``, orders in their real shapes (issue 55;
about 190 bytes): a customer struct with a timestamp inside, a DECIMAL(12,2) given as a string, an
array of strings, a timestamp with milliseconds and a boolean. Inlet's decoder
(``spark_jobs.formats.json_values``) takes them in batches as the executors get them (20,000, the
engine's Arrow batch size) on one core. Spark decodes the same values with the expression json
pipelines ran before issue 35 (``tests/formats/spark_from_json.py``, the conformance test's oracle)
in a one-core local session, twice: inside the JVM alone (the values cached as rows, the result
dropped by the ``noop`` sink: ``from_json``'s own speed), and with the rows brought back to Python
as Arrow (what that path paid). ``bench/spark_ingest.py --formats string,json`` measures whole runs.

A third shape, ``variant``, is the nested orders landed whole as a VARIANT (a schema of ``value
VARIANT``: ``formats.variant`` encodes each value in Python), against Spark's own
``parse_json(CAST(value AS STRING))`` on the same values, and beside the same orders decoded into
their typed columns (``nested``, measured again in the same run if not asked for).

    .venv/bin/python bench/json_decode.py [--messages 1000000] [--bad-every 0] [--shapes flat,nested,variant] [--inlet-only]

``--bad-every N`` makes every Nth order not JSON of the schema (a string where the id belongs), to
show the exact path's cost. ``--inlet-only`` skips Spark's ``from_json`` (to profile Inlet's decoder alone). Each
figure is the best of two rounds.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from kafka_bench import ORDER_DDL, order

BATCH = 20_000
ROUNDS = 2  # the best of each: JIT and caches warm
NESTED_DDL = ("id BIGINT, customer STRUCT<id: BIGINT, name: STRING, since: TIMESTAMP>, amount DECIMAL(12,2), "
              "tags ARRAY<STRING>, placed_at TIMESTAMP, paid BOOLEAN")
DDL = {"flat": ORDER_DDL, "nested": NESTED_DDL, "variant": "value VARIANT"}
VALUES = {"flat": "flat", "nested": "nested", "variant": "nested"}  # the orders each shape decodes
TAGS = ("gift", "express", "fragile", "b2b")


def _utc_text(moment: dt.datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def nested_order(i: int, base: dt.datetime) -> dict[str, object]:
    """An order in its real shape (issue 55), e.g. ``{"id": 1, "customer": {"id": 1, "name":
    "customer-00001", "since": "2026-11-22T10:00:00Z"}, "amount": "0.37", "tags": ["express"],
    "placed_at": "2026-11-24T00:00:00.001Z", "paid": false}``."""
    customer = i % 5000
    since = base - dt.timedelta(days=customer % 1000, hours=14)
    return {"id": i, "customer": {"id": customer, "name": f"customer-{customer:05d}",
                                  "since": since.isoformat().replace("+00:00", "Z")},
            "amount": f"{i * 0.37 % 1000:.2f}", "tags": list(TAGS[i % 4:i % 4 + i % 3]),
            "placed_at": _utc_text(base + dt.timedelta(milliseconds=i)), "paid": i % 2 == 0}


def orders(count: int, bad_every: int, shape: str = "flat") -> list[bytes]:
    base = dt.datetime(2026, 11, 24, tzinfo=dt.UTC)
    values = []
    for i in range(count):
        if shape == "nested":
            record = nested_order(i, base)
        else:
            record = {**order(i, base)}
            record["placed_at"] = record["placed_at"].isoformat()  # type: ignore[attr-defined]
        if bad_every and i % bad_every == 0:
            record["id"] = f"#{i}"
        values.append(json.dumps(record).encode())
    return values


def inlet_decode(values: list[bytes], ddl: str) -> tuple[float, float, int]:
    """Inlet's records/s (wall and CPU) on one core, batches as a task gets them, and how many it quarantined."""
    from spark_jobs.decode import json_schema
    from spark_jobs.formats.json_values import JsonValues

    decoder = JsonValues(json_schema(ddl), "UTC")
    batches = [pa.array(values[i:i + BATCH], pa.binary()) for i in range(0, len(values), BATCH)]
    decoder.decode(batches[0])  # builds the plan, as a task's first batch does
    wall = cpu = float("inf")
    for _ in range(ROUNDS):
        began, cpu_began = time.perf_counter(), time.process_time()
        quarantined = 0
        for batch in batches:
            _, reasons = decoder.decode(batch)
            quarantined += len(reasons) - reasons.null_count
        wall, cpu = min(wall, time.perf_counter() - began), min(cpu, time.process_time() - cpu_began)
    return len(values) / wall, len(values) / cpu, quarantined


def spark_decode(spark: Any, values: list[bytes], ddl: str) -> tuple[float, float]:
    """Spark's ``from_json`` records/s on one core (``parse_json`` for the whole value as a VARIANT):
    inside the JVM alone, and with the rows back as Arrow."""
    from spark_jobs.kafka_source import kafka_struct
    from tests.formats.spark_from_json import from_json

    n = len(values)
    table = pa.table({"key": pa.nulls(n, pa.binary()), "value": pa.array(values, pa.binary()),
                      "topic": pa.array(["t"] * n), "partition": pa.array([0] * n, pa.int32()),
                      "offset": pa.array(range(n), pa.int64()), "timestamp": pa.nulls(n, pa.timestamp("us", "UTC")),
                      "timestampType": pa.array([0] * n, pa.int32())})
    records = spark.createDataFrame(table, kafka_struct(False)).cache()
    records.count()
    decode = _parse_whole if ddl == DDL["variant"] else from_json
    decode(records.limit(1000), ddl).write.format("noop").mode("overwrite").save()
    jvm_s = arrow_s = float("inf")
    for _ in range(ROUNDS):
        began = time.perf_counter()
        decode(records, ddl).write.format("noop").mode("overwrite").save()
        jvm_s = min(jvm_s, time.perf_counter() - began)
        began = time.perf_counter()
        decode(records, ddl).toArrow()
        arrow_s = min(arrow_s, time.perf_counter() - began)
    records.unpersist()
    return n / jvm_s, n / arrow_s


def _parse_whole(records: Any, _: str) -> Any:
    """The whole value as a VARIANT by Spark's own parser."""
    return records.selectExpr("parse_json(CAST(value AS STRING)) AS value")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--bad-every", type=int, default=0)
    parser.add_argument("--shapes", default="flat,nested", help="comma-separated: flat, nested, variant")
    parser.add_argument("--inlet-only", action="store_true", help="skip Spark's from_json")
    args = parser.parse_args()
    shapes = args.shapes.split(",")
    if not set(shapes) <= set(DDL):
        parser.error(f"--shapes: one or more of {', '.join(DDL)}")

    from pyspark.sql import SparkSession

    # Spark parses the DDL (``json_schema``) even where it does not decode
    spark = (SparkSession.builder.master("local[1]").appName("json-decode-bench").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").config("spark.driver.memory", "4g")
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    if "variant" in shapes:  # the typed decode of the same orders, just before it
        shapes = [s for s in shapes if s != "nested"]
        shapes.insert(shapes.index("variant"), "nested")
    typed: dict[str, float] = {}
    try:
        for shape in shapes:
            values = orders(args.messages, args.bad_every, VALUES[shape])
            print(f"{shape}: {args.messages:,} JSON orders, {sum(map(len, values)) / len(values):.0f} B on average")
            inlet, inlet_cpu, quarantined = inlet_decode(values, DDL[shape])
            typed[shape] = inlet
            print(f"{shape}: inlet json_values: {inlet:,.0f} records/s ({args.messages / inlet:.2f}s wall, "
                  f"{inlet_cpu:,.0f} records/s of CPU, {quarantined:,} quarantined)")
            if shape == "variant":
                print(f"variant: ratio inlet VARIANT / inlet typed columns (nested): {inlet / typed['nested']:.2f}")
            if args.inlet_only:
                continue
            jvm, arrow = spark_decode(spark, values, DDL[shape])
            spark_name = "parse_json" if shape == "variant" else "from_json"
            print(f"{shape}: spark {spark_name}, in the JVM: {jvm:,.0f} records/s ({args.messages / jvm:.2f}s)")
            print(f"{shape}: spark {spark_name}, rows back to Python as Arrow: {arrow:,.0f} records/s "
                  f"({args.messages / arrow:.2f}s)")
            print(f"{shape}: ratio inlet / spark {spark_name}: {inlet / jvm:.2f} (JVM alone), "
                  f"{inlet / arrow:.2f} (with the rows back)")
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
