"""Benchmark: the Spark job's read-and-write rate against one plain confluent-kafka reader.

Produces ~1M 200-byte messages into a sandbox topic of 64 partitions (the sandbox keeps at most
100k messages or ~5 MiB per partition), then times
  (a) one process reading the same ranges with confluent-kafka (the baseline), and
  (b) per run engine (spark-submit per run, the warm engine) and value format, the Spark job writing
      them into Delta through the worker's launcher, end to end and steady,
and one-record runs, whose duration is the fixed cost of a run (on the warm engine, once started).

With ``--formats string,json`` the messages are ``bench/registry_formats.py``'s JSON orders (~140 B)
instead, read once as string values and once as json values of the orders' DDL schema (decoded in
the tasks by ``formats.json_values``), and each json run is also set against the string run of the
same engine: issue 35's target is a json run at 0.8 times a plain one or better.

    .venv/bin/python bench/spark_ingest.py [--messages 1000000] [--partitions 64] [--master local[2]]
        [--engines submit,warm] [--formats raw]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.json_decode import orders  # noqa: E402
from bench.registry_formats import ORDER_DDL  # noqa: E402
from sandbox.cluster import SandboxCluster  # noqa: E402
from spark_jobs.spec import RunResult, RunSpec  # noqa: E402
from worker.launch import Launcher, SparkSubmitSettings, SubmitLauncher, WarmLauncher  # noqa: E402

SOURCES: dict[str, dict[str, object]] = {
    "raw": {}, "string": {"value_format": "string"}, "json": {"value_format": "json", "schema": ORDER_DDL}}


def produce(bootstrap: str, topic: str, messages: int, partitions: int, value: Callable[[int], bytes]) -> dict[int, tuple[int, int]]:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 10000, "acks": "1"})
    for i in range(messages):
        while True:
            try:
                producer.produce(topic, value=value(i), partition=i % partitions)
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
                raise RuntimeError(str(message.error()))
            _ = (message.key(), message.value(), message.offset(), message.timestamp())
            count += 1
            remaining -= 1
    consumer.close()
    return count


def spec_for(bootstrap: str, topic: str, ranges: dict[str, tuple[int, int]], uri: str, fmt: str = "raw") -> RunSpec:
    pipeline = uuid.uuid4().hex[:8]
    return RunSpec.model_validate({
        "run_id": f"bench-{uuid.uuid4().hex[:6]}", "pipeline_id": pipeline,
        "txn": {"app_id": f"inlet-pipeline-{pipeline}", "version": 1},
        "source": {"kafka_config": {"bootstrap.servers": bootstrap}, "ranges": {topic: ranges}, **SOURCES[fmt]},
        "target": {"type": "delta", "uri": uri, "quarantine_uri": f"{uri}__quarantine"},
    })


def timed(launcher: Launcher, spec: RunSpec, workdir: Path) -> tuple[RunResult, float]:
    """The result of a launch and its wall time (on a warm engine, the first one's includes its start)."""
    began = time.monotonic()
    result = launcher.launch(spec, workdir=workdir, timeout_s=1800)
    assert result.status == "succeeded", result.error
    return result, time.monotonic() - began


def measure(launcher: Launcher, name: str, bootstrap: str, topic: str, ranges: dict[int, tuple[int, int]], tmp: str,
            plain: float, fmt: str = "raw") -> tuple[float, float, float]:
    """Prints a run's figures; returns its rates: end to end, in the job, steady."""
    total = sum(end - start for start, end in ranges.values())
    first = {"0": (ranges[0][0], ranges[0][0] + 1)}
    folder = f"{tmp}/{uuid.uuid4().hex[:6]}"
    _, first_s = timed(launcher, spec_for(bootstrap, topic, first, f"{folder}-first", fmt), Path(tmp, "w"))
    one, one_s = timed(launcher, spec_for(bootstrap, topic, first, f"{folder}-one", fmt), Path(tmp, "w"))
    full, wall_s = timed(launcher, spec_for(bootstrap, topic, {str(p): r for p, r in ranges.items()}, f"{folder}-all", fmt),
                         Path(tmp, "w"))
    assert full.rows_written == total and full.rows_quarantined == 0, (full.rows_written, full.rows_quarantined)
    in_job = total / full.timings.process_s
    # The steady rate is the marginal one: what the extra records cost beyond a one-record job's
    # processing (Python workers starting, consumers connecting), which the fixed cost reports.
    steady = (total - 1) / (full.timings.process_s - one.timings.process_s)
    print(f"(b) {name}: {total / wall_s:,.0f} records/s end to end ({wall_s:.1f}s; process {full.timings.process_s:.1f}s, "
          f"session {full.timings.session_start_s:.1f}s, commit {full.timings.commit_s:.2f}s); in the job {in_job:,.0f} "
          f"records/s; steady (marginal) {steady:,.0f} records/s")
    print(f"    ratio to the plain reader: end to end {total / wall_s / plain:.2f}, in the job {in_job / plain:.2f}, "
          f"steady {steady / plain:.2f}")
    print(f"    one-record run, launch to result: {one_s:.2f}s (the first: {first_s:.2f}s)")
    return total / wall_s, in_job, steady


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=64)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--engines", default="submit,warm")
    parser.add_argument("--formats", default="raw", help="value formats to run: raw, string, json (JSON orders for all)")
    args = parser.parse_args()
    formats = args.formats.split(",")
    jsons = orders(args.messages, 0) if "json" in formats else None
    settings = SparkSubmitSettings(master=args.master)

    with SandboxCluster(brokers=1) as cluster, tempfile.TemporaryDirectory() as tmp:
        bootstrap, topic = cluster.bootstrap_servers, "bench"
        cluster.create_topic(topic, args.partitions)
        began = time.monotonic()
        plain_value = b"x" * 200
        ranges = produce(bootstrap, topic, args.messages, args.partitions,
                         (lambda i: jsons[i]) if jsons is not None else (lambda i: plain_value))
        total = sum(end - start for start, end in ranges.values())
        size = sum(map(len, jsons)) / len(jsons) if jsons else 200
        print(f"produced {total:,} messages of {size:.0f} B{' (JSON orders)' if jsons else ''} in {time.monotonic() - began:.1f}s")

        began = time.monotonic()
        assert plain_read(bootstrap, topic, ranges) == total
        plain_s = time.monotonic() - began
        print(f"(a) plain confluent-kafka reader, 1 process: {total / plain_s:,.0f} records/s ({plain_s:.1f}s)")

        for engine in args.engines.split(","):
            launcher: Launcher = WarmLauncher(settings) if engine == "warm" else SubmitLauncher(settings)
            try:
                rates = {fmt: measure(launcher, f"{engine} on {args.master}, {fmt} values", bootstrap, topic, ranges, tmp,
                                      total / plain_s, fmt) for fmt in formats}
            finally:
                launcher.close()
            if "json" in rates and "string" in rates:
                json_to_string = [j / s for j, s in zip(rates["json"], rates["string"])]
                print("    json run / string run of the same records: end to end {:.2f}, in the job {:.2f}, "
                      "steady {:.2f}".format(*json_to_string))


if __name__ == "__main__":
    main()
