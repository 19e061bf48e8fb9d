"""A Delta table's health under many small runs, with Inlet's maintenance on, off, and compacted by hand.

A SMALLER stand-in for the issue's bench (issue 31: 2,000 runs of a 64-partition pipeline on the warm
engine): runs here are the job's own commit (``spark_jobs.delta_tables.commit.commit_files``: one
Parquet file per Kafka partition read, one append with the run's app transaction) of rows made in
process, not Spark runs reading Kafka. So it measures the table, not the run's cost. Three tables get
the same runs in the same process:

- ``off``: never maintained;
- ``on``: maintained as the control plane would (``api.maintenance.tables.compaction_due`` on the
  counters a run adds; each due task runs ``spark_jobs.public.maintain_table`` with the default policy,
  vacuum retention 0 so that storage is reclaimed within the bench);
- ``by hand``: at each checkpoint, a copy of ``off`` compacted with delta-rs's ``optimize.compact``
  and vacuumed.

At each checkpoint it prints, per table: live Parquet files, log entries, bytes on storage, a full read
with delta-rs (best of 3), and a filtered read with DuckDB's delta extension (an independent reader;
skipped where the extension is not installed), and ``on`` over ``by hand``. At the end, the live bytes
per column of ``on`` and ``by hand`` with their codec and encodings: where the two differ in size, and
why (docs/maintenance.md).

Each partition's records carry their own payload (``--payload copies``: the same customers and amounts
in every partition of a run, as this bench had them first; a compressor finds those copies side by side
in arrival order, not once sorted by partition). ``--maintenance process`` runs the tasks on a worker
process of their own, as ``inlet maintenance-worker`` does beside the runs, with ``off`` and ``on``
taking turns by ``--chunk`` runs (the worker idle during ``off``'s), and vacuums at the checkpoints
(a retention of 0 beside running writers would delete a run's file before its commit).

    .venv/bin/python bench/table_health.py [--runs 400] [--partitions 16] [--rows 50] [--checkpoints 100,200,400]
        [--payload distinct|copies] [--maintenance inline|process] [--chunk 25]
"""

from __future__ import annotations

import argparse
import multiprocessing
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spark_jobs.delta_tables import Table
from spark_jobs.delta_tables.commit import commit_files
from spark_jobs.maintenance import MaintenanceSteps, TablePolicy, maintain
from spark_jobs.maintenance.compaction import _stats
from spark_jobs.plans import DataFile
from spark_jobs.spec import Txn
from spark_jobs.storage import Store

