"""Benchmark: keyed tables (``target.mode`` upsert) beside the append path, on the same records in one run.

For each size of existing table (``--keys``, default 100k, 1M and 10M keys), ``--changes`` JSON orders
(bench/kafka_bench.py's) whose ids are drawn uniformly from the existing keys are produced to the
sandbox Kafka (librdkafka's mock cluster); then, on one warm engine (the worker's launcher), the same
ranges are run twice, each after a one-record warm-up:

  (a) append: into a fresh table, every record a row (today's path);
  (b) upsert: into a keyed table seeded with ``keys`` rows (written beforehand with delta-rs, outside
      the clock), key ``id``, the offset as sequence: decode, the latest change per key, one MERGE.

Prints end-to-end records/s of each (the launch's wall time) and upsert / append, and at the end
each size's upsert time per change against the 1M-key table's (issue 30's targets: upsert >= 0.5x
append at 1M keys; at 10M keys no worse than 2x the 1M-key time per change). After the clocks stop,
it checks that the keyed table still holds exactly ``keys`` rows and that every changed key holds
its latest change.

    .venv/bin/python bench/keyed_tables.py [--changes 1000000] [--keys 100000,1000000,10000000] [--partitions 64]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from deltalake import DeltaTable, write_deltalake

from sandbox.cluster import SandboxCluster
from spark_jobs.spec import RunSpec
from worker.launch import SparkSubmitSettings, WarmLauncher

from kafka_bench import ORDER_DDL, Ranges, order, produce, timed

SEED_FILES = 8  # the seeded table's files, as a few earlier runs would have left them


def _schema() -> pa.Schema:
    """The keyed table's columns for ORDER_DDL (``delta_tables.changes.ChangeReader.schema``)."""
    return pa.schema([("id", pa.int64()), ("customer", pa.string()), ("amount", pa.float64()), ("status", pa.string()),
                      ("placed_at", pa.timestamp("us", "UTC")), ("qty", pa.int32()),
                      pa.field("_inlet_sequence", pa.int64(), False), pa.field("_inlet_deleted", pa.bool_(), False),
                      pa.field("_inlet_run_id", pa.string(), False)])


def order_rows(ids: np.ndarray, sequence: int, run: str, key_type: str = "int") -> pa.Table:
    """Orders (bench/kafka_bench.py's columns) for ``ids``, built column-wise; a ``string`` key is the id
    as 12 digits."""
    customers = pa.array([f"customer-{i:05d}" for i in range(5000)])
    statuses = pa.array(["NEW", "PAID", "SHIPPED"])
    placed = np.datetime64("2026-11-01T00:00:00", "us") + ids.astype("timedelta64[ms]")
    key = pa.array(ids, pa.int64())
    if key_type == "string":
        key = pc.utf8_lpad(key.cast(pa.string()), 12, "0")
    columns = [key, customers.take(pa.array(ids % 5000)), pa.array(np.round(ids * 0.37 % 1000, 2)),
               statuses.take(pa.array(ids % 3)), pa.array(placed, pa.timestamp("us", "UTC")),
               pa.array((ids % 17).astype(np.int32)), pa.array(np.full(len(ids), sequence, np.int64)),
               pa.array(np.zeros(len(ids), bool)), pa.array([run] * len(ids), pa.string())]
    schema = _schema()
    return pa.Table.from_arrays(columns, schema=schema.set(0, schema.field(0).with_type(key.type)))


