"""Benchmark: Avro records from a Schema Registry, end to end into Delta, against the same data as JSON.

Produces the same N order records twice into sandbox topics of P partitions: once as Avro in the
Confluent wire format (its schema registered in a real Karapace registry), once as JSON text. Then
the warm engine ingests each topic into Delta (both decoded on Arrow in the executors: Avro by
its subject, JSON by ``formats.json_values`` with the equivalent DDL schema), after a one-record
warm-up run of each, and prints both rates and their ratio, measured in the same run.

The registry keeps its schemas in a real Kafka broker, so this needs the team's Kafka distribution
and the registry script (``../shared/kafka`` and ``../shared/schema-registry``):

    .venv/bin/python bench/registry_formats.py --kafka-home ../shared/kafka --registry-home ../shared/schema-registry \
        [--messages 1000000] [--partitions 64] [--master local[2]]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sandbox.cluster import SandboxCluster
from worker.launch import SparkSubmitSettings, WarmLauncher

from kafka_bench import ORDER, ORDER_DDL, broker_and_registry, encode_orders, produce, spec_for, timed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=64)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--kafka-home", required=True, help="an Apache Kafka distribution, for the registry's own topic")
    parser.add_argument("--registry-home", required=True, help="the folder holding the registry script")
    args = parser.parse_args()

    with (tempfile.TemporaryDirectory() as tmp, SandboxCluster(brokers=1) as cluster,
          broker_and_registry(args.kafka_home, args.registry_home, Path(tmp), "_schemas-bench") as (_, registry)):
        launcher = WarmLauncher(SparkSubmitSettings(master=args.master))
        try:
            bootstrap = cluster.bootstrap_servers
            schema_id = registry.register("bench-avro-value", json.dumps(ORDER))
            began = time.monotonic()
            avro_values, json_values = encode_orders(args.messages, schema_id)
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
                timed(launcher, spec_for(bootstrap, topic, first, f"{tmp}/{name}-warm-up", quarantine=True, **source),
                      Path(tmp, "w"))
                result, wall_s = timed(launcher, spec_for(bootstrap, topic, ranges[name], f"{tmp}/{name}-all", quarantine=True,
                                                          **source), Path(tmp, "w"))
                assert (result.rows_written, result.rows_quarantined) == (args.messages, 0), result
                rates[name] = args.messages / wall_s
                print(f"{name}: {rates[name]:,.0f} records/s end to end ({wall_s:.1f}s; process "
                      f"{result.timings.process_s:.1f}s, commit {result.timings.commit_s:.2f}s)")
            print(f"ratio Avro / JSON, end to end: {rates['avro'] / rates['json']:.2f}")
        finally:
            launcher.close()


if __name__ == "__main__":
    main()
