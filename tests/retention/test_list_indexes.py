"""The list endpoints over big runs and audit tables, on PostgreSQL: every statement a request sends,
EXPLAINed, reads runs and audit events through an index (never a scan of the table), in the order of
the page but for three known sorts bounded by one pipeline or tenant; and each retention batch reads
its table through its age index.

The tables are filled in the server (``INSERT … SELECT`` over ``generate_series``) with enough rows,
across enough pipelines and tenants, that a sequential scan is not the planner's cheapest plan; then
analysed, as autovacuum would have."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event, text
from sqlmodel import Session

from api.core.config import Settings
from api.core.db import unit_of_work, utcnow
from api.retention.service import TABLES, Pass, RetentionPolicy
from tests.factories import Tenant, create_pipeline

HOT_TABLES = ("runs", "audit_events", "run_log_chunks", "webhook_deliveries", "webhook_events",
              "idempotency_records")


@pytest.fixture
def postgres(settings: Settings) -> None:
    if not settings.resolved_database_url.startswith("postgresql"):
        pytest.skip("EXPLAIN plans are PostgreSQL's; SQLite is the fast loop (INLET_TEST_DATABASE_URL)")


def _fill(engine: Any, tenant_id: str, pipeline_id: str) -> None:
    """95,000 runs: 5,000 of the measured pipeline, the rest across 90 other pipelines of 9 other tenants;
    and 100,000 audit events, 2% the measured tenant's, a tenth of those offsets changes."""
    with engine.begin() as conn:
        tenants = [uuid.uuid4() for _ in range(9)]
        conn.execute(text("INSERT INTO tenants (id, name, created_at) VALUES (:id, :name, now())"),
                     [{"id": t, "name": f"bulk-{t.hex[:8]}"} for t in tenants])
        others = [(tenants[i // 10], uuid.uuid4()) for i in range(90)]
        source = conn.execute(text("SELECT connection_id, source, target FROM pipelines WHERE id = :id"),
                              {"id": pipeline_id}).one()
        for tenant, pid in others:  # pipelines of other tenants, on the measured one's connection (no FK to tenant)
            conn.execute(text("""
                INSERT INTO pipelines (id, tenant_id, name, connection_id, source, target, state, last_run_seq,
                                       revision, created_at, updated_at)
                VALUES (:id, :tenant, :name, :conn, CAST(:source AS json), CAST(:target AS json), 'paused', 1000, 1,
                        now(), now())
            """), {"id": pid, "tenant": tenant, "name": f"bulk-{pid.hex[:8]}", "conn": source.connection_id,
                   "source": json.dumps(source.source), "target": json.dumps(source.target)})
        conn.execute(text("UPDATE pipelines SET last_run_seq = 5000 WHERE id = :id"), {"id": pipeline_id})
        conn.execute(text("CREATE TEMP TABLE bulk_p (n int, id uuid, tenant_id uuid, runs int) ON COMMIT DROP"))
        conn.execute(text("INSERT INTO bulk_p VALUES (:n, :id, :tenant, :runs)"),
                     [{"n": 0, "id": pipeline_id, "tenant": tenant_id, "runs": 5000}]
                     + [{"n": i + 1, "id": pid, "tenant": t, "runs": 1000} for i, (t, pid) in enumerate(others)])
        conn.execute(text("""
            INSERT INTO runs (id, tenant_id, pipeline_id, seq, state, trigger, plan, attempt, cancel_requested,
                              records_read, rows_written, bytes_read, created_at, started_at, claimed_at, finished_at)
            SELECT gen_random_uuid(), p.tenant_id, p.id, s,
                   CASE WHEN s % 50 = 7 THEN 'failed' ELSE 'succeeded' END, 'schedule', '{"partitions": []}',
                   1, false, 0, 0, 0, f - interval '40 seconds', f - interval '40 seconds',
                   f - interval '40 seconds', f
            FROM bulk_p p CROSS JOIN LATERAL generate_series(1, p.runs) s
                 CROSS JOIN LATERAL (SELECT now() - interval '120 days' * (1 - s::float8 / p.runs) AS f) t
            ORDER BY f
        """))
        conn.execute(text("""
            INSERT INTO run_log_chunks (run_id, chunk, text, created_at)
            SELECT id, 1, 'done', finished_at FROM runs ORDER BY finished_at
        """))
        conn.execute(text("""
            INSERT INTO audit_events (id, tenant_id, actor, resource_type, resource_id, action, created_at)
            SELECT gen_random_uuid(), p.tenant_id, 'bulk', CASE WHEN i % 500 = 0 THEN 'offsets' ELSE 'run' END,
                   CASE WHEN i % 500 = 0 THEN p.id::text ELSE gen_random_uuid()::text END, 'update',
                   now() - interval '400 days' * random()
            FROM generate_series(1, 100000) i JOIN bulk_p p ON p.n = CASE WHEN i % 50 = 0 THEN 0 ELSE 1 + i % 90 END
            ORDER BY 7
        """))
    with engine.connect() as conn:
        conn.execution_options(isolation_level="AUTOCOMMIT").execute(text("ANALYZE"))


class Captured:
    def __init__(self, engine: Any) -> None:
        self.engine, self.seen = engine, list[tuple[str, Any]]()
        event.listen(engine, "before_cursor_execute", self._record)

    def _record(self, conn: Any, cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        if statement.lstrip().upper().startswith(("SELECT", "WITH", "DELETE")):
            self.seen.append((statement, parameters))

    def take(self) -> list[tuple[str, Any]]:
        seen, self.seen = self.seen, []
        return seen


def _nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", []):
        yield from _nodes(child)


def _plan(engine: Any, statement: str, parameters: Any) -> list[dict[str, Any]]:
    with engine.connect() as conn:
        trans = conn.begin()
        try:
            plan = conn.exec_driver_sql("EXPLAIN (FORMAT JSON) " + statement, parameters).scalar_one()
        finally:
            trans.rollback()
    return list(_nodes(plan[0]["Plan"]))


def _bad(nodes: list[dict[str, Any]], tables: tuple[str, ...] = HOT_TABLES) -> list[str]:
    """What a plan does that does not stay fast as the tables grow: a sequential scan of a hot table, or
    a full sort of a hot table's rows (a page comes in index order; an incremental sort, of rows already
    in the order of the index's leading column, is fine)."""
    bad = [f"{n['Node Type']} on {n['Relation Name']}" for n in nodes
           if n["Node Type"] == "Seq Scan" and n.get("Relation Name") in tables]
    for n in nodes:
        if n["Node Type"] == "Sort":
            scanned = {m.get("Relation Name") for m in _nodes(n)}
            bad += [f"Sort over {name}" for name in sorted(scanned & set(tables), key=str)]
    return bad


@pytest.fixture
def filled(postgres: None, client: TestClient, app: Any, tenant: Tenant) -> str:
    """The measured pipeline's id, the tables filled."""
    pid: str = create_pipeline(client, tenant, state="paused")["id"]
    _fill(app.state.engine, tenant.id, pid)
    return pid


def test_the_list_endpoints_read_runs_and_audit_events_through_indexes(
    filled: str, client: TestClient, app: Any, tenant: Tenant,
) -> None:
    engine, pid = app.state.engine, filled
    captured = Captured(engine)
    paths = [f"/pipelines/{pid}/runs", f"/pipelines/{pid}/runs?sort=seq", f"/pipelines/{pid}/runs?sort=-state",
             f"/pipelines/{pid}/runs?state=failed",
             f"/pipelines/{pid}/offsets/history", "/audit-events", "/audit-events?resource_type=offsets",
             f"/pipelines/{pid}", "/pipelines"]
    problems: dict[str, list[str]] = {}
    plans = 0
    for path in paths:
        captured.take()
        response = client.get(path, headers=tenant.viewer)
        assert response.status_code == 200, (path, response.text)
        for statement, parameters in captured.take():
            nodes = _plan(engine, statement, parameters)
            plans += 1
            if bad := _bad(nodes):
                problems.setdefault(path.replace(pid, "{id}"), []).extend(bad)
    assert plans >= 2 * len(paths) - 2
    # Known, and bounded by one pipeline or tenant rather than by the table: sorting by seq sorts the pipeline's runs
    # (ORDER BY seq, id: no index has both), a state filter sorts that state's runs (a few per cent),
    # and the audit log by resource type sorts the tenant's events of that type. Every other page and
    # count reads in index order.
    assert problems == {
        "/pipelines/{id}/runs?sort=seq": ["Sort over runs"],
        "/pipelines/{id}/runs?state=failed": ["Sort over runs"],
        "/audit-events?resource_type=offsets": ["Sort over audit_events"],
    }


def test_each_retention_batch_reads_its_table_through_an_index(filled: str, app: Any) -> None:
    engine = app.state.engine
    captured = Captured(engine)
    # 50 rows a batch here is the share of the table 1,000 is at a million rows (a planner prefers a scan
    # to a thousand index lookups in a table of a hundred thousand); the webhook and idempotency tables
    # are empty here, so only the filled ones are judged.
    policy = RetentionPolicy.of(Settings(retention_batch_size=50))
    running = Pass.start(policy, utcnow())
    problems: dict[str, list[str]] = {}
    for table in TABLES:
        with engine.connect() as conn:  # one batch, rolled back: only its statements are wanted
            trans = conn.begin()
            captured.take()
            with Session(bind=conn) as session:
                table.prune(session, running.cutoffs[table.name], None, policy.batch_size)
            statements = captured.take()
            trans.rollback()
        assert statements, table.name
        for statement, parameters in statements:
            if bad := _bad(_plan(engine, statement, parameters), ("runs", "run_log_chunks", "audit_events")):
                problems[f"{table.name}: {' '.join(statement.split())[:160]}"] = bad
    for where, bad in problems.items():
        print(where, bad)
    assert problems == {}
    with unit_of_work(engine) as session:  # nothing was deleted by the rolled-back batches
        assert session.execute(text("SELECT count(*) FROM runs")).scalar_one() == 5000 + 90 * 1000