def seed(uri: str, keys: int) -> None:
    """A keyed table of ``keys`` rows (sequence -1: every change of the run is newer), in ``SEED_FILES``
    files sorted by the key."""
    step = -(-keys // SEED_FILES)
    for start in range(0, keys, step):
        write_deltalake(uri, order_rows(np.arange(start, min(keys, start + step)), -1, "seed"), mode="append")


def changes(count: int, keys: int, seed_value: int) -> list[bytes]:
    rng, base = random.Random(seed_value), dt.datetime(2026, 11, 24, tzinfo=dt.UTC)
    values = []
    for n in range(count):
        record = order(rng.randrange(keys), base + dt.timedelta(seconds=n))
        values.append(json.dumps({**record, "placed_at": record["placed_at"].isoformat()}).encode())
    return values


def spec(bootstrap: str, topic: str, ranges: Ranges, uri: str, keyed: bool) -> RunSpec:
    pipeline = uuid.uuid4().hex[:8]
    target: dict[str, Any] = {"type": "delta", "uri": uri, "quarantine_uri": f"{uri}__quarantine"}
    if keyed:
        target |= {"mode": "upsert", "key": ["id"]}
    return RunSpec.model_validate({
        "run_id": f"bench-{uuid.uuid4().hex[:6]}", "pipeline_id": pipeline,
        "txn": {"app_id": f"inlet-pipeline-{pipeline}", "version": 1},
        "source": {"kafka_config": {"bootstrap.servers": bootstrap}, "ranges": {topic: ranges}, "value_format": "json",
                   "schema": ORDER_DDL},
        "target": target,
    })


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=1_000_000)
    parser.add_argument("--keys", default="100000,1000000,10000000")
    parser.add_argument("--partitions", type=int, default=64)  # the sandbox keeps ~5 MiB per partition
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    launcher = WarmLauncher(SparkSubmitSettings(master=args.master))
    try:
        with SandboxCluster(brokers=1) as cluster, tempfile.TemporaryDirectory() as tmp:
            bootstrap = cluster.bootstrap_servers
            cluster.create_topic("warm-up", 1)
            warm = produce(bootstrap, "warm-up", changes(1, 10, 0), 1)
            seed(f"{tmp}/warm-keyed", 10)
            for keyed in (False, True):
                timed(launcher, spec(bootstrap, "warm-up", warm, f"{tmp}/warm-{'keyed' if keyed else 'append'}", keyed),
                      Path(tmp) / "work")
            upsert_s = {keys: measure(launcher, cluster, tmp, keys, args.changes, args.partitions)
                        for keys in map(int, args.keys.split(","))}
        if 1_000_000 in upsert_s:
            print("upsert's time per change against the 1M-key table's (issue 30: at 10M keys no worse than 2x):")
            for keys, seconds in upsert_s.items():
                print(f"  {keys:>12,} keys: {seconds / upsert_s[1_000_000]:.2f}x")
    finally:
        launcher.close()


def measure(launcher: WarmLauncher, cluster: SandboxCluster, tmp: str, keys: int, count: int, partitions: int) -> float:
    """Both runs over one topic of ``count`` changes to ``keys`` keys; the upsert's seconds per change."""
    bootstrap, topic = cluster.bootstrap_servers, f"changes-{keys}"
    cluster.create_topic(topic, partitions)
    values = changes(count, keys, keys)
    ranges = produce(bootstrap, topic, values, partitions)
    total = sum(end - start for start, end in ranges.values())
    touched = len({json.loads(v)["id"] for v in values})  # the rows the upsert's MERGE sets: one per key changed
    began = time.monotonic()
    seed(f"{tmp}/keyed-{keys}", keys)
    print(f"{keys:,} existing keys: seeded in {time.monotonic() - began:.1f}s; {total:,} changes produced")
    rates, walls = {}, {}
    for keyed in (False, True):
        uri = f"{tmp}/{'keyed' if keyed else 'append'}-{keys}"
        result, wall = timed(launcher, spec(bootstrap, topic, ranges, uri, keyed), Path(tmp) / "work")
        assert result.rows_written == (touched if keyed else total), result
        rates[keyed], walls[keyed] = total / wall, wall
        print(f"  {'upsert' if keyed else 'append'}: {rates[keyed]:,.0f} records/s ({wall:.1f}s; process "
              f"{result.timings.process_s:.1f}s, commit {result.timings.commit_s:.1f}s)")
    print(f"  upsert / append: {rates[True] / rates[False]:.2f}x")
    table = DeltaTable(f"{tmp}/keyed-{keys}").to_pyarrow_table(columns=["id", "_inlet_run_id"])
    assert table.num_rows == keys, table.num_rows  # updates only: no key added, none lost
    assert sum(1 for r in table["_inlet_run_id"].to_pylist() if r != "seed") == touched
    return walls[True] / total

if __name__ == "__main__":
    main()
