"""Benchmark: the driver's delta-rs work as a table grows (issue 35: where it stops being enough).

merge   A keyed table (bench/keyed_tables.py's columns) of each ``--keys`` size is written directly
        with pyarrow / delta-rs (not through Kafka: producing 10M records would take longer than the
        MERGE), in files of ``--rows-per-file`` rows sorted by the key (as a table compacted or
        Z-ordered by its key is). Then, for each batch size in ``--changes``, a batch of distinct keys
        (updates only, each a newer sequence) is merged with ``merge_changes``, the keyed target's
        MERGE, into a fresh copy of the table, in a child process of its own, so its peak RSS is the
        MERGE's. Batches: ``uniform`` (keys drawn from the whole key range: no file can be skipped) and
        ``recent`` (the top keys: the files of one end of the range). Each runs twice, with the
        MERGE's key-range bounds (``commit.key_bounds``) and without them. ``--key-type string``: the
        key as 12-digit text (the same order), for the bounds of string keys.
compact 2,000 (``--files``) small files of append-shaped rows (topic, partition, offset, timestamp,
        200 B of random bytes as the value, so zstd cannot shrink them) committed as one table, then
        compacted (128 MB target files) into a fresh copy of it, in a child process, by each of
        ``--compact-engines``, twice in both orders: ``worker`` (``maintenance.compact_table`` in that
        process, as the maintenance worker does) and ``spark`` (the maintenance worker's spark-submit
        of ``spark_jobs/compact.py``, ``worker.launch.compaction``, on ``--spark-master``: its seconds
        include the job's start; its memory is the whole process tree's, the JVM's and its Python
        workers', sampled every 0.2 s).

Prints seconds, peak RSS (``VmHWM``), files read/rewritten and, after the clocks stop, checks the
rows (every key still once, the batch's keys set by the bench's run).

    .venv/bin/python bench/keyed_scale.py [--keys 1000000,3000000,10000000] [--changes 100000,1000000]
        [--key-type int|string] [--files 2000] [--skip merge|compact] [--compact-engines worker,spark]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from deltalake import DeltaTable, write_deltalake
from keyed_tables import order_rows as rows

MB = 1 << 20


def _rss_mb() -> float:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS")) / 1024


def _peak_mb() -> float:
    """This process's peak RSS (VmHWM: getrusage's ru_maxrss would carry the parent's peak over fork and exec)."""
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM")) / 1024


def seed(uri: str, keys: int, per_file: int, key_type: str) -> None:
    for start in range(0, keys, per_file):
        write_deltalake(uri, rows(np.arange(start, min(keys, start + per_file)), -1, "seed", key_type), mode="append")


def batch_ids(keys: int, count: int, spread: str) -> np.ndarray:
    if spread == "recent":
        return np.arange(keys - count, keys)
    return np.sort(np.random.default_rng(keys + count).choice(keys, size=min(count, keys), replace=False))


def merge_child(uri: str, keys: int, count: int, spread: str, bounds: bool, key_type: str, engine: str) -> dict[str, float | int]:
    """One MERGE, in this (child) process: its seconds, RSS and metrics. ``engine`` spark: delta-spark's
    MERGE (``spark_merge``) on a local[2] Spark started and warmed by a small MERGE first, as a warm
    engine has it (the RSS is then the Python driver's alone, not its JVM's)."""
    from spark_jobs.delta_tables import Table, commit, spark_merge
    from spark_jobs.spec import Txn
    from spark_jobs.storage import Store

    if not bounds:
        commit.key_bounds = lambda changes, key: []  # the MERGE as it was before the bounds
        spark_merge.key_ranges = lambda changes, key: []
    changes = rows(batch_ids(keys, count, spread), 1, "bench", key_type).drop_columns(["_inlet_run_id"])
    changes = changes.append_column("_inlet_run_id", pa.array(["bench"] * changes.num_rows))
    table, txn = Table(Store(), uri), Txn(app_id="bench", version=1)
    if engine == "spark":
        spark = _spark()
        merge = partial(spark_merge.merge_changes_on_spark, spark)
        # A warm engine has merged before: one small MERGE first, so the clock sees no JVM warm-up.
        warm = f"{uri}-warm"
        seed(warm, 10_000, 10_000, key_type)
        merge(Table(Store(), warm), txn, rows(np.arange(9_000, 10_000), 1, "warm", key_type), ["id"])
    else:
        merge = commit.merge_changes
    before = _rss_mb()
    began = time.monotonic()
    outcome = merge(table, txn, changes, ["id"])
    seconds = time.monotonic() - began
    assert outcome is not None
    metrics = DeltaTable(uri).history(1)[0].get("operationMetrics", {})
    names = {"removed": ("num_target_files_removed", "numTargetFilesRemoved"), "added": ("num_target_files_added", "numTargetFilesAdded"),
             "scanned": ("num_target_files_scanned", "numTargetFilesBeforeSkipping")}
    return {"seconds": seconds, "rss_before_mb": before, "peak_mb": _peak_mb(),
            **{what: int(next((metrics[n] for n in ns if n in metrics), -1)) for what, ns in names.items()}}


