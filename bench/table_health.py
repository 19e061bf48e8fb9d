"""A Delta table's health under many small runs, with Inlet's maintenance on, off, and compacted by hand.

Issue 31's bench: ``--runs-on warm`` makes each run a Spark run of the job on the worker's warm engine
(``WarmLauncher``) reading its ranges of a 64-partition JSON topic (the real broker with
``--kafka-home``, else the sandbox) into Delta. ``--runs-on commit`` (the default, seconds instead of half
an hour) makes each run the job's commit alone (``spark_jobs.delta_tables.commit.commit_files``: one
Parquet file per Kafka partition, as the job wrote them before 2026-11-26, one append with the run's app
transaction) of rows made in process: it measures the table, not the run's cost. Three tables get
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

Each partition's records carry their own payload (with ``--runs-on commit``, ``--payload copies`` gives
the same customers and amounts in every partition of a run, as this bench had them first; a compressor
finds those copies side by side in arrival order, not once sorted by partition). ``--maintenance
process`` runs the tasks on a worker process of their own, as ``inlet maintenance-worker`` does beside
the runs, with ``off`` and ``on`` taking turns by ``--chunk`` runs (the worker idle during ``off``'s),
and vacuums at the checkpoints (a retention of 0 beside running writers would delete a run's file before
its commit).

    .venv/bin/python bench/table_health.py [--runs 400] [--partitions 16] [--rows 50] [--checkpoints 100,200,400]
        [--payload distinct|copies] [--maintenance inline|process] [--chunk 25]
        [--runs-on commit|warm] [--kafka-home ../shared/kafka]

    issue 31's figures: --runs-on warm --kafka-home ../shared/kafka --runs 2000 --partitions 64 --rows 10
        --checkpoints 200,1000,2000 --maintenance process --chunk 25
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
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

from sandbox.cluster import SandboxCluster
from spark_jobs.delta_tables import Table
from spark_jobs.delta_tables.commit import commit_files
from spark_jobs.maintenance import MaintenanceSteps, TablePolicy, maintain
from spark_jobs.maintenance.compaction import _stats
from spark_jobs.plans import DataFile
from spark_jobs.spec import RunSpec, Txn
from spark_jobs.storage import Store

from kafka_bench import produce

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


class CommitRuns:
    """Each run the job's commit alone, of rows made in process."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args

    def run(self, table: Table, seq: int) -> int:
        """Run ``seq`` into ``table``; the files it added."""
        args = self.args
        files = run_files(Path(table.uri), seq, args.partitions, args.rows, args.payload)
        commit_files(table, Txn(app_id="bench", version=seq), files, SCHEMA)
        return len(files)

    def close(self) -> None:
        pass


class WarmRuns:
    """Each run a Spark run of the job on the worker's warm engine (``WarmLauncher``, as ``inlet worker``
    runs them): run ``seq`` reads offsets ``[(seq - 1) * rows, seq * rows)`` of every partition of a JSON
    topic (``customer``, ``amount``: each partition its own payload) and appends them with the table's
    app transaction at version ``seq``. The topic is on the real broker under ``--kafka-home``, else on
    the sandbox (librdkafka's mock cluster, in this process)."""

    TOPIC = "orders"

    def __init__(self, args: argparse.Namespace, work: Path) -> None:
        from worker.launch import SparkSubmitSettings, WarmLauncher

        self.args, self.work, self.stack = args, work, contextlib.ExitStack()
        try:
            self.bootstrap = self._broker()
            values = [json.dumps({"customer": int(c), "amount": float(a)}).encode()
                      for c, a in self._payloads()]
            produce(self.bootstrap, self.TOPIC, values, args.partitions)
            self.launcher = WarmLauncher(SparkSubmitSettings(master="local[2]"))
            self.stack.callback(self.launcher.close)
        except BaseException:
            self.stack.close()
            raise

    def _broker(self) -> str:
        if self.args.kafka_home:
            from tests.fixtures.kafka_broker import RealKafka, kafka_home

            os.environ["INLET_TEST_KAFKA_HOME"] = self.args.kafka_home
            home = kafka_home()
            assert home is not None, f"no Kafka distribution under {self.args.kafka_home}"
            (self.work / "kafka").mkdir()
            broker = RealKafka(home, self.work / "kafka").start()
            self.stack.callback(broker.stop)
        else:
            broker = self.stack.enter_context(SandboxCluster(brokers=1))
        broker.create_topic(self.TOPIC, self.args.partitions)
        return broker.bootstrap_servers

    def _payloads(self) -> list[tuple[int, float]]:
        """Every record of every run, in the order ``produce`` spreads them (record ``i`` to partition
        ``i % partitions``): each partition's customers and amounts its own."""
        args = self.args
        per_partition = args.runs * args.rows
        columns = []
        for p in range(args.partitions):
            rng = np.random.default_rng(p)
            columns.append((rng.integers(0, 10_000, per_partition), np.round(rng.gamma(2.0, 30.0, per_partition), 2)))
        return [(columns[p][0][i], columns[p][1][i]) for i in range(per_partition) for p in range(args.partitions)]

    def run(self, table: Table, seq: int) -> int:
        """Run ``seq`` into ``table``; the files it added."""
        args, name = self.args, Path(table.uri).name
        start = (seq - 1) * args.rows
        spec = RunSpec.model_validate({
            "run_id": f"{name}-{seq}", "pipeline_id": f"bench-{name}",
            "txn": {"app_id": f"inlet-pipeline-bench-{name}", "version": seq},
            "source": {"kafka_config": {"bootstrap.servers": self.bootstrap}, "value_format": "json",
                       "schema": "customer BIGINT, amount DOUBLE",
                       "ranges": {self.TOPIC: {str(p): (start, start + args.rows) for p in range(args.partitions)}}},
            "target": {"type": "delta", "uri": table.uri, "quarantine_uri": f"{self.work}/quarantine-{name}"},
            "egress": {"allow": ["127.0.0.0/8"]},
        })
        workdir = self.work / "runs" / f"{name}-{seq}"
        workdir.mkdir(parents=True)
        result = self.launcher.launch(spec, workdir=workdir, timeout_s=600)
        assert result.status == "succeeded", result.error
        assert result.files_written is not None
        shutil.rmtree(workdir, ignore_errors=True)
        return result.files_written

    def close(self) -> None:
        self.stack.close()


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

    def after_run(self, files: int) -> None:
        self.small, self.commits = self.small + files, self.commits + 1
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


