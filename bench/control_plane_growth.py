"""Inlet's own tables at a million rows: the pages and list endpoints beside the same with a thousand,
and retention pruning them while runs are written.

Two databases on one PostgreSQL server (a private one started here, fsync on, unless
``--database-url`` names a server to create them on), both at Alembic head:

- small: ``--small`` runs and as many audit events (10 tenants × 5 pipelines: 20 runs a pipeline);
- large: ``--runs`` runs and ``--audit`` audit events across ``--tenants`` tenants × ``--pipelines-per-tenant``
  pipelines (1,000 runs a pipeline by default), spread over 120 days (audit: 400 days), each succeeded
  run with its committed range per partition and one log chunk, the partitions' committed offsets; plus
  one hot pipeline with ``--hot-runs`` runs. Generated in the server (``INSERT … SELECT`` over
  ``generate_series``), which takes seconds, not an hour.

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
import json
import os
import re
import shutil
import statistics
import subprocess
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

from fastapi.testclient import TestClient  # noqa: E402
from sqlalchemy import Engine, create_engine, event, insert, text  # noqa: E402
from sqlmodel import Session, select  # noqa: E402

from api.core.config import Settings  # noqa: E402
from api.core.db import make_engine, unit_of_work, utcnow  # noqa: E402
from api.core.migrate import upgrade_to_head  # noqa: E402
from api.core.security import new_api_key  # noqa: E402
from api.main import create_app  # noqa: E402
from api.models import ApiKey, Connection, Pipeline, Tenant  # noqa: E402
from api.retention.service import Retention, RetentionPolicy  # noqa: E402
from cli.local_stack import LocalStack, free_port  # noqa: E402

TOPIC = "orders"
OPERATOR = "bench-operator-token"

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


# A private PostgreSQL, as scripts/services.sh starts one (with fsync on: commit latencies are measured).

@contextmanager
def private_postgres() -> Iterator[str]:
    bindir = max(Path("/usr/lib/postgresql").glob("*/bin"))
    workdir = Path(tempfile.mkdtemp(prefix="inlet-growth-pg-"))
    as_postgres: list[str] = []
    if os.geteuid() == 0:
        shutil.chown(workdir, "postgres", "postgres")
        as_postgres = ["runuser", "-u", "postgres", "--"]
    port = free_port()
    subprocess.run([*as_postgres, str(bindir / "initdb"), "-D", str(workdir / "data"), "-U", "postgres",
                    "--auth=trust", "-E", "UTF8"], check=True, stdout=subprocess.DEVNULL)
    options = (f"-c listen_addresses=127.0.0.1 -p {port} -k {workdir} -c shared_buffers=512MB -c work_mem=16MB "
               "-c maintenance_work_mem=512MB -c max_wal_size=4GB -c max_connections=50")
    subprocess.run([*as_postgres, str(bindir / "pg_ctl"), "-D", str(workdir / "data"), "-l", str(workdir / "log"),
                    "-w", "-o", options, "start"], check=True, stdout=subprocess.DEVNULL)
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run([*as_postgres, str(bindir / "pg_ctl"), "-D", str(workdir / "data"), "-m", "fast", "-w",
                        "stop"], check=False, stdout=subprocess.DEVNULL)
        shutil.rmtree(workdir, ignore_errors=True)


def fresh_database(server: str, name: str) -> str:
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    url = server.rsplit("/", 1)[0] + f"/{name}"
    upgrade_to_head(url)
    return url


# Seeding.

@dataclass
class Seeded:
    url: str
    key: str  # an admin key of the first tenant
    pipeline_id: uuid.UUID  # the first tenant's first pipeline: what is measured
    hot_pipeline_id: uuid.UUID | None
    writer_pipelines: list[uuid.UUID]  # the concurrent writer's (the last tenant's)
    runs: int = 0
    audit: int = 0
    seconds: float = 0.0


def _plan_template(partitions: int) -> str:
    parts = [{"topic": TOPIC, "partition": p, "start": "@S", "end": "@E", "earliest": 0, "latest": "@E",
              "committed": "@S"} for p in range(partitions)]
    return json.dumps({"partitions": parts}).replace('"@S"', "@S").replace('"@E"', "@E")


def seed(url: str, *, tenants: int, per_tenant: int, runs_per_pipeline: int, audit: int, partitions: int,
         hot_runs: int, bootstrap: str) -> Seeded:
    began = time.perf_counter()
    engine = make_engine(url)
    now = utcnow()
    tenant_ids = [uuid.uuid4() for _ in range(tenants)]
    conns = {t: uuid.uuid4() for t in tenant_ids}
    pipelines = [(tenant_ids[i // per_tenant], uuid.uuid4()) for i in range(tenants * per_tenant)]
    key, prefix, digest = new_api_key()
    with unit_of_work(engine) as session:
        session.execute(insert(Tenant), [{"id": t, "name": f"t-{t.hex[:10]}", "created_at": now} for t in tenant_ids])
        session.execute(insert(ApiKey), [{"id": uuid.uuid4(), "tenant_id": tenant_ids[0], "name": "bench",
                                          "role": "admin", "prefix": prefix, "key_hash": digest, "created_at": now}])
        session.execute(insert(Connection), [
            {"id": conns[t], "tenant_id": t, "name": "kafka", "bootstrap_servers": bootstrap,
             "security_protocol": "PLAINTEXT", "options": {}, "revision": 1, "created_at": now, "updated_at": now}
            for t in tenant_ids])
        session.execute(insert(Pipeline), [
            {"id": pid, "tenant_id": t, "name": f"p-{i:05d}", "connection_id": conns[t],
             "source_as_written": {"connection_id": str(conns[t]), "topics": [TOPIC]},
             "target_as_written": {"type": "delta", "path": f"p{i}"}, "schedule_as_written": None, "state": "paused",
             "next_run_at": None, "last_run_seq": 0, "revision": 1, "created_at": now, "updated_at": now}
            for i, (t, pid) in enumerate(pipelines)])
    counts = {pid: runs_per_pipeline for _, pid in pipelines}
    hot = None
    if hot_runs:
        hot = pipelines[1][1] if len(pipelines) > 1 else pipelines[0][1]
        counts[hot] = hot_runs
    writers = [pid for t, pid in pipelines if t == tenant_ids[-1]]
    with engine.begin() as conn:
        conn.execute(text("CREATE TEMP TABLE bench_p (n int, id uuid, tenant_id uuid, runs int)"))
        conn.execute(text("INSERT INTO bench_p VALUES (:n, :id, :tenant_id, :runs)"),
                     [{"n": n, "id": pid, "tenant_id": t, "runs": counts[pid]} for n, (t, pid) in enumerate(pipelines)])
        # Runs: one every 120 days / runs a pipeline, the newest just finished; 2% failed, 1% skipped.
        conn.execute(text("""
            INSERT INTO runs (id, tenant_id, pipeline_id, seq, state, trigger, plan, attempt, cancel_requested,
                              records_read, rows_written, bytes_read, delta_version, created_at, started_at,
                              claimed_at, finished_at)
            SELECT gen_random_uuid(), p.tenant_id, p.id, s,
                   CASE WHEN s % 50 = 7 THEN 'failed' WHEN s % 97 = 3 THEN 'skipped' ELSE 'succeeded' END,
                   'schedule', replace(replace(:plan, '@S', ((s - 1) * 100)::text), '@E', (s * 100)::text)::json,
                   1, false, 100 * :parts, 100 * :parts, 5000 * :parts, s,
                   f - interval '40 seconds', f - interval '40 seconds', f - interval '40 seconds', f
            FROM bench_p p CROSS JOIN LATERAL generate_series(1, p.runs) s
                 CROSS JOIN LATERAL (SELECT :now - interval '120 days' * (1 - s::float8 / p.runs) AS f) t
            ORDER BY f  -- inserted in the order they ran, as a live installation's are
        """), {"plan": _plan_template(partitions), "parts": partitions, "now": now})
        conn.execute(text("""
            UPDATE pipelines SET last_run_seq = p.runs FROM bench_p p WHERE pipelines.id = p.id
        """))
        conn.execute(text("""
            INSERT INTO run_ranges (run_id, topic, partition, pipeline_id, tenant_id, start, "end")
            SELECT r.id, :topic, k, r.pipeline_id, r.tenant_id, (r.seq - 1) * 100, r.seq * 100
            FROM runs r CROSS JOIN generate_series(0, :parts - 1) k WHERE r.state = 'succeeded'
            ORDER BY r.finished_at
        """), {"topic": TOPIC, "parts": partitions})
        conn.execute(text("""
            INSERT INTO partition_offsets (pipeline_id, topic, partition, tenant_id, committed, last_run_id, updated_at)
            SELECT r.pipeline_id, :topic, k, r.tenant_id, r.seq * 100, r.id, r.finished_at
            FROM (SELECT DISTINCT ON (pipeline_id) * FROM runs WHERE state = 'succeeded'
                  ORDER BY pipeline_id, seq DESC) r CROSS JOIN generate_series(0, :parts - 1) k
        """), {"topic": TOPIC, "parts": partitions})
        conn.execute(text("""
            INSERT INTO run_log_chunks (run_id, chunk, text, created_at)
            SELECT id, 1, 'planned ' || :parts || ' partition(s); read ' || records_read || ' records; wrote '
                          || rows_written || ' rows; Delta version ' || seq || repeat('.', 120), finished_at
            FROM runs ORDER BY finished_at
        """), {"parts": partitions})
        # Audit: 70% run triggers, 20% pipeline edits, 10% offsets changes, over 400 days.
        conn.execute(text("""
            INSERT INTO audit_events (id, tenant_id, actor, actor_key_id, resource_type, resource_id, action,
                                      before, after, created_at)
            SELECT gen_random_uuid(), p.tenant_id, 'key:' || p.tenant_id, NULL,
                   CASE WHEN k = 0 THEN 'offsets' WHEN k < 3 THEN 'pipeline' ELSE 'run' END,
                   CASE WHEN k < 3 THEN p.id::text ELSE gen_random_uuid()::text END,
                   CASE WHEN k = 0 THEN 'patch' WHEN k < 3 THEN 'update' ELSE 'trigger' END,
                   CASE WHEN k = 0 THEN json_build_object('offsets', json_build_array(json_build_object(
                        'topic', CAST(:topic AS text), 'partition', 0, 'committed', i))) END,
                   CASE WHEN k = 0 THEN json_build_object('mode', 'shift_by', 'replay_mode', 'append',
                        'offsets', json_build_array(json_build_object('topic', CAST(:topic AS text), 'partition', 0,
                        'committed', i - 100)), 'clamped', json_build_array())
                        ELSE json_build_object('pipeline_id', p.id, 'seq', i) END,
                   :now - interval '400 days' * random()
            FROM generate_series(1, :n) i CROSS JOIN LATERAL (SELECT (i / :pipelines) % 10 AS k) kind
                 JOIN bench_p p ON p.n = i % :pipelines
            ORDER BY 10
        """), {"n": audit, "pipelines": len(pipelines), "topic": TOPIC, "now": now})
        runs = conn.execute(text("SELECT count(*) FROM runs")).scalar_one()
    with create_engine(url, isolation_level="AUTOCOMMIT").connect() as conn:
        conn.execute(text("VACUUM ANALYZE"))
    engine.dispose()
    return Seeded(url=url, key=key, pipeline_id=pipelines[0][1], hot_pipeline_id=hot, writer_pipelines=writers,
                  runs=runs, audit=audit, seconds=time.perf_counter() - began)


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
