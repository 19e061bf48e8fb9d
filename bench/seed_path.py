"""Benchmark: Inlet beside the design's own path (Spark's Kafka source and delta-spark) and a plain reader.

On a real Kafka broker, the same ranges of the same topics are read three ways in one run:
  (a) plain: one confluent-kafka consumer reading every partition's range, read only (no decoding),
      with librdkafka's defaults; (a') the same with the fetch backoff Inlet's reader sets;
  (b) Inlet: the warm engine through the worker's launcher (as bench/spark_ingest.py), into Delta;
  (c) the design's path, the code a Spark user writes instead of adopting Inlet:
      ``spark.read.format("kafka")`` with ``startingOffsets``/``endingOffsets`` JSON per partition,
      decoded (raw: not; JSON: ``from_json`` with the pipeline's DDL schema; Avro: spark-avro's
      ``from_avro`` on the value after the registry's 5-byte header), then
      ``df.write.format("delta")`` with delta-spark's idempotent-write options (``txnAppId``/``txnVersion``).
(b) and (c) on the same ``local[2]``, each after a one-record warm-up, each into a fresh table. Each of
(a), (b) and (c) then makes one whole pass that is not measured (its time is printed), and is measured
as the best of the two passes after it: the first big runs after a JVM starts also compile its code
(a new engine's JIT took 0.2-0.7 s of CPU in each of its first runs, docs/performance.md), the
broker's JVM included. (a') is measured after (a)'s three passes, as the best of two. After the
clocks stop, DuckDB's delta extension (delta-kernel-rs, a reader neither path writes with) counts
every table's rows and sums their offsets, which must be the ranges' records and offsets.
Workloads: raw 1M × 200 B on 64 partitions; the same orders as JSON and as Avro (a real Schema
Registry) as bench/registry_formats.py uses. Prints records/s and every ratio of issue 35's table.
Then, unless ``--no-sandbox``, whether Spark's Java Kafka client can read the sandbox (librdkafka's
mock cluster), ``make demo``'s Kafka: each step reported as it went.

Needs the jars ``make setup`` caches, the team's Kafka distribution and the registry script:

    .venv/bin/python bench/seed_path.py --kafka-home ../shared/kafka --registry-home ../shared/schema-registry \\
        [--messages 1000000] [--orders 1000000] [--partitions 64] [--master local[2]] [--formats raw,json,avro]
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sandbox.cluster import SandboxCluster
from spark_jobs import jars
from spark_jobs.kafka_source import FETCH_QUEUE_BACKOFF_MS
from worker.launch import SparkSubmitSettings, WarmLauncher
from worker.launch.submit import LEAN_CONF

from kafka_bench import (
    ORDER,
    ORDER_DDL,
    Ranges,
    broker_and_registry,
    encode_orders,
    produce,
    spec_for,
    timed,
    timed_plain_read,
)

COORDINATES = ("topic", "partition", "offset", "timestamp", "timestampType")
# (a'): the plain reader with the one librdkafka setting Inlet's reader changes for speed, to tell that
# setting's share of Inlet's figure from the rest.
TUNED = {"fetch.queue.backoff.ms": FETCH_QUEUE_BACKOFF_MS}


def design_session(master: str, driver_memory: str) -> Any:
    """A SparkSession as a Spark user starts one for the design's path: the cached jars, Delta's SQL conf."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master).appName("seed-path-design")
    conf = {**LEAN_CONF, **jars.DELTA_SQL_CONF, "spark.sql.session.timeZone": "UTC", "spark.driver.memory": driver_memory,
            "spark.jars": ",".join(str(jar) for jar in jars.cached_jars())}
    for key, value in conf.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def offsets_json(topic: str, ranges: Ranges, end: bool) -> str:
    return json.dumps({topic: {p: r[1] if end else r[0] for p, r in ranges.items()}})


