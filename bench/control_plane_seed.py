"""The databases of bench/control_plane_growth.py: a private PostgreSQL (fsync on), fresh databases at
Alembic head, and Inlet's own tables seeded in the server (``INSERT … SELECT`` over
``generate_series``): tenants, pipelines, runs spread over 120 days with their committed ranges and log
chunks, the partitions' committed offsets, and audit events over 400 days.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqlalchemy import create_engine, insert, text

from api.core.db import make_engine, unit_of_work, utcnow
from api.core.migrate import upgrade_to_head
from api.core.security import new_api_key
from api.models import ApiKey, Connection, Pipeline, Tenant
from cli.local_stack import free_port

TOPIC = "orders"


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
