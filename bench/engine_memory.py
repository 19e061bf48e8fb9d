"""The warm engine's memory over many runs: what its processes (JVM, driver, Python workers) hold
after every ``--every`` runs of small batches into Delta, beside what they held after the first
run (the reference), and the growth per 100 runs that sets ``INLET_ENGINE_MAX_RUNS`` and
``INLET_ENGINE_MAX_MEMORY_MB``.

    .venv/bin/python bench/engine_memory.py [--runs 400] [--every 50] [--master local[2]]
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka import Producer

from sandbox.cluster import SandboxCluster
from spark_jobs.spec import RunSpec
from worker.launch import EngineLimits, SparkSubmitSettings, WarmLauncher


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--every", type=int, default=50)
    parser.add_argument("--records", type=int, default=100, help="records per run, over 4 partitions")
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()

    limits = EngineLimits(max_runs=args.runs + 1, max_memory_mb=1 << 20)  # never recycled while measured
    warm = WarmLauncher(SparkSubmitSettings(master=args.master), limits)
    with SandboxCluster(brokers=1) as cluster, tempfile.TemporaryDirectory() as tmp:
        cluster.create_topic("m", 4)
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 5})
        for i in range(args.records * args.runs):
            producer.produce("m", value=b'{"n": %d, "pad": "%s"}' % (i, b"x" * 150), partition=i % 4)
            if i % 10_000 == 0:
                producer.flush(30)
        producer.flush(60)
        per_partition = args.records // 4
        began = time.monotonic()
        samples: list[tuple[int, float]] = []
        try:
            for n in range(1, args.runs + 1):
                lo, hi = (n - 1) * per_partition, n * per_partition
                pipeline = f"p{n % 10}"  # ten tables, each growing by one commit every ten runs
                spec = RunSpec.model_validate({
                    "run_id": f"mem-{uuid.uuid4().hex[:8]}", "pipeline_id": pipeline,
                    "txn": {"app_id": f"inlet-pipeline-{pipeline}", "version": n},
                    "source": {"kafka_config": {"bootstrap.servers": cluster.bootstrap_servers},
                               "ranges": {"m": {str(p): (lo, hi) for p in range(4)}}, "value_format": "string"},
                    "target": {"type": "delta", "uri": str(Path(tmp) / pipeline)},
                })
                result = warm.launch(spec, workdir=Path(tmp, "w"), timeout_s=600)
                assert result.status == "succeeded", result.error
                if n == 1 or n % args.every == 0:
                    held = warm.engine_memory_bytes()
                    assert held is not None, "the engine was replaced while measured"
                    samples.append((n, held / 2**20))
                    print(f"after {n:>5} runs: {samples[-1][1]:7.0f} MiB held ({time.monotonic() - began:6.1f}s)", flush=True)
        finally:
            warm.close()
    (_, first), (warm_n, warmed), (last_n, last) = samples[0], samples[min(1, len(samples) - 1)], samples[-1]
    growth = (last - warmed) / max(last_n - warm_n, 1) * 100
    print(f"reference (after the first run): {first:.0f} MiB; after {last_n} runs: {last:.0f} MiB ({last / first:.2f}x); "
          f"{warmed - first:+.0f} MiB over the first {warm_n} runs (warm-up), then {growth:+.1f} MiB per 100 runs; "
          f"{(time.monotonic() - began) / args.runs * 1000:.0f} ms per run")


if __name__ == "__main__":
    main()