def design_rows(spark: Any, bootstrap: str, topic: str, ranges: Ranges, fmt: str) -> Any:
    """The design's path up to the write: the Kafka ranges, decoded."""
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro

    assign = json.dumps({topic: [int(p) for p in ranges]})
    reader = spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("assign", assign)
    records = (reader.option("startingOffsets", offsets_json(topic, ranges, end=False))
               .option("endingOffsets", offsets_json(topic, ranges, end=True)).load())
    run = F.lit(f"design-{uuid.uuid4().hex[:6]}").alias("_inlet_run_id")
    if fmt == "raw":
        return records.select("key", "value", *COORDINATES, run)
    if fmt == "json":
        parsed = F.from_json(F.col("value").cast("string"), ORDER_DDL).alias("v")
    else:
        parsed = from_avro(F.expr("substring(value, 6)"), json.dumps(ORDER)).alias("v")
    return records.select(F.col("key").cast("string").alias("key"), parsed, *COORDINATES, run).select(
        "key", "v.*", *COORDINATES, "_inlet_run_id")


def design_write(spark: Any, bootstrap: str, topic: str, ranges: Ranges, fmt: str, path: str) -> None:
    """The design's path for one run: into a fresh Delta table, once per (txnAppId, txnVersion)."""
    (design_rows(spark, bootstrap, topic, ranges, fmt).write.format("delta").mode("append")
     .option("txnAppId", f"seed-path-{uuid.uuid4().hex[:8]}").option("txnVersion", 1).save(path))


def measure_design(spark: Any, bootstrap: str, topic: str, ranges: Ranges, fmt: str, tmp: str) -> tuple[float, float]:
    """Records/s of the design's path into Delta (the best of two runs after a first one, each into a
    fresh table), then of its read and decode alone (Spark's ``noop`` sink; measured last, so with the
    JVM warmer than the writes had it)."""
    total = sum(end - start for start, end in ranges.values())
    warm_up = {"0": (ranges["0"][0], ranges["0"][0] + 1)}
    design_write(spark, bootstrap, topic, warm_up, fmt, f"{tmp}/design-{fmt}-warm-up")
    began = time.monotonic()
    design_write(spark, bootstrap, topic, ranges, fmt, f"{tmp}/design-{fmt}-first")
    print(f"      the design's first whole pass (not measured): {time.monotonic() - began:.2f}s")
    write_s = float("inf")
    for table in ("all", "again"):  # the best of two, as Inlet's
        began = time.monotonic()
        design_write(spark, bootstrap, topic, ranges, fmt, f"{tmp}/design-{fmt}-{table}")
        write_s = min(write_s, time.monotonic() - began)
    began = time.monotonic()
    design_rows(spark, bootstrap, topic, ranges, fmt).write.format("noop").mode("overwrite").save()
    return total / write_s, total / (time.monotonic() - began)


def measure_inlet(launcher: WarmLauncher, bootstrap: str, topic: str, ranges: Ranges, source: dict[str, Any], fmt: str,
                  tmp: str) -> float:
    """Records/s of Inlet's best of two runs of the whole ranges (each into a fresh table), after a
    one-record run and a first whole run: the first big runs after an engine starts also pay for its
    JVM's warm-up."""
    total = sum(end - start for start, end in ranges.values())
    warm_up = {"0": (ranges["0"][0], ranges["0"][0] + 1)}
    decodes = fmt != "raw"
    _, one_s = timed(launcher, spec_for(bootstrap, topic, warm_up, f"{tmp}/inlet-{fmt}-warm-up", quarantine=decodes,
                                        **source), Path(tmp, "w"))
    first, first_s = timed(launcher, spec_for(bootstrap, topic, ranges, f"{tmp}/inlet-{fmt}-first", quarantine=decodes,
                                              **source), Path(tmp, "w"))
    assert (first.rows_written, first.rows_quarantined) == (total, 0), first
    walls = []
    for table in ("all", "again"):
        result, wall_s = timed(launcher, spec_for(bootstrap, topic, ranges, f"{tmp}/inlet-{fmt}-{table}", quarantine=decodes,
                                                  **source), Path(tmp, "w"))
        assert (result.rows_written, result.rows_quarantined) == (total, 0), result
        t = result.timings
        print(f"      Inlet's {wall_s:.2f}s: tasks {t.process_s:.2f}s, commit {t.commit_s:.2f}s, the rest (spec, "
              f"watermarks, plan, result) {wall_s - t.process_s - t.commit_s:.2f}s")
        walls.append(wall_s)
    print(f"      (before them, a one-record run took {one_s:.2f}s and a first whole run, not measured, {first_s:.2f}s)")
    return total / min(walls)


