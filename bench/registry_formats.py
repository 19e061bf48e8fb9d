"""Benchmark: Avro records from a Schema Registry, end to end into Delta, against the same data as JSON.

Produces the same N order records twice into sandbox topics of P partitions: once as Avro in the
Confluent wire format (its schema registered in a real Karapace registry), once as JSON text. Then
the warm engine ingests each topic into Delta (Avro: decoded on Arrow in the executors; JSON:
Spark's ``from_json`` with the equivalent DDL schema), after a one-record warm-up run of each, and
prints both rates and their ratio, measured in the same run.

The registry keeps its schemas in a real Kafka broker, so this needs the team's Kafka distribution
and the registry script (``../shared/kafka`` and ``../shared/schema-registry``):

    .venv/bin/python bench/registry_formats.py --kafka-home ../shared/kafka --registry-home ../shared/schema-registry \
        [--messages 1000000] [--partitions 64] [--master local[2]]
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

import fastavro
from confluent_kafka import Consumer, Producer, TopicPartition

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sandbox.cluster import SandboxCluster
from spark_jobs.spec import RunResult, RunSpec
from tests.fixtures.kafka_broker import RealKafka, kafka_home
from tests.fixtures.schema_registry import RealRegistry
from worker.launch import SparkSubmitSettings, WarmLauncher

ORDER = {"type": "record", "name": "Order", "namespace": "bench", "fields": [
    {"name": "id", "type": "long"}, {"name": "customer", "type": "string"}, {"name": "amount", "type": "double"},
    {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID", "SHIPPED"]}},
    {"name": "placed_at", "type": {"type": "long", "logicalType": "timestamp-millis"}}, {"name": "qty", "type": "int"},
]}
ORDER_DDL = "id BIGINT, customer STRING, amount DOUBLE, status STRING, placed_at TIMESTAMP, qty INT"
STATUSES = ("NEW", "PAID", "SHIPPED")


def order(i: int, base: dt.datetime) -> dict[str, object]:
    return {"id": i, "customer": f"customer-{i % 5000:05d}", "amount": round(i * 0.37 % 1000, 2),
            "status": STATUSES[i % 3], "placed_at": base + dt.timedelta(milliseconds=i), "qty": i % 17}


def produce(bootstrap: str, topic: str, values: list[bytes], partitions: int) -> dict[str, tuple[int, int]]:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 10000, "acks": "1"})
    for i, value in enumerate(values):
        while True:
            try:
                producer.produce(topic, value=value, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(120)
    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench"})
    ranges = {str(p): probe.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in range(partitions)}
    probe.close()
    return ranges


def spec_for(bootstrap: str, topic: str, ranges: dict[str, tuple[int, int]], uri: str, source: dict[str, object]) -> RunSpec:
    pipeline = uuid.uuid4().hex[:8]
    return RunSpec.model_validate({
        "run_id": f"bench-{uuid.uuid4().hex[:6]}", "pipeline_id": pipeline,
        "txn": {"app_id": f"inlet-pipeline-{pipeline}", "version": 1},
        "source": {"kafka_config": {"bootstrap.servers": bootstrap}, "ranges": {topic: ranges}, **source},
        "target": {"type": "delta", "uri": uri, "quarantine_uri": f"{uri}__quarantine"},
    })


def timed(launcher: WarmLauncher, spec: RunSpec, workdir: Path) -> tuple[RunResult, float]:
    began = time.monotonic()
    result = launcher.launch(spec, workdir=workdir, timeout_s=1800)
    assert result.status == "succeeded", result.error
    return result, time.monotonic() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=64)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--kafka-home", required=True, help="an Apache Kafka distribution, for the registry's own topic")
    parser.add_argument("--registry-home", required=True, help="the folder holding the registry script")
    args = parser.parse_args()
    os.environ["INLET_TEST_KAFKA_HOME"] = args.kafka_home
    home = kafka_home()
    assert home is not None

    with tempfile.TemporaryDirectory() as tmp, SandboxCluster(brokers=1) as cluster:
        broker = RealKafka(home, Path(tmp, "kafka")).start()
        registry = RealRegistry(Path(args.registry_home).resolve(), Path(tmp, "registry"), broker.bootstrap_servers,
                                topic="_schemas-bench").start()
        launcher = WarmLauncher(SparkSubmitSettings(master=args.master))
        try:
            bootstrap = cluster.bootstrap_servers
            schema_id = registry.register("bench-avro-value", json.dumps(ORDER))
            parsed = fastavro.parse_schema(ORDER)
            base = dt.datetime(2026, 11, 24, tzinfo=dt.UTC)
            began = time.monotonic()
            avro_values, json_values = [], []
            header = b"\x00" + schema_id.to_bytes(4, "big")
            for i in range(args.messages):
                record = order(i, base)
                buffer = io.BytesIO()
                fastavro.schemaless_writer(buffer, parsed, record)
                avro_values.append(header + buffer.getvalue())
                json_values.append(json.dumps({**record, "placed_at": record["placed_at"].isoformat()}).encode())  # type: ignore[attr-defined]
            print(f"encoded {args.messages:,} orders: Avro {sum(map(len, avro_values)) / args.messages:.0f} B, "
                  f"JSON {sum(map(len, json_values)) / args.messages:.0f} B on average ({time.monotonic() - began:.1f}s)")
            sources = {
                "avro": {"value_format": "avro", "registry": {"url": registry.url},
                         "value_subject": {"subject": "bench-avro-value"}},
                "json": {"value_format": "json", "schema": ORDER_DDL},
            }
            ranges = {}
            for name, values in (("avro", avro_values), ("json", json_values)):
                cluster.create_topic(f"bench-{name}", args.partitions)
                ranges[name] = produce(bootstrap, f"bench-{name}", values, args.partitions)
            rates = {}
            for name, source in sources.items():
                topic = f"bench-{name}"
                first = {"0": (ranges[name]["0"][0], ranges[name]["0"][0] + 1)}
                timed(launcher, spec_for(bootstrap, topic, first, f"{tmp}/{name}-warm-up", source), Path(tmp, "w"))
                result, wall_s = timed(launcher, spec_for(bootstrap, topic, ranges[name], f"{tmp}/{name}-all", source),
                                       Path(tmp, "w"))
                assert (result.rows_written, result.rows_quarantined) == (args.messages, 0), result
                rates[name] = args.messages / wall_s
                print(f"{name}: {rates[name]:,.0f} records/s end to end ({wall_s:.1f}s; process "
                      f"{result.timings.process_s:.1f}s, commit {result.timings.commit_s:.2f}s)")
            print(f"ratio Avro / JSON, end to end: {rates['avro'] / rates['json']:.2f}")
        finally:
            launcher.close()
            registry.stop()
            broker.stop()


if __name__ == "__main__":
    main()