def _spark() -> Any:
    """A local[2] Spark with delta-spark, as the worker starts its engine (``spark_command``'s conf)."""
    from pyspark.sql import SparkSession

    from spark_jobs import jars
    from worker.launch.submit import LEAN_CONF, LOCAL_DELTA

    builder = SparkSession.Builder().master("local[2]").appName("keyed-scale")
    for key, value in {**LEAN_CONF, **LOCAL_DELTA, **jars.spark_conf(), "spark.driver.memory": "2g",
                       "spark.sql.session.timeZone": "UTC"}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.range(1).collect()  # the JVM warm before the clock starts
    return spark


def check(uri: str, keys: int, count: int) -> None:
    table = DeltaTable(uri).to_pyarrow_table(columns=["id", "_inlet_run_id"])
    assert table.num_rows == keys and len(pa.compute.unique(table["id"])) == keys, table.num_rows
    assert pa.compute.sum(pa.compute.equal(table["_inlet_run_id"], "bench")).as_py() == min(count, keys)


def compact_child(uri: str, engine: str, master: str) -> dict[str, float | int]:
    import os
    import threading

    from spark_jobs.maintenance import TablePolicy, compact_table
    from spark_jobs.storage import Store
    from worker.launch import SparkSubmitSettings
    from worker.launch.compaction import SparkCompaction
    from worker.launch.processes import tree_memory_bytes

    before = _rss_mb()
    policy = TablePolicy(target_file_bytes=128 * MB, small_file_bytes=32 * MB)
    peak, done = [0], threading.Event()

    def sample() -> None:
        while not done.wait(0.2):
            peak[0] = max(peak[0], tree_memory_bytes(os.getpid()))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    began = time.monotonic()
    result = (compact_table(Store(), uri, policy, {}) if engine == "worker"
              else SparkCompaction(SparkSubmitSettings(master=master), timeout_s=3600)(Store(), uri, policy, {}))
    seconds = time.monotonic() - began
    done.set()
    sampler.join()
    assert result.outcome == "done", result
    return {"seconds": seconds, "job_seconds": result.seconds, "rss_before_mb": before, "peak_mb": _peak_mb(),
            "tree_peak_mb": peak[0] / MB, "removed": result.files_removed, "added": result.files_added,
            "mb_removed": result.bytes_removed / MB, "mb_added": result.bytes_added / MB}


def measure_compaction(tmp: str, files: int, engines: list[str], master: str) -> None:
    count, size = small_files(f"{tmp}/small", files)
    print(f"compaction of {files:,} files, {size / MB:,.0f} MB ({count:,} rows), 128 MB target: engine -> seconds "
          "(the job's own), MB/s, peak RSS of the worker process, peak memory of its process tree")
    best: dict[str, float] = {}
    for engine in [*engines, *reversed(engines)]:
        uri = f"{tmp}/compacted"
        shutil.rmtree(uri, ignore_errors=True)
        shutil.copytree(f"{tmp}/small", uri)
        m = child("compact", uri, engine, master)
        table = DeltaTable(uri)
        assert table.to_pyarrow_table(columns=["offset"]).num_rows == count and len(table.file_uris()) == m["added"]
        best[engine] = min(best.get(engine, m["seconds"]), m["seconds"])
        print(f"  {engine:7} -> {m['removed']:,} files -> {m['added']} files, {m['mb_added']:,.0f} MB in "
              f"{m['seconds']:.1f}s ({m['job_seconds']:.1f}s): {size / MB / m['seconds']:.1f} MB/s; peak RSS "
              f"{m['peak_mb']:,.0f} MB ({m['rss_before_mb']:,.0f} before), tree {m['tree_peak_mb']:,.0f} MB", flush=True)
    shutil.rmtree(f"{tmp}/small")
    print("best of two: " + ", ".join(f"{e} {s:.1f}s ({size / MB / s:.1f} MB/s)" for e, s in best.items())
          + (f"; spark / worker {best['spark'] / best['worker']:.2f}x" if {"spark", "worker"} <= set(best) else ""))