def duckdb_rows(path: str) -> tuple[int, int]:
    """The table's row count and sum of offsets as DuckDB's delta extension reads it (delta-kernel-rs: no code shared with
    delta-rs or delta-spark), loaded from the duckdb-ext-delta wheel's file (no download)."""
    import duckdb
    import duckdb_ext

    extensions = Path(next(iter(duckdb_ext.__path__))) / "extensions" / f"v{duckdb.__version__}"
    connection = duckdb.connect(config={"allow_unsigned_extensions": "true", "autoinstall_known_extensions": "false",
                                        "autoload_known_extensions": "false"})
    try:
        connection.execute(f"LOAD '{next(extensions.glob('*/delta.duckdb_extension'))}'")
        row = connection.execute('SELECT count(*), sum("offset") FROM delta_scan(?)', [path]).fetchone()
        assert row is not None
        return int(row[0]), int(row[1])
    finally:
        connection.close()


def sandbox_probe(spark: Any) -> None:
    """Whether Spark's Java Kafka client reads from librdkafka's mock cluster, step by step."""
    from pyspark.sql import functions as F

    print("\nSpark's Java Kafka client against the sandbox (librdkafka's mock cluster):")
    with SandboxCluster(brokers=1) as cluster:
        topic = "probe"
        cluster.create_topic(topic, 4)
        ranges = produce(cluster.bootstrap_servers, topic, [f"v{i}".encode() for i in range(400)], 4)
        fast = {"kafka.default.api.timeout.ms": "15000", "kafka.request.timeout.ms": "10000", "fetchOffset.numRetries": "1"}
        steps = [
            ("metadata and ListOffsets (earliest/latest), then fetch", {"startingOffsets": "earliest", "endingOffsets": "latest"}),
            ("exact ranges (offsets JSON), fetch", {"startingOffsets": offsets_json(topic, ranges, end=False),
                                                    "endingOffsets": offsets_json(topic, ranges, end=True)}),
        ]
        # Spark 4's default, offsets through the AdminClient. The older KafkaConsumer way
        # (spark.sql.streaming.kafka.useDeprecatedOffsetFetching=true) is not probed: against the mock
        # cluster its consumer loops on "bootstrap broker disconnected" and never returns (seen for 10 min).
        for name, options in steps:
            began = time.monotonic()
            try:
                reader = spark.read.format("kafka").option("kafka.bootstrap.servers", cluster.bootstrap_servers)
                for key, value in {**fast, **options, "subscribe": topic}.items():
                    reader = reader.option(key, value)
                rows = reader.load().groupBy("partition").agg(F.count("*").alias("n")).collect()
                got = sorted((r["partition"], r["n"]) for r in rows)
                want = sorted((int(p), end - start) for p, (start, end) in ranges.items())
                verdict = "works, rows exact" if got == want else f"rows differ: {got} != {want}"
            except Exception as exc:  # noqa: BLE001 — the probe reports whatever failed
                verdict = "fails: " + _root_cause(exc)
            print(f"  {name}: {verdict} ({time.monotonic() - began:.1f}s)")


