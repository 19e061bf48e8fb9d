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
skipped where the extension is not installed).

    .venv/bin/python bench/table_health.py [--runs 400] [--partitions 16] [--rows 50] [--checkpoints 100,200,400]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

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


def run_files(root: Path, seq: int, partitions: int, rows: int) -> list[DataFile]:
    files = []
    for p in range(partitions):
        start = (seq - 1) * rows
        table = pa.table({"topic": ["orders"] * rows, "partition": pa.array([p] * rows, pa.int32()),
                          "offset": pa.array(range(start, start + rows), pa.int64()),
                          "customer": pa.array([(start + i) * 7919 % 10_000 for i in range(rows)], pa.int64()),
                          "amount": pa.array([float(i) for i in range(rows)])}, schema=SCHEMA)
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--partitions", type=int, default=16)
    parser.add_argument("--rows", type=int, default=50, help="records per partition per run")
    parser.add_argument("--checkpoints", default="100,200,400")
    args = parser.parse_args()
    checkpoints = {int(c) for c in args.checkpoints.split(",")}
    work = Path(tempfile.mkdtemp(prefix="inlet-table-health-"))
    off, on = work / "off", work / "on"
    off.mkdir()
    on.mkdir()
    tables = {"off": Table(Store({}), str(off)), "on": Table(Store({}), str(on))}
    small = commits = tasks = 0
    spent = {"off": 0.0, "on": 0.0}
    print(f"{args.runs} runs x {args.partitions} partitions x {args.rows} rows; tables in {work}")
    print("data MiB: every Parquet file on storage (live or not yet vacuumed); live MiB: the live ones; log MiB:\n"
          "_delta_log (its entries are cleaned after delta.logRetentionDuration, 30 days: never within a bench)")
    print(f"{'runs':>5} {'table':>8} {'files':>6} {'log':>5} {'data MiB':>9} {'live MiB':>9} {'log MiB':>8} "
          f"{'read s':>8} {'duckdb s':>9} {'rows':>8}")
    for seq in range(1, args.runs + 1):
        for name, table in tables.items():
            began = time.perf_counter()
            commit_files(table, Txn(app_id="bench", version=seq), run_files(Path(table.uri), seq, args.partitions,
                                                                              args.rows), SCHEMA)
            if name == "on":
                small, commits = small + args.partitions, commits + 1
                if small >= MIN_SMALL_FILES or (commits >= MAX_COMMITS and small >= 2):
                    maintain(table.store, table.uri, POLICY, MaintenanceSteps())
                    small = commits = 0
                    tasks += 1
            spent[name] += time.perf_counter() - began
        if seq in checkpoints:
            rows = {"off": figures(off), "on": figures(on), "by hand": figures(by_hand(off, work / "hand"))}
            for name, f in rows.items():
                print(f"{seq:>5} {name:>8} {f['files']:>6.0f} {f['log']:>5.0f} {f['data_mib']:>9.2f} "
                      f"{f['live_mib']:>9.2f} {f['log_mib']:>8.2f} {f['read_s']:>8.4f} {f['duckdb_s']:>9.4f} "
                      f"{f['rows']:>8.0f}")
    print(f"runs per minute (commit, plus maintenance where on): off {60 * args.runs / spent['off']:.0f}, "
          f"on {60 * args.runs / spent['on']:.0f} ({tasks} maintenance tasks, run inline here; Inlet runs them on "
          "their own queue, beside the runs)")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
