"""Benchmark: json values decoded by Inlet on Arrow against Spark's ``from_json``, same values, same run.

The values are ``bench/registry_formats.py``'s JSON orders (about 140 bytes each). Inlet's decoder
(``spark_jobs.formats.json_values``) takes them in batches as the executors get them (20,000, the
engine's Arrow batch size) on one core. Spark decodes the same values with the expression json
pipelines run today (``spark_jobs.decode.decode``) in a one-core local session, twice: inside the
JVM alone (the values cached as rows, the result dropped by the ``noop`` sink: ``from_json``'s own
speed), and with the rows brought back to Python as Arrow (what Inlet's current path pays).

    .venv/bin/python bench/json_decode.py [--messages 1000000] [--bad-every 0]

``--bad-every N`` makes every Nth order not JSON of the schema (a string where the id belongs), to
show the exact path's cost. Each figure is the best of two rounds.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from pathlib import Path

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.registry_formats import ORDER_DDL, order

BATCH = 20_000
ROUNDS = 2  # the best of each: JIT and caches warm


def orders(count: int, bad_every: int) -> list[bytes]:
    base = dt.datetime(2026, 11, 24, tzinfo=dt.UTC)
    values = []
    for i in range(count):
        record: dict[str, object] = {**order(i, base)}
        record["placed_at"] = record["placed_at"].isoformat()  # type: ignore[attr-defined]
        if bad_every and i % bad_every == 0:
            record["id"] = f"#{i}"
        values.append(json.dumps(record).encode())
    return values


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--bad-every", type=int, default=0)
    args = parser.parse_args()

    from pyspark.sql import SparkSession

    from spark_jobs.decode import decode, json_schema
    from spark_jobs.formats.json_values import JsonValues
    from spark_jobs.kafka_source import kafka_struct
    from spark_jobs.spec import KafkaSource

    values = orders(args.messages, args.bad_every)
    print(f"{args.messages:,} JSON orders, {sum(map(len, values)) / len(values):.0f} B on average")
    spark = (SparkSession.builder.master("local[1]").appName("json-decode-bench").config("spark.ui.enabled", "false")
             .config("spark.driver.memory", "4g")
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    try:
        decoder = JsonValues(json_schema(ORDER_DDL), "UTC")
        batches = [pa.array(values[i:i + BATCH], pa.binary()) for i in range(0, len(values), BATCH)]
        decoder.decode(batches[0])  # builds the plan, as a task's first batch does
        inlet_s = inlet_cpu = float("inf")
        for _ in range(ROUNDS):
            began, cpu = time.perf_counter(), time.process_time()
            quarantined = 0
            for batch in batches:
                _, reasons = decoder.decode(batch)
                quarantined += len(reasons) - reasons.null_count
            inlet_s, inlet_cpu = min(inlet_s, time.perf_counter() - began), min(inlet_cpu, time.process_time() - cpu)
        inlet = args.messages / inlet_s
        print(f"inlet json_values: {inlet:,.0f} records/s ({inlet_s:.2f}s wall, {args.messages / inlet_cpu:,.0f} "
              f"records/s of CPU, {quarantined:,} quarantined)")

        source = KafkaSource.model_validate({"kafka_config": {"bootstrap.servers": "unused:9092"}, "ranges": {},
                                             "value_format": "json", "schema": ORDER_DDL})
        n = len(values)
        table = pa.table({"key": pa.nulls(n, pa.binary()), "value": pa.array(values, pa.binary()),
                          "topic": pa.array(["t"] * n), "partition": pa.array([0] * n, pa.int32()),
                          "offset": pa.array(range(n), pa.int64()), "timestamp": pa.nulls(n, pa.timestamp("us", "UTC")),
                          "timestampType": pa.array([0] * n, pa.int32())})
        records = spark.createDataFrame(table, kafka_struct(False)).cache()
        records.count()
        decode(records.limit(1000), source, "warm-up").write.format("noop").mode("overwrite").save()
        jvm_s = arrow_s = float("inf")
        for _ in range(ROUNDS):
            began = time.perf_counter()
            decode(records, source, "bench").write.format("noop").mode("overwrite").save()
            jvm_s = min(jvm_s, time.perf_counter() - began)
            began = time.perf_counter()
            decode(records, source, "bench").toArrow()
            arrow_s = min(arrow_s, time.perf_counter() - began)
        jvm, arrow = args.messages / jvm_s, args.messages / arrow_s
        print(f"spark from_json, in the JVM: {jvm:,.0f} records/s ({jvm_s:.2f}s)")
        print(f"spark from_json, rows back to Python as Arrow: {arrow:,.0f} records/s ({arrow_s:.2f}s)")
        print(f"ratio inlet / spark from_json: {inlet / jvm:.2f} (JVM alone), {inlet / arrow:.2f} (with the rows back)")
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
