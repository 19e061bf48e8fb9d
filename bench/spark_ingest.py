"""Benchmark: the Spark job's read-and-write rate against one plain confluent-kafka reader.

Produces ~1M 200-byte messages into a sandbox topic of 64 partitions (the sandbox keeps at most
100k messages or ~5 MiB per partition), then times
  (a) one process reading the same ranges with confluent-kafka (the baseline), and
  (b) per run engine (spark-submit per run, the warm engine), the Spark job writing them into Delta
      through the worker's launcher, end to end and steady,
and one-record runs, whose duration is the fixed cost of a run (on the warm engine, once started).

    .venv/bin/python bench/spark_ingest.py [--messages 1000000] [--partitions 64] [--master local[2]]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from sandbox.cluster import SandboxCluster
from worker.launch import Launcher, SparkSubmitSettings, SubmitLauncher, WarmLauncher

from kafka_bench import Ranges, produce, spec_for, timed, timed_plain_read


def measure(launcher: Launcher, name: str, bootstrap: str, topic: str, ranges: Ranges, tmp: str, plain: float) -> None:
    total = sum(end - start for start, end in ranges.values())
    first = {"0": (ranges["0"][0], ranges["0"][0] + 1)}
    _, first_s = timed(launcher, spec_for(bootstrap, topic, first, f"{tmp}/{name}-first"), Path(tmp, "w"))
    one, one_s = timed(launcher, spec_for(bootstrap, topic, first, f"{tmp}/{name}-one"), Path(tmp, "w"))
    full, wall_s = timed(launcher, spec_for(bootstrap, topic, ranges, f"{tmp}/{name}-all"), Path(tmp, "w"))
    assert full.rows_written == total
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=64)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--engines", default="submit,warm")
    args = parser.parse_args()
    settings = SparkSubmitSettings(master=args.master)

    with SandboxCluster(brokers=1) as cluster, tempfile.TemporaryDirectory() as tmp:
        bootstrap, topic = cluster.bootstrap_servers, "bench"
        cluster.create_topic(topic, args.partitions)
        began = time.monotonic()
        ranges = produce(bootstrap, topic, [b"x" * 200] * args.messages, args.partitions)
        total = sum(end - start for start, end in ranges.values())
        print(f"produced {total:,} messages of 200 B in {time.monotonic() - began:.1f}s")

        plain = timed_plain_read(bootstrap, topic, ranges)
        print(f"(a) plain confluent-kafka reader, 1 process: {plain:,.0f} records/s ({total / plain:.1f}s)")

        for engine in args.engines.split(","):
            launcher: Launcher = WarmLauncher(settings) if engine == "warm" else SubmitLauncher(settings)
            try:
                measure(launcher, f"{engine} on {args.master}", bootstrap, topic, ranges, tmp, plain)
            finally:
                launcher.close()


if __name__ == "__main__":
    main()