SCHEMA = pa.schema([("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()),
                    ("customer", pa.int64()), ("amount", pa.float64())])
POLICY = TablePolicy(target_file_bytes=128 << 20, small_file_bytes=32 << 20, vacuum_retention_hours=0)
MIN_SMALL_FILES, MAX_COMMITS = 50, 100  # the policy's defaults (api/pipelines/maintenance_policy.py)


def run_files(root: Path, seq: int, partitions: int, rows: int, payload: str) -> list[DataFile]:
    """One run's files: ``rows`` records of each partition, at the offsets that partition reached. With
    ``payload="copies"`` every partition gets the same customers and amounts (the bench's data before
    2026-11-26: a compressor finds each run's 16 copies next to each other in arrival order)."""
    files = []
    for p in range(partitions):
        start = (seq - 1) * rows
        if payload == "copies":
            customers = [(start + i) * 7919 % 10_000 for i in range(rows)]
            amounts = [float(i) for i in range(rows)]
        else:
            rng = np.random.default_rng((seq, p))
            customers = rng.integers(0, 10_000, rows).tolist()
            amounts = np.round(rng.gamma(2.0, 30.0, rows), 2).tolist()
        table = pa.table({"topic": ["orders"] * rows, "partition": pa.array([p] * rows, pa.int32()),
                          "offset": pa.array(range(start, start + rows), pa.int64()),
                          "customer": pa.array(customers, pa.int64()), "amount": pa.array(amounts)}, schema=SCHEMA)
        name = f"part-{uuid.uuid4().hex}.parquet"
        pq.write_table(table, root / name)
        files.append(DataFile("main", name, (root / name).stat().st_size, {}, rows, _stats(table)))
    return files


def figures(root: Path) -> dict[str, float]:
    from deltalake import DeltaTable

    delta = DeltaTable(str(root))
    best = float("inf")
    for _ in range(3):
        began = time.perf_counter()
        rows = DeltaTable(str(root)).to_pyarrow_table().num_rows
        best = min(best, time.perf_counter() - began)
    log = root / "_delta_log"
    out = {"files": len(delta.file_uris()), "log": len(list(log.glob("*.json"))),
           "live_mib": sum(a["size_bytes"] for a in pa.table(delta.get_add_actions()).to_pylist()) / (1 << 20),
           "data_mib": sum(f.stat().st_size for f in root.glob("*.parquet")) / (1 << 20),
           "log_mib": sum(f.stat().st_size for f in log.iterdir() if f.is_file()) / (1 << 20),
           "read_s": best, "rows": rows}
    out["duckdb_s"] = duckdb_read(root)
    return out


def duckdb_read(root: Path) -> float:
    try:
        import duckdb
        import duckdb_ext
    except ImportError:
        return float("nan")
    try:
        extensions = Path(next(iter(duckdb_ext.__path__))) / "extensions" / f"v{duckdb.__version__}"
        con = duckdb.connect(config={"allow_unsigned_extensions": "true", "autoinstall_known_extensions": "false",
                                     "autoload_known_extensions": "false"})
        con.execute(f"LOAD '{next(extensions.glob('*/delta.duckdb_extension'))}'")
        began = time.perf_counter()
        con.execute(f"SELECT count(*), sum(amount) FROM delta_scan('{root}') WHERE customer < 100").fetchall()
        return time.perf_counter() - began
    except Exception:  # noqa: BLE001 - an extension that cannot load here: say so in the figures
        return float("nan")


def by_hand(source: Path, into: Path) -> Path:
    from deltalake import DeltaTable

    shutil.rmtree(into, ignore_errors=True)
    shutil.copytree(source, into)
    delta = DeltaTable(str(into))
    delta.optimize.compact(target_size=128 << 20)
    DeltaTable(str(into)).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    return into


def column_bytes(root: Path) -> dict[str, tuple[str, int]]:
    """Per column of the live files: the codec and encodings, and the bytes stored."""
    from deltalake import DeltaTable

    hows: dict[str, set[str]] = {}
    sizes: dict[str, int] = {}
    for uri in DeltaTable(str(root)).file_uris():
        meta = pq.ParquetFile(uri.removeprefix("file://")).metadata
        for group in range(meta.num_row_groups):
            for i in range(meta.num_columns):
                column = meta.row_group(group).column(i)
                encodings = "+".join(sorted(set(column.encodings) - {"RLE", "PLAIN"}) or ["PLAIN"])
                hows.setdefault(column.path_in_schema, set()).add(f"{column.compression.lower()} {encodings}")
                sizes[column.path_in_schema] = sizes.get(column.path_in_schema, 0) + column.total_compressed_size
    return {name: (", ".join(sorted(hows[name])), size) for name, size in sizes.items()}


def maintenance_worker(requests: Any, busy: Any) -> None:
    """The maintenance worker's stand-in, in a process of its own (``inlet maintenance-worker`` runs
    tasks beside the runs, one per table at a time): compaction and checkpoint as a runs' trigger asks
    them. Vacuum waits for the checkpoints (retention 0 here would delete a run's file before its commit)."""
    while (uri := requests.get()) is not None:
        try:
            maintain(Store({}), uri, POLICY, MaintenanceSteps(vacuum=False))
        finally:
            busy.clear()


class Maintenance:
    """The ``on`` table's maintenance: inline (after the run that made it due, timed with it) or on a
    worker process (the run only sends the task; one at a time, a task due while one runs waits)."""

    def __init__(self, table: Table, mode: str) -> None:
        self.table, self.mode, self.small, self.commits, self.tasks = table, mode, 0, 0, 0
        if mode == "process":
            context = multiprocessing.get_context("spawn")  # deltalake panics after fork
            self.requests, self.busy = context.Queue(), context.Event()
            self.worker = context.Process(target=maintenance_worker, args=(self.requests, self.busy), daemon=True)
            self.worker.start()

    def after_run(self, partitions: int) -> None:
        self.small, self.commits = self.small + partitions, self.commits + 1
        self._send_if_due()

    def _send_if_due(self) -> None:
        if not (self.small >= MIN_SMALL_FILES or (self.commits >= MAX_COMMITS and self.small >= 2)):
            return
        if self.mode == "inline":
            maintain(self.table.store, self.table.uri, POLICY, MaintenanceSteps())
        elif self.busy.is_set():
            return  # the task running takes what it finds; the next run asks again
        else:
            self.busy.set()
            self.requests.put(self.table.uri)
        self.small = self.commits = 0
        self.tasks += 1

    def idle(self) -> None:
        """Wait for the task running, if any."""
        while self.mode == "process" and self.busy.is_set():
            time.sleep(0.01)

    def settle(self) -> None:
        """Wait for the task running and the one runs made due meanwhile (Inlet's task asks for it as it
        ends: ``api.maintenance.execution.finish``), then vacuum (between runs: nothing in flight)."""
        if self.mode == "process":
            self.idle()
            self._send_if_due()
            self.idle()
            maintain(self.table.store, self.table.uri, POLICY, MaintenanceSteps(compact=False))

    def stop(self) -> None:
        if self.mode == "process":
            self.requests.put(None)
            self.worker.join(timeout=60)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--partitions", type=int, default=16)
    parser.add_argument("--rows", type=int, default=50, help="records per partition per run")
    parser.add_argument("--checkpoints", default="100,200,400")
    parser.add_argument("--payload", choices=("distinct", "copies"), default="distinct",
                        help="copies: every partition's records carry the same customers and amounts")
    parser.add_argument("--maintenance", choices=("inline", "process"), default="inline",
                        help="process: tasks on a worker process of their own, as Inlet runs them")
    parser.add_argument("--chunk", type=int, default=25, help="with --maintenance process: runs of one table "
                        "in a row, off and on taking turns (the worker idle during off's)")
    args = parser.parse_args()
    checkpoints = {int(c) for c in args.checkpoints.split(",")}
    work = Path(tempfile.mkdtemp(prefix="inlet-table-health-"))
    off, on = work / "off", work / "on"
    off.mkdir()
    on.mkdir()
    tables = {"off": Table(Store({}), str(off)), "on": Table(Store({}), str(on))}
    upkeep = Maintenance(tables["on"], args.maintenance)
    (work / "warm").mkdir()  # the first commit's one-time costs (imports, delta-rs's first table) timed for neither
    commit_files(Table(Store({}), str(work / "warm")), Txn(app_id="bench", version=1),
                 run_files(work / "warm", 1, args.partitions, args.rows, args.payload), SCHEMA)
    spent = {"off": 0.0, "on": 0.0}
    print(f"{args.runs} runs x {args.partitions} partitions x {args.rows} rows, {args.payload} payloads, "
          f"maintenance {args.maintenance}; tables in {work}")
    print("data MiB: every Parquet file on storage (live or not yet vacuumed); live MiB: the live ones; log MiB:\n"
          "_delta_log (its entries are cleaned after delta.logRetentionDuration, 30 days: never within a bench)")
    print(f"{'runs':>5} {'table':>8} {'files':>6} {'log':>5} {'data MiB':>9} {'live MiB':>9} {'log MiB':>8} "
          f"{'read s':>8} {'duckdb s':>9} {'rows':>8}")
    step = args.chunk if args.maintenance == "process" else 1
    ends = sorted({*range(step, args.runs, step), *(c for c in checkpoints if c <= args.runs), args.runs})
    first, since = 1, (0, {"off": 0.0, "on": 0.0})
    for last in ends:
        for name, table in tables.items():
            if name == "off":
                upkeep.idle()  # the worker's CPU is not the off table's cost
            for seq in range(first, last + 1):
                began = time.perf_counter()
                commit_files(table, Txn(app_id="bench", version=seq),
                             run_files(Path(table.uri), seq, args.partitions, args.rows, args.payload), SCHEMA)
                if name == "on":
                    upkeep.after_run(args.partitions)
                spent[name] += time.perf_counter() - began
        first = last + 1
        if last in checkpoints:
            upkeep.settle()
            rows = {"off": figures(off), "on": figures(on), "by hand": figures(by_hand(off, work / "hand"))}
            for name, f in rows.items():
                print(f"{last:>5} {name:>8} {f['files']:>6.0f} {f['log']:>5.0f} {f['data_mib']:>9.2f} "
                      f"{f['live_mib']:>9.2f} {f['log_mib']:>8.2f} {f['read_s']:>8.4f} {f['duckdb_s']:>9.4f} "
                      f"{f['rows']:>8.0f}")
            print(f"{'':>5} {'on/hand':>8} {'':>6} {'':>5} {'':>9} {rows['on']['live_mib'] / rows['by hand']['live_mib']:>8.2f}x "
                  f"{'':>8} {rows['on']['read_s'] / rows['by hand']['read_s']:>7.2f}x "
                  f"{rows['on']['duckdb_s'] / rows['by hand']['duckdb_s']:>8.2f}x")
            rates = {name: 60 * (last - since[0]) / (spent[name] - since[1][name]) for name in spent}
            print(f"{'':>5} runs per minute since the last checkpoint: off {rates['off']:.0f}, on {rates['on']:.0f} "
                  f"= {rates['on'] / rates['off']:.2f}x")
            since = (last, dict(spent))
    upkeep.stop()
    hand, mine = column_bytes(work / "hand"), column_bytes(on)
    print("live bytes per column, on (Inlet's compaction: rows sorted by topic, partition, offset) beside by hand "
          "(delta-rs optimize.compact: rows in arrival order):")
    for column in mine:
        print(f"  {column:>10}  on {mine[column][1]:>10,} ({mine[column][0]})  by hand {hand[column][1]:>10,} "
              f"({hand[column][0]})")
    print(f"runs per minute (commit, plus maintenance where inline): off {60 * args.runs / spent['off']:.0f}, "
          f"on {60 * args.runs / spent['on']:.0f} = {spent['off'] / spent['on']:.2f}x ({upkeep.tasks} maintenance "
          f"tasks, {args.maintenance})")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