def small_files(uri: str, files: int) -> tuple[int, int]:
    """``files`` Parquet files of ~100 KB of append-shaped rows, committed as one table."""
    from deltalake import Schema
    from deltalake.transaction import AddAction, create_table_with_add_actions

    rng, per_file, offset, adds = np.random.default_rng(7), 450, 0, []
    schema = pa.schema([("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()),
                        ("timestamp", pa.timestamp("ms", "UTC")), ("value", pa.binary())])
    Path(uri).mkdir(parents=True)
    for n in range(files):
        values = rng.integers(0, 256, size=(per_file, 200), dtype=np.uint8)
        table = pa.Table.from_arrays([pa.array(["orders"] * per_file), pa.array(np.full(per_file, n % 64, np.int32)),
                                      pa.array(np.arange(offset, offset + per_file)),
                                      pa.array(np.arange(offset, offset + per_file) + 1_764_000_000_000, pa.timestamp("ms", "UTC")),
                                      pa.array([v.tobytes() for v in values], pa.binary())], schema=schema)
        offset += per_file
        path = f"part-{n:05d}.parquet"
        pq.write_table(table, f"{uri}/{path}", compression="zstd")
        adds.append(AddAction(path, Path(f"{uri}/{path}").stat().st_size, {}, 1_764_000_000_000 + n, True,
                              json.dumps({"numRecords": per_file})))
    create_table_with_add_actions(uri, Schema.from_arrow(schema), adds, mode="error")
    return files * per_file, sum(a.size for a in adds)


def child(*argv: str) -> dict[str, float | int]:
    done = subprocess.run([sys.executable, __file__, "--child", json.dumps(argv)], check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure_merges(tmp: str, sizes: list[int], counts: list[int], per_file: int, key_type: str, engines: list[str]) -> None:
    print("MERGE: keys, batch, spread, bounds -> seconds, peak RSS (before), files scanned, rewritten -> written")
    best: dict[tuple[int, int, str, str], float] = {}
    for keys in sizes:
        began = time.monotonic()
        seed(f"{tmp}/seed-{keys}", keys, per_file, key_type)
        files = len(DeltaTable(f"{tmp}/seed-{keys}").file_uris())
        print(f"{keys:,} keys: {files} files, seeded in {time.monotonic() - began:.1f}s", flush=True)
        for count in counts:
            for spread in ("uniform", "recent"):
                # Twice each, in both orders; delta-spark with the bounds only.
                ways = [(e, b) for e in engines for b in ((False, True) if e == "driver" else (True,))]
                for engine, bounds in [*ways, *reversed(ways)]:
                    uri = f"{tmp}/run"
                    shutil.rmtree(uri, ignore_errors=True)
                    shutil.copytree(f"{tmp}/seed-{keys}", uri)
                    m = child("merge", uri, str(keys), str(count), spread, str(bounds), key_type, engine)
                    check(uri, keys, count)
                    way = f"{engine}{'' if bounds else '-plain'}"
                    at = (keys, count, spread, way)
                    best[at] = min(best.get(at, m["seconds"]), m["seconds"])
                    print(f"  {keys:>10,} {count:>9,} {spread:7} {way:12} -> {m['seconds']:6.2f}s, "
                          f"peak {m['peak_mb']:,.0f} MB ({m['rss_before_mb']:,.0f}), scanned {m['scanned']}/{files}, "
                          f"rewrote {m['removed']} -> {m['added']}", flush=True)
        shutil.rmtree(f"{tmp}/seed-{keys}")
    print("best of two: keys, batch, spread, engine -> seconds, ms per 1k changes, per change vs the smallest table"
          + (", delta-spark / driver (both with bounds)" if len(engines) > 1 else ""))
    for (keys, count, spread, way), seconds in best.items():
        ratio = seconds / best[(sizes[0], count, spread, way)]
        versus = (f" {seconds / best[(keys, count, spread, 'driver')]:5.2f}x the driver's"
                  if way == "spark" and (keys, count, spread, "driver") in best else "")
        print(f"  {keys:>10,} {count:>9,} {spread:7} {way:12} -> {seconds:6.2f}s "
              f"{seconds / count * 1e6:7.1f} ms/1k {ratio:5.2f}x{versus}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", default="1000000,3000000,10000000")
    parser.add_argument("--changes", default="100000,1000000")
    parser.add_argument("--rows-per-file", type=int, default=250_000)
    parser.add_argument("--key-type", choices=("int", "string"), default="int")
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--skip", choices=("merge", "compact"))
    parser.add_argument("--engines", default="driver,spark", help="driver (delta-rs), spark (delta-spark on local[2])")
    parser.add_argument("--compact-engines", default="worker,spark",
                        help="worker (in the maintenance worker), spark (a compaction job on --spark-master)")
    parser.add_argument("--spark-master", default="local[2]")
    parser.add_argument("--child")
    args = parser.parse_args()
    if args.child:
        kind, *rest = json.loads(args.child)
        out = (merge_child(rest[0], int(rest[1]), int(rest[2]), rest[3], rest[4] == "True", rest[5], rest[6]) if kind == "merge"
               else compact_child(rest[0], rest[1], rest[2]))
        print(json.dumps(out))
        return
    with tempfile.TemporaryDirectory() as tmp:
        if args.skip != "merge":
            measure_merges(tmp, [int(k) for k in args.keys.split(",")], [int(c) for c in args.changes.split(",")],
                           args.rows_per_file, args.key_type, args.engines.split(","))
        if args.skip != "compact":
            measure_compaction(tmp, args.files, args.compact_engines.split(","), args.spark_master)

if __name__ == "__main__":
    main()
