"""Benchmark: the Spark job's steady read-and-write rate against one plain confluent-kafka reader.

Produces ~1M 200-byte messages into a sandbox topic of 64 partitions (the sandbox keeps at most
100k messages or ~5 MiB per partition), then times
  (a) one process reading the same ranges with confluent-kafka (the baseline), and
  (b) the Spark job writing them into Delta through the launcher (what production runs),
and a one-record run, whose duration is the job's fixed start-up cost.

    .venv/bin/python bench/spark_ingest.py [--messages 1000000] [--partitions 32] [--master local[2]]
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from sandbox.cluster import SandboxCluster
from spark_jobs.spec import RunSpec
from worker.launcher import SparkSubmitSettings, launch


def produce(bootstrap: str, topic: str, messages: int, partitions: int) -> dict[int, tuple[int, int]]:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 10000, "acks": "1"})
    value = b"x" * 200
    for i in range(messages):
        while True:
            try:
                producer.produce(topic, value=value, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(120)
    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench"})
    ranges = {p: probe.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in range(partitions)}
    probe.close()
    return ranges


def plain_read(bootstrap: str, topic: str, ranges: dict[int, tuple[int, int]]) -> int:
    """The baseline: assign every partition's range to one consumer and read to the end offsets."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-plain", "enable.auto.commit": False, "auto.offset.reset": "error"})
    consumer.assign([TopicPartition(topic, p, start) for p, (start, _) in ranges.items()])
    remaining, count = sum(end - start for start, end in ranges.values()), 0
    while remaining:
        for message in consumer.consume(min(10_000, remaining), timeout=1.0):
            if message.error() is not None:
                raise RuntimeError(message.error().str())
            _ = (message.key(), message.value(), message.offset(), message.timestamp())
            count += 1
            remaining -= 1
    consumer.close()
    return count


def spec_for(bootstrap: str, topic: str, ranges: dict[str, tuple[int, int]], uri: str) -> RunSpec:
    pipeline = uuid.uuid4().hex[:8]
    return RunSpec.model_validate({
        "run_id": f"bench-{uuid.uuid4().hex[:6]}", "pipeline_id": pipeline,
        "txn": {"app_id": f"inlet-pipeline-{pipeline}", "version": 1},
        "source": {"kafka_config": {"bootstrap.servers": bootstrap}, "ranges": {topic: ranges}},
        "target": {"type": "delta", "uri": uri},
    })


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=64)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    settings = SparkSubmitSettings(master=args.master)

    with SandboxCluster(brokers=1) as cluster, tempfile.TemporaryDirectory() as tmp:
        bootstrap, topic = cluster.bootstrap_servers, "bench"
        cluster.create_topic(topic, args.partitions)
        began = time.monotonic()
        ranges = produce(bootstrap, topic, args.messages, args.partitions)
        total = sum(end - start for start, end in ranges.values())
        print(f"produced {total:,} messages of 200 B in {time.monotonic() - began:.1f}s")

        began = time.monotonic()
        assert plain_read(bootstrap, topic, ranges) == total
        plain_s = time.monotonic() - began
        print(f"(a) plain confluent-kafka reader, 1 process: {total / plain_s:,.0f} records/s ({plain_s:.1f}s)")

        one = launch(spec_for(bootstrap, topic, {"0": (ranges[0][0], ranges[0][0] + 1)}, f"{tmp}/one"), workdir=Path(tmp, "w1"), settings=settings, timeout_s=600)
        assert one.status == "succeeded", one.error
        fixed_s = (one.timings.finished_at - one.timings.started_at).total_seconds()

        began = time.monotonic()
        full = launch(spec_for(bootstrap, topic, {str(p): r for p, r in ranges.items()}, f"{tmp}/all"),
                      workdir=Path(tmp, "w2"), settings=settings, timeout_s=1800)
        wall_s = time.monotonic() - began
        assert full.status == "succeeded" and full.rows_written == total, full.error
        in_job = total / full.timings.process_s
        # The steady rate is the marginal one: what the extra records cost beyond a one-record job's
        # processing (Python workers starting, consumers connecting), which the fixed cost reports.
        steady = (total - 1) / (full.timings.process_s - one.timings.process_s)
        plain = total / plain_s
        print(f"(b) Spark job into Delta ({args.master}): {in_job:,.0f} records/s in the job (process {full.timings.process_s:.1f}s, "
              f"session {full.timings.session_start_s:.1f}s, commit {full.timings.commit_s:.2f}s), "
              f"{total / wall_s:,.0f} records/s end to end ({wall_s:.1f}s)")
        print(f"    steady (marginal) rate: {steady:,.0f} records/s "
              f"(process {full.timings.process_s:.1f}s minus a one-record job's {one.timings.process_s:.1f}s)")
        print(f"ratio Spark steady / plain reader: {steady / plain:.2f} (in-job rate / plain reader: {in_job / plain:.2f})")
        print(f"fixed start-up cost (one-record run, spark-submit to result): {fixed_s:.1f}s")


if __name__ == "__main__":
    main()