def _root_cause(exc: Exception) -> str:
    text = str(exc)
    causes = [line.strip() for line in text.splitlines() if "Caused by:" in line or "Exception:" in line]
    return (causes[-1] if causes else text.splitlines()[0] if text else type(exc).__name__)[:300]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000, help="raw records of 200 B")
    parser.add_argument("--orders", type=int, default=1_000_000, help="order records, as JSON and as Avro")
    parser.add_argument("--partitions", type=int, default=64)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--formats", default="raw,json,avro")
    parser.add_argument("--kafka-home", required=True, help="an Apache Kafka distribution (../shared/kafka)")
    parser.add_argument("--registry-home", required=True, help="the folder holding the registry script")
    parser.add_argument("--no-sandbox", action="store_true", help="skip the sandbox probe")
    args = parser.parse_args()
    formats = args.formats.split(",")
    # A timeout's SIGTERM still stops the broker, the registry and the engine (the ``finally`` blocks).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    settings = SparkSubmitSettings(master=args.master)

    with (tempfile.TemporaryDirectory() as tmp,
          broker_and_registry(args.kafka_home, args.registry_home, Path(tmp), "_schemas-seed-path") as (broker, registry)):
        launcher = WarmLauncher(settings)
        try:
            bootstrap = broker.bootstrap_servers
            print(f"{broker.version} on {bootstrap}; Inlet and the design's path on {args.master}")
            schema_id = registry.register("seed-avro-value", json.dumps(ORDER))
            avro_values, json_values = encode_orders(args.orders, schema_id)
            values = {"raw": [b"x" * 200] * args.messages, "json": json_values, "avro": avro_values}
            sources: dict[str, dict[str, Any]] = {
                "raw": {},
                "json": {"value_format": "json", "schema": ORDER_DDL},
                "avro": {"value_format": "avro", "registry": {"url": registry.url},
                         "value_subject": {"subject": "seed-avro-value"}},
            }
            ranges = {}
            for fmt in formats:
                broker.create_topic(f"seed-{fmt}", args.partitions)
                began = time.monotonic()
                ranges[fmt] = produce(bootstrap, f"seed-{fmt}", values[fmt], args.partitions)
                size = sum(map(len, values[fmt])) / len(values[fmt])
                print(f"produced {len(values[fmt]):,} {fmt} records of {size:.0f} B on average into {args.partitions} "
                      f"partitions ({time.monotonic() - began:.1f}s)")
            del values, avro_values, json_values

            spark = design_session(args.master, settings.driver_memory or "1g")
            rates: dict[tuple[str, str], float] = {}
            for fmt in formats:
                topic = f"seed-{fmt}"
                first = timed_plain_read(bootstrap, topic, ranges[fmt])
                print(f"      the plain reader's first pass (not measured): {first:,.0f} records/s")
                rates[fmt, "plain"] = max(timed_plain_read(bootstrap, topic, ranges[fmt]) for _ in range(2))
                rates[fmt, "tuned"] = max(timed_plain_read(bootstrap, topic, ranges[fmt], TUNED) for _ in range(2))
                rates[fmt, "inlet"] = measure_inlet(launcher, bootstrap, topic, ranges[fmt], sources[fmt], fmt, tmp)
                rates[fmt, "design"], read_only = measure_design(spark, bootstrap, topic, ranges[fmt], fmt, tmp)
                # Every table read back after the clocks stopped, by a reader neither path wrote with.
                total = sum(end - start for start, end in ranges[fmt].values())
                offsets = sum((start + end - 1) * (end - start) // 2 for start, end in ranges[fmt].values())
                tables = [f"{name}-{fmt}-{run}" for name in ("inlet", "design") for run in ("first", "all", "again")]
                read = {table: duckdb_rows(f"{tmp}/{table}") for table in tables}
                assert read == dict.fromkeys(tables, (total, offsets)), (read, total, offsets)
                print(f"{fmt}: (a) plain {rates[fmt, 'plain']:,.0f} (a') with Inlet's fetch backoff "
                      f"{rates[fmt, 'tuned']:,.0f}  (b) Inlet {rates[fmt, 'inlet']:,.0f}  (c) design's path "
                      f"{rates[fmt, 'design']:,.0f} records/s; DuckDB reads {total:,} rows and their offsets from each table")
                print(f"      the design's read and decode alone (noop sink, after its write): {read_only:,.0f} records/s")

            print("\nissue 35's table (same run):")
            for fmt, over in (("raw", "design"), ("json", "design"), ("json", "plain"), ("avro", "plain"),
                              ("raw", "plain"), ("avro", "design")):
                if fmt in formats:
                    print(f"  {fmt:4} Inlet / {over:14}: {rates[fmt, 'inlet'] / rates[fmt, over]:.2f}")
            for fmt in formats:
                print(f"  {fmt:4} design / plain         : {rates[fmt, 'design'] / rates[fmt, 'plain']:.2f}")
            print("beside the plain reader with Inlet's fetch backoff (a'):")
            for fmt in formats:
                print(f"  {fmt:4} Inlet / plain (a')     : {rates[fmt, 'inlet'] / rates[fmt, 'tuned']:.2f}")
            if not args.no_sandbox:
                sandbox_probe(spark)
            spark.stop()
        finally:
            launcher.close()


if __name__ == "__main__":
    main()
