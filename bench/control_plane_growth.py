"""Inlet's own tables at a million rows: the pages and list endpoints beside the same with a thousand,
and retention pruning them while runs are written.

Two databases on one PostgreSQL server (a private one started here, fsync on, unless
``--database-url`` names a server to create them on), both at Alembic head:

- small: ``--small`` runs and as many audit events (10 tenants × 5 pipelines: 20 runs a pipeline);
- large: ``--runs`` runs and ``--audit`` audit events across ``--tenants`` tenants × ``--pipelines-per-tenant``
  pipelines (1,000 runs a pipeline by default), spread over 120 days (audit: 400 days), each succeeded
  run with its committed range per partition and one log chunk, the partitions' committed offsets; plus
  one hot pipeline with ``--hot-runs`` runs. Generated in the server (``INSERT … SELECT`` over
  ``generate_series``), which takes seconds, not an hour (bench/control_plane_seed.py).

Measured in the same run, each database through the app in-process (FastAPI's test client, no HTTP
server): p50/p99 of ``--requests`` sequential calls (the two databases taking turns) to the portal's
pipeline page, ``GET /pipelines/{id}/runs`` (each sort, and a state filter), ``GET
/pipelines/{id}/offsets`` (which asks Kafka for the watermarks: the sandbox Kafka, ``inlet
sandbox-kafka``, a real Kafka wire protocol server, is started for it), the portal's offsets page
(history from the audit log) and ``GET /audit-events``; the ratio large/small for each (target: p99
within 1.5×).

``--explain``: every statement those requests (and one batch of each retention prune) send, run again
under ``EXPLAIN ANALYZE`` on the large database, with the indexes of migration 0010 and as before it (its
indexes dropped and the ones it replaced made again, in a transaction that is rolled back).

Then retention prunes the large database with the default settings (90 days of runs, 14 of logs, 365
of audit) in one continuous pass, while a writer creates, claims and ends runs through the real
lifecycle: rows deleted per second for each table, and the writer's run-insert latency during the
pass beside the same writer with no pass.

    .venv/bin/python bench/control_plane_growth.py [--runs 1000000] [--audit 1000000] [--explain]
        [--database-url postgresql+psycopg://postgres@127.0.0.1:5432/postgres]
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from control_plane_seed import TOPIC, Seeded, fresh_database, private_postgres, seed  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402
from sqlalchemy import Engine, create_engine, event  # noqa: E402
from sqlmodel import Session, select  # noqa: E402

from api.core.config import Settings  # noqa: E402
from api.core.db import make_engine, unit_of_work, utcnow  # noqa: E402
from api.main import create_app  # noqa: E402
from api.models import Pipeline  # noqa: E402
from api.retention.service import Retention, RetentionPolicy  # noqa: E402
from cli.local_stack import LocalStack  # noqa: E402

OPERATOR = "bench-operator-token-0123456789abcdef"

def _migration_0010() -> Any:
    path = ROOT / "migrations" / "versions" / "20261126_0010_retention.py"
    spec = importlib.util.spec_from_file_location("migration_0010", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# Before migration 0010: its indexes dropped, the ones it replaced back.
MIGRATION_0010 = _migration_0010()
BEFORE_0010 = [f"DROP INDEX IF EXISTS {name}" for name, _, _ in MIGRATION_0010.INDEXES] + [
    f"CREATE INDEX {name} ON {table} ({', '.join(columns)})" for name, table, columns in MIGRATION_0010.DROPPED]


# Measuring requests.

class Statements:
    """The SELECTs an engine sends while ``on``."""

    def __init__(self, engine: Engine) -> None:
        self.on = False
        self.seen: list[tuple[str, Any]] = []
        event.listen(engine, "before_cursor_execute", self._record)

    def _record(self, conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool) -> None:
        if self.on and statement.lstrip().upper().startswith(("SELECT", "WITH", "DELETE", "INSERT")):
            self.seen.append((statement, parameters))

    @contextmanager
    def capture(self) -> Iterator[list[tuple[str, Any]]]:
        self.seen, self.on = [], True
        try:
            yield self.seen
        finally:
            self.on = False


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


@dataclass
class Target:
    """A database with the app on it and a signed-in portal session."""

    seeded: Seeded
    client: TestClient
    statements: Statements
    auth: dict[str, str] = field(default_factory=dict)

    def endpoints(self) -> dict[str, str]:
        pid = self.seeded.pipeline_id
        out = {
            "portal: pipeline page": f"/portal/pipelines/{pid}",
            "portal: offsets page (history)": f"/portal/pipelines/{pid}/offsets",
            "GET /pipelines/{id}/runs": f"/pipelines/{pid}/runs",
            "GET /pipelines/{id}/runs?sort=seq": f"/pipelines/{pid}/runs?sort=seq",
            "GET /pipelines/{id}/runs?sort=-state": f"/pipelines/{pid}/runs?sort=-state",
            "GET /pipelines/{id}/runs?state=failed": f"/pipelines/{pid}/runs?state=failed",
            "GET /pipelines/{id}/offsets": f"/pipelines/{pid}/offsets",
            "GET /pipelines/{id}/offsets/history": f"/pipelines/{pid}/offsets/history",
            "GET /audit-events": "/audit-events",
            "GET /audit-events?resource_type=offsets": "/audit-events?resource_type=offsets",
        }
        if self.seeded.hot_pipeline_id:
            out["GET /pipelines/{hot}/runs"] = f"/pipelines/{self.seeded.hot_pipeline_id}/runs"
            out["portal: hot pipeline page"] = f"/portal/pipelines/{self.seeded.hot_pipeline_id}"
        return out

    def get(self, path: str) -> float:
        headers = {} if path.startswith("/portal") else self.auth
        began = time.perf_counter()
        response = self.client.get(path, headers=headers)
        took = (time.perf_counter() - began) * 1000
        if response.status_code != 200:
            raise RuntimeError(f"GET {path}: {response.status_code} {response.text[:300]}")
        return took


@contextmanager
def target(seeded: Seeded) -> Iterator[Target]:
    settings = Settings(database_url=seeded.url, admin_token=OPERATOR, data_dir=Path(tempfile.mkdtemp()),
                        egress_allow=["127.0.0.0/8", "::1/128"], egress_lookup_s=0,
                        redis_url="redis://127.0.0.1:1/0")
    app = create_app(settings)
    statements = Statements(app.state.engine)
    with TestClient(app) as client:
        login = client.get("/portal/login")
        csrf = re.search(r'name="csrf_token" value="([^"]+)"', login.text)
        assert csrf, "no sign-in form"
        done = client.post("/portal/login", data={"api_key": seeded.key, "csrf_token": csrf.group(1),
                                                  "next": "/portal/pipelines"}, follow_redirects=False)
        assert done.status_code == 303, done.text
        yield Target(seeded, client, statements, {"Authorization": f"Bearer {seeded.key}"})
    app.state.engine.dispose()


def measure(targets: dict[str, Target], requests: int) -> dict[str, dict[str, tuple[float, float]]]:
    """p50 and p99 of each endpoint on each target, the targets' requests taking turns: a moment of
    noise on this machine (a daemon, the other core busy) falls on both sides, not on whichever was
    measured then (measured one after the other, single slow requests made either side's p99)."""
    out: dict[str, dict[str, tuple[float, float]]] = {name: {} for name in targets}
    labels = list(dict.fromkeys(label for t in targets.values() for label in t.endpoints()))
    for label in labels:
        paths = {name: t.endpoints()[label] for name, t in targets.items() if label in t.endpoints()}
        for name, path in paths.items():
            for _ in range(min(20, requests)):  # warm: connections, Kafka clients, statement caches
                targets[name].get(path)
        taken: dict[str, list[float]] = {name: [] for name in paths}
        for _ in range(requests):
            for name, path in paths.items():
                taken[name].append(targets[name].get(path))
        for name, samples in taken.items():
            out[name][label] = percentiles(samples)
    return out


# EXPLAIN ANALYZE of what the requests send.

def explain(url: str, statements: list[tuple[str, Any]], *, first: list[str] | None = None) -> list[tuple[float, str]]:
    """Each statement's execution time (ms) and its plan's scans, run in one transaction that is rolled back
    (so DELETEs delete nothing, and what ``first`` changes in the schema is undone)."""
    engine = create_engine(url)
    out = []
    with engine.connect() as conn:
        trans = conn.begin()
        try:
            for ddl in first or []:
                conn.exec_driver_sql(ddl)
            if first:
                conn.exec_driver_sql("ANALYZE runs, audit_events")
            for statement, parameters in statements:
                conn.exec_driver_sql("SAVEPOINT e")
                plan = conn.exec_driver_sql("EXPLAIN (ANALYZE, FORMAT JSON) " + statement, parameters).scalar_one()
                conn.exec_driver_sql("ROLLBACK TO SAVEPOINT e")
                top = plan[0]
                out.append((top["Execution Time"], ", ".join(sorted(set(_scans(top["Plan"]))))))
        finally:
            trans.rollback()
    engine.dispose()
    return out


def _scans(node: dict[str, Any]) -> Iterator[str]:
    kind = node["Node Type"]
    if "Scan" in kind and "Relation Name" in node:
        how = f" using {node['Index Name']}" if node.get("Index Name") else ""
        yield f"{kind} on {node['Relation Name']}{how}"
    if kind == "Sort":
        yield "Sort"
    for child in node.get("Plans", []):
        yield from _scans(child)


def _summary(statement: str) -> str:
    flat = " ".join(statement.split())
    found = re.search(r"\bFROM (\w+)", flat)
    verb = flat.split(" ", 1)[0]
    return f"{verb} {found.group(1) if found else ''}"


def explain_endpoints(t: Target, url: str) -> None:
    print("\nEXPLAIN ANALYZE on the large database: each statement's execution time before migration 0010's indexes "
          "-> after, and the scans after (before, when they differ)")
    cases: list[tuple[str, list[tuple[str, Any]]]] = []
    for name, path in t.endpoints().items():
        with t.statements.capture() as seen:
            t.get(path)
        cases.append((name, list(seen)))
    cases.append(("retention batches", prune_statements(t)))
    picked = [[(s, p) for s, p in statements if re.search(r"\bFROM\b", s, re.IGNORECASE)] for _, statements in cases]
    every = [statement for statements in picked for statement in statements]
    after, before = iter(explain(url, every)), iter(explain(url, every, first=BEFORE_0010))
    for (name, _), statements in zip(cases, picked, strict=True):
        print(f"  {name}")
        for statement, _ in statements:
            (after_ms, after_plan), (before_ms, before_plan) = next(after), next(before)
            print(f"    {_summary(statement):<32} {before_ms:9.2f} ms -> {after_ms:8.2f} ms   {after_plan}")
            if before_plan != after_plan:
                print(f"    {'':<32} {'':>25}   (before: {before_plan})")


def prune_statements(t: Target) -> list[tuple[str, Any]]:
    """The statements of one batch of each table, captured from a pass rolled back as it goes."""
    from api.retention import service

    policy = RetentionPolicy.of(Settings())
    seen: list[tuple[str, Any]] = []
    engine = t.client.app.state.engine  # type: ignore[attr-defined]
    running = service.Pass.start(policy, utcnow())
    for table in service.TABLES:
        with engine.connect() as conn:
            trans = conn.begin()
            with Session(bind=conn) as session, t.statements.capture() as captured:
                table.prune(session, running.cutoffs[table.name], None, policy.batch_size)
            seen.extend(s for s in captured if not s[0].lstrip().upper().startswith("SET"))
            trans.rollback()
    return seen


# Pruning beside a writer.

class Writer:
    """Runs created, claimed and ended (succeeded, offsets committed) through the real lifecycle, one
    pipeline after another; the latency of each run's insert (``create_run``'s transaction) and of the whole."""

    def __init__(self, engine: Engine, pipelines: list[uuid.UUID], partitions: int) -> None:
        self.engine, self.pipelines, self.partitions = engine, pipelines, partitions
        self.inserts: list[float] = []
        self.cycles: list[float] = []
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        from api.ledger.models import PartitionOffset
        from api.runs import execution, lifecycle
        from api.runs.planning import PartitionPlan, Plan
        from api.runs.retry import RetryPolicy
        from spark_jobs.spec import PartitionResult, RunResult, Timings

        i = 0
        try:
            while not self.stop.is_set():
                pid = self.pipelines[i % len(self.pipelines)]
                i += 1
                began = time.perf_counter()
                with unit_of_work(self.engine) as session:
                    pipeline = session.get(Pipeline, pid)
                    assert pipeline is not None
                    stored = {r.partition: r.committed for r in session.exec(
                        select(PartitionOffset).where(PartitionOffset.pipeline_id == pid)).all()}
                    plan = Plan(partitions=[PartitionPlan(topic=TOPIC, partition=k, start=stored.get(k, 0),
                                                          end=stored.get(k, 0) + 100, earliest=0,
                                                          latest=stored.get(k, 0) + 100, committed=stored.get(k))
                                            for k in range(self.partitions)])
                    run_id = lifecycle.create_run(session, pipeline, trigger="manual", plan=plan).id
                self.inserts.append((time.perf_counter() - began) * 1000)
                with unit_of_work(self.engine) as session:
                    assert lifecycle.claim(session, run_id, worker="bench", lease_s=60) is not None
                now = utcnow()
                result = RunResult(run_id=str(run_id), status="succeeded", rows_written=100 * self.partitions,
                                   rows_quarantined=0, bytes_read=0, timings=Timings(started_at=now, finished_at=now),
                                   partitions=[PartitionResult(topic=TOPIC, partition=p.partition, start=p.start,
                                                               end=p.end, records_read=100) for p in plan.partitions])
                with unit_of_work(self.engine) as session:
                    execution.record_result(session=session, run_id=run_id, worker="bench", result=result,
                                            retry=RetryPolicy(max_attempts=1, backoff_s=0))
                self.cycles.append((time.perf_counter() - began) * 1000)
        except BaseException as exc:  # noqa: BLE001 (reported by the main thread)
            self.error = exc

    @contextmanager
    def running(self) -> Iterator[Writer]:
        thread = threading.Thread(target=self.run, name="writer")
        thread.start()
        try:
            yield self
        finally:
            self.stop.set()
            thread.join(60)
            if self.error:
                raise self.error


def prune_beside_writer(seeded: Seeded, partitions: int, baseline_s: float, batch_size: int) -> None:
    engine = make_engine(seeded.url)
    idle = Writer(engine, seeded.writer_pipelines, partitions)
    with idle.running():
        time.sleep(baseline_s)
    policy = RetentionPolicy.of(Settings(retention_batch_size=batch_size, retention_budget_s=24 * 3600))
    retention = Retention()
    busy = Writer(engine, seeded.writer_pipelines, partitions)
    with busy.running():
        began = time.perf_counter()
        retention.tick(engine, policy)  # one continuous pass: the budget is a day
        took = time.perf_counter() - began
    done = retention.last
    assert retention.running is None and done is not None, "the pass did not finish"
    engine.dispose()
    last = {name: (done.deleted[name], done.seconds.get(name, 0.0)) for name in done.cutoffs}
    print(f"\nretention pass on the large database (defaults: runs 90 d, logs 14 d, audit 365 d; batches of "
          f"{batch_size}), {took:.1f}s in all, with a writer ending runs beside it:")
    for name, (rows, seconds) in last.items():
        rate = rows / seconds if seconds else 0.0
        print(f"  {name:<20} {rows:>9,} rows in {seconds:6.1f}s  {rate:>9,.0f} rows/s")
    total = sum(r for r, _ in last.values())
    print(f"  {'all':<20} {total:>9,} rows in {took:6.1f}s  {total / took:>9,.0f} rows/s")
    for label, writer in (("no pass", idle), ("during the pass", busy)):
        ins, cyc = percentiles(writer.inserts), percentiles(writer.cycles)
        print(f"  writer, {label:<16} {len(writer.inserts):>5} runs: insert p50 {ins[0]:6.2f} ms p99 {ins[1]:7.2f} ms; "
              f"whole run (create, claim, commit) p50 {cyc[0]:6.2f} ms p99 {cyc[1]:7.2f} ms")
    ratio = percentiles(busy.inserts)[1] / percentiles(idle.inserts)[1]
    print(f"  writer's insert p99 during the pass / without: {ratio:.2f}x")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", help="a PostgreSQL server to create the two databases on")
    parser.add_argument("--runs", type=int, default=1_000_000)
    parser.add_argument("--audit", type=int, default=1_000_000)
    parser.add_argument("--small", type=int, default=1000)
    parser.add_argument("--tenants", type=int, default=100)
    parser.add_argument("--pipelines-per-tenant", type=int, default=10)
    parser.add_argument("--hot-runs", type=int, default=100_000, help="runs of one more pipeline (0: none)")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--requests", type=int, default=200, help="per endpoint and database")
    parser.add_argument("--explain", action="store_true")
    parser.add_argument("--no-prune", action="store_true")
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--writer-baseline-s", type=float, default=15.0)
    args = parser.parse_args()

    stack = LocalStack(Path(tempfile.mkdtemp(prefix="inlet-growth-")))
    with (private_postgres() if not args.database_url else _given(args.database_url)) as server:
        try:
            bootstrap = stack.start_sandbox(f"{TOPIC}:{args.partitions}", brokers=1)
            print(f"PostgreSQL {server.rsplit('@', 1)[-1]}; the sandbox Kafka at {bootstrap}")
            per_pipeline = max(1, args.runs // (args.tenants * args.pipelines_per_tenant))
            large = seed(fresh_database(server, "growth_large"), tenants=args.tenants,
                         per_tenant=args.pipelines_per_tenant, runs_per_pipeline=per_pipeline, audit=args.audit,
                         partitions=args.partitions, hot_runs=args.hot_runs, bootstrap=bootstrap)
            small = seed(fresh_database(server, "growth_small"), tenants=1, per_tenant=1, runs_per_pipeline=args.small,
                         audit=args.small, partitions=args.partitions, hot_runs=0, bootstrap=bootstrap)
            for name, s in (("small", small), ("large", large)):
                print(f"{name}: {s.runs:,} runs ({args.partitions} partitions each: ranges, 1 log chunk), "
                      f"{s.audit:,} audit events; seeded and analysed in {s.seconds:.1f}s")
            with target(small) as on_small, target(large) as on_large:
                figures = measure({"small": on_small, "large": on_large}, args.requests)
                if args.explain:
                    explain_endpoints(on_large, large.url)
            print(f"\n{'p50 / p99 in ms, ' + str(args.requests) + ' sequential requests':<46} {'small':>17} "
                  f"{'large':>17}  p99 large/small")
            worst = 0.0
            for name, (p50, p99) in figures["large"].items():
                base = figures["small"].get(name)
                if base is None:  # the hot pipeline is the large database's only
                    print(f"{name:<46} {'-':>17} {p50:8.2f} {p99:8.2f}  (a pipeline with {args.hot_runs:,} runs)")
                    continue
                ratio = p99 / base[1]
                worst = max(worst, ratio)
                print(f"{name:<46} {base[0]:8.2f} {base[1]:8.2f} {p50:8.2f} {p99:8.2f}  {ratio:5.2f}x")
            print(f"target: p99 at {large.runs:,} runs within 1.5x of {small.runs:,}: "
                  f"{'met' if worst <= 1.5 else 'NOT met'} (worst {worst:.2f}x)")
            if not args.no_prune:
                prune_beside_writer(large, args.partitions, args.writer_baseline_s, args.batch_size)
        finally:
            stack.stop()
    return 0


@contextmanager
def _given(url: str) -> Iterator[str]:
    yield url


if __name__ == "__main__":
    raise SystemExit(main())
