"""What the Kafka-to-Delta benchmarks share: producing a topic's records, the plain confluent-kafka reader
they are measured against, a run's spec, a timed launch, and the order records of the format benchmarks.

Imported by the scripts beside it (``bench/spark_ingest.py``, ``bench/registry_formats.py``,
``bench/production_path.py``, ``bench/seed_path.py``), which run from the checkout's root.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import fastavro
from confluent_kafka import Consumer, Producer, TopicPartition

from spark_jobs.spec import RunResult, RunSpec
from worker.launch import Launcher

Ranges = dict[str, tuple[int, int]]  # partition (as the spec names it) -> [start, end)

ORDER = {"type": "record", "name": "Order", "namespace": "bench", "fields": [
    {"name": "id", "type": "long"}, {"name": "customer", "type": "string"}, {"name": "amount", "type": "double"},
    {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID", "SHIPPED"]}},
    {"name": "placed_at", "type": {"type": "long", "logicalType": "timestamp-millis"}}, {"name": "qty", "type": "int"},
]}
ORDER_DDL = "id BIGINT, customer STRING, amount DOUBLE, status STRING, placed_at TIMESTAMP, qty INT"
STATUSES = ("NEW", "PAID", "SHIPPED")


def order(i: int, base: dt.datetime) -> dict[str, Any]:
    return {"id": i, "customer": f"customer-{i % 5000:05d}", "amount": round(i * 0.37 % 1000, 2),
            "status": STATUSES[i % 3], "placed_at": base + dt.timedelta(milliseconds=i), "qty": i % 17}


def encode_orders(count: int, schema_id: int) -> tuple[list[bytes], list[bytes]]:
    """``count`` orders twice: as Avro in the Confluent wire format (``schema_id``'s), and as JSON text."""
    parsed = fastavro.parse_schema(ORDER)
    base = dt.datetime(2026, 11, 24, tzinfo=dt.UTC)
    header = b"\x00" + schema_id.to_bytes(4, "big")
    avro_values, json_values = [], []
    for i in range(count):
        record = order(i, base)
        buffer = io.BytesIO()
        fastavro.schemaless_writer(buffer, parsed, record)
        avro_values.append(header + buffer.getvalue())
        json_values.append(json.dumps({**record, "placed_at": record["placed_at"].isoformat()}).encode())
    return avro_values, json_values


def produce(bootstrap: str, topic: str, values: Sequence[bytes], partitions: int,
            keys: Sequence[bytes] | None = None) -> Ranges:
    """``values`` (with ``keys``, if given) round-robin over the topic's partitions; each partition's range."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 10000, "acks": "1"})
    for i, value in enumerate(values):
        while True:
            try:
                producer.produce(topic, key=keys[i] if keys is not None else None, value=value, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(120)
    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench"})
    ranges = {str(p): probe.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in range(partitions)}
    probe.close()
    return ranges


def plain_read(bootstrap: str, topic: str, ranges: Ranges, config: dict[str, Any] | None = None) -> int:
    """The reference: one consumer assigned every partition's range, reading to the end offsets (no
    decoding); librdkafka's defaults, but for ``config``."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-plain", "enable.auto.commit": False,
                         "auto.offset.reset": "error", **(config or {})})
    consumer.assign([TopicPartition(topic, int(p), start) for p, (start, _) in ranges.items()])
    remaining, count = sum(end - start for start, end in ranges.values()), 0
    while remaining:
        for message in consumer.consume(min(10_000, remaining), timeout=1.0):
            if message.error() is not None:
                raise RuntimeError(str(message.error()))
            _ = (message.key(), message.value(), message.offset(), message.timestamp())
            count += 1
            remaining -= 1
    consumer.close()
    return count


def timed_plain_read(bootstrap: str, topic: str, ranges: Ranges, config: dict[str, Any] | None = None) -> float:
    """Records per second of ``plain_read`` over ``ranges``."""
    total = sum(end - start for start, end in ranges.values())
    began = time.monotonic()
    assert plain_read(bootstrap, topic, ranges, config) == total
    return total / (time.monotonic() - began)


def spec_for(bootstrap: str, topic: str, ranges: Ranges, uri: str, *, quarantine: bool = False, **source: Any) -> RunSpec:
    pipeline = uuid.uuid4().hex[:8]
    target: dict[str, Any] = {"type": "delta", "uri": uri}
    if quarantine:
        target["quarantine_uri"] = f"{uri}__quarantine"
    return RunSpec.model_validate({
        "run_id": f"bench-{uuid.uuid4().hex[:6]}", "pipeline_id": pipeline,
        "txn": {"app_id": f"inlet-pipeline-{pipeline}", "version": 1},
        "source": {"kafka_config": {"bootstrap.servers": bootstrap}, "ranges": {topic: ranges}, **source},
        "target": target,
        "egress": {"allow": ["127.0.0.0/8"]},  # the bench's registry is on loopback, which the policy denies by default
    })


def timed(launcher: Launcher, spec: RunSpec, workdir: Path) -> tuple[RunResult, float]:
    """The result of a launch and its wall time (on a warm engine, the first one's includes its start)."""
    began = time.monotonic()
    result = launcher.launch(spec, workdir=workdir, timeout_s=1800)
    assert result.status == "succeeded", result.error
    return result, time.monotonic() - began


@contextmanager
def broker_and_registry(kafka_home: str, registry_home: str, workdir: Path, schemas_topic: str) -> Iterator[tuple[Any, Any]]:
    """A real Kafka broker (``kafka_home``, the team's distribution) and a Schema Registry on it, both
    stopped at the end: ``tests/fixtures``' ``RealKafka`` and ``RealRegistry``."""
    from tests.fixtures.kafka_broker import RealKafka
    from tests.fixtures.kafka_broker import kafka_home as find_kafka_home
    from tests.fixtures.schema_registry import RealRegistry

    os.environ["INLET_TEST_KAFKA_HOME"] = kafka_home
    home = find_kafka_home()
    assert home is not None
    broker = RealKafka(home, workdir / "kafka").start()
    try:
        registry = RealRegistry(Path(registry_home).resolve(), workdir / "registry", broker.bootstrap_servers,
                                topic=schemas_topic).start()
        try:
            yield broker, registry
        finally:
            registry.stop()
    finally:
        broker.stop()