def drive(args: argparse.Namespace, runs: CommitRuns | WarmRuns, upkeep: Maintenance, tables: dict[str, Table],
          work: Path, checkpoints: set[int]) -> dict[str, float]:
    """The runs into both tables, the figures at each checkpoint; the seconds each table's runs took."""
    off, on = Path(tables["off"].uri), Path(tables["on"].uri)
    (work / "warm").mkdir()  # the first run's one-time costs (imports, the engine, delta-rs's first table) timed for neither
    runs.run(Table(Store({}), str(work / "warm")), 1)
    spent = {"off": 0.0, "on": 0.0}
    print(f"{args.runs} runs x {args.partitions} partitions x {args.rows} rows, "
          f"{'distinct' if args.runs_on == 'warm' else args.payload} payloads, "
          f"runs on {args.runs_on}, maintenance {args.maintenance}; tables in {work}")
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
                files = runs.run(table, seq)
                if name == "on":
                    upkeep.after_run(files)
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
    return spent


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
    parser.add_argument("--runs-on", choices=("commit", "warm"), default="commit",
                        help="warm: each run a Spark run of the job on the warm engine, reading its ranges of a "
                        "topic (the real broker under --kafka-home, else the sandbox); commit: the job's commit alone")
    parser.add_argument("--kafka-home", help="with --runs-on warm: an Apache Kafka distribution (../shared/kafka)")
    args = parser.parse_args()
    checkpoints = {int(c) for c in args.checkpoints.split(",")}
    work = Path(tempfile.mkdtemp(prefix="inlet-table-health-"))
    off, on = work / "off", work / "on"
    off.mkdir()
    on.mkdir()
    tables = {"off": Table(Store({}), str(off)), "on": Table(Store({}), str(on))}
    upkeep = Maintenance(tables["on"], args.maintenance)
    runs = WarmRuns(args, work) if args.runs_on == "warm" else CommitRuns(args)
    try:
        spent = drive(args, runs, upkeep, tables, work, checkpoints)
    finally:
        upkeep.stop()
        runs.close()
    hand, mine = column_bytes(work / "hand"), column_bytes(on)
    print("live bytes per column, on (Inlet's compaction: rows sorted by topic, partition, offset) beside by hand "
          "(delta-rs optimize.compact: rows in arrival order):")
    for column in mine:
        print(f"  {column:>10}  on {mine[column][1]:>10,} ({mine[column][0]})  by hand {hand[column][1]:>10,} "
              f"({hand[column][0]})")
    print(f"runs per minute ({'warm-engine runs' if args.runs_on == 'warm' else 'commits'}, plus maintenance where inline): off {60 * args.runs / spent['off']:.0f}, "
          f"on {60 * args.runs / spent['on']:.0f} = {spent['off'] / spent['on']:.2f}x ({upkeep.tasks} maintenance "
          f"tasks, {args.maintenance})")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
