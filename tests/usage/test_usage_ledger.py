"""The usage ledger equals the attempts that fed it, for every outcome, and stays when runs and
pipelines go; its upsert is race-safe (two sessions, one bucket)."""

from __future__ import annotations

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

from fastapi.testclient import TestClient
from sqlalchemy import Engine, delete
from sqlmodel import select

from api.core.db import unit_of_work
from api.core.security import Role, TenantContext
from api.runs import lifecycle
from api.runs.models import Run
from api.runs.retry import RunFailure
from api.usage import service as usage
from api.usage.models import UsageHour, UsageTotal
from tests.factories import Tenant, create_pipeline
from tests.usage.helpers import T0, Clock, claim, job_result, record, run_once, start_run

HOUR = T0.replace(minute=0)
ZERO = {"records_read": 0, "rows_written": 0, "rows_quarantined": 0, "rows_violating": 0, "bytes_read": 0, "bytes_written": 0,
        "wall_ms": 0, "engine_ms": 0, "runs_succeeded": 0, "runs_failed": 0, "runs_retried": 0,
        "runs_cancelled": 0, "runs_skipped": 0}


def _hours(engine: Engine, pipeline_id: uuid.UUID | str) -> list[dict]:
    with unit_of_work(engine) as session:
        rows = session.exec(select(UsageHour).where(UsageHour.pipeline_id == uuid.UUID(str(pipeline_id)))
                            .order_by(UsageHour.hour)).all()
        return [row.model_dump() for row in rows]


def test_every_outcome_is_metered_with_exactly_its_figures(client: TestClient, tenant: Tenant, clock: Clock) -> None:
    engine = client.app.state.engine
    pipeline = create_pipeline(client, tenant, state="paused")
    pid = uuid.UUID(pipeline["id"])

    # succeeded: 100 records, 90 rows, 10 quarantined, 5000 bytes in, 7000 out, 30 s wall, 20 s engine
    run_once(engine, clock, pid, records=100, written=90, quarantined=10, violating=12, bytes_read=5000,
             bytes_written=7000)
    # failed for good (not transient): its reading counts, nothing written
    clock.now = T0 + timedelta(minutes=5)
    run_once(engine, clock, pid, took_s=10, records=40, written=0, bytes_read=800, engine_s=5, error="kafka_auth")
    # retried once (transient), then succeeded: both attempts read
    clock.now = T0 + timedelta(minutes=10)
    retried = start_run(engine, clock, pid)
    clock.now += timedelta(seconds=12)
    assert record(engine, retried, job_result(retried, records=50, written=0, bytes_read=1000, engine_s=8,
                                              error="crashed")) == "queued"
    claim(engine, retried)
    clock.now += timedelta(seconds=3)
    assert record(engine, retried, job_result(retried, records=50, written=50, bytes_read=1000,
                                              bytes_written=None, engine_s=2)) == "succeeded"
    # cancelled by its job, and cancelled while queued (no time ran)
    clock.now = T0 + timedelta(minutes=20)
    run_once(engine, clock, pid, took_s=4, records=0, written=0, engine_s=1, error="cancelled")
    with unit_of_work(engine) as session:
        from api.pipelines.models import Pipeline
        queued = lifecycle.create_run(session, session.get(Pipeline, pid), trigger="manual")
        lifecycle.finish(session, queued, "cancelled", error=RunFailure("cancelled", "before it started"))
    # skipped: nothing to read
    clock.now = T0 + timedelta(minutes=30)
    skipped = start_run(engine, clock, pid)
    with unit_of_work(engine) as session:
        from api.runs.planning import Plan
        lifecycle.skip(session, session.get(Run, skipped), Plan(partitions=[]), "nothing new")
    # the next hour
    clock.now = T0 + timedelta(hours=1)
    run_once(engine, clock, pid, records=7, written=7, bytes_read=70, bytes_written=700)

    assert _hours(engine, pid) == [
        {**ZERO, "tenant_id": uuid.UUID(tenant.id), "pipeline_id": pid, "pipeline_name": pipeline["name"],
         "hour": HOUR, "day": HOUR.replace(hour=0), "records_read": 100 + 40 + 50 + 50, "rows_written": 90 + 50,
         "rows_quarantined": 10, "rows_violating": 12, "bytes_read": 5000 + 800 + 1000 + 1000, "bytes_written": 7000,
         "wall_ms": 30_000 + 10_000 + 12_000 + 3_000 + 4_000, "engine_ms": 20_000 + 5_000 + 8_000 + 2_000 + 1_000,
         "runs_succeeded": 2, "runs_failed": 1, "runs_retried": 1, "runs_cancelled": 2, "runs_skipped": 1},
        {**ZERO, "tenant_id": uuid.UUID(tenant.id), "pipeline_id": pid, "pipeline_name": pipeline["name"],
         "hour": HOUR + timedelta(hours=1), "day": HOUR.replace(hour=0), "records_read": 7, "rows_written": 7,
         "bytes_read": 70, "bytes_written": 700, "wall_ms": 30_000, "engine_ms": 20_000, "runs_succeeded": 1},
    ]
    with unit_of_work(engine) as session:
        total = session.get(UsageTotal, (uuid.UUID(tenant.id), pid))
        assert total is not None
        assert (total.records_read, total.runs_succeeded + total.runs_failed + total.runs_retried
                + total.runs_cancelled + total.runs_skipped, total.wall_ms) == (247, 8, 89_000)
        # attempts of 0, 0, 3, 4, 10, 12, 30 and 30 s, in cumulative buckets
        assert (total.attempts_le_10s, total.attempts_le_30s, total.attempts_le_60s) == (5, 8, 8)


def test_the_runs_and_the_ledger_agree(client: TestClient, tenant: Tenant, clock: Clock) -> None:
    engine = client.app.state.engine
    pid = create_pipeline(client, tenant, state="paused")["id"]
    for i in range(3):
        clock.now = T0 + timedelta(minutes=i)
        run_once(engine, clock, pid, records=10 * (i + 1), written=10 * (i + 1), bytes_read=100 * (i + 1))
    with unit_of_work(engine) as session:
        runs = session.exec(select(Run).where(Run.pipeline_id == uuid.UUID(pid))).all()
        hour = session.exec(select(UsageHour).where(UsageHour.pipeline_id == uuid.UUID(pid))).one()
        assert (hour.records_read, hour.rows_written, hour.bytes_read) == (
            sum(r.records_read or 0 for r in runs), sum(r.rows_written or 0 for r in runs),
            sum(r.bytes_read or 0 for r in runs)) == (60, 60, 600)


def test_usage_stays_when_runs_are_pruned_and_the_pipeline_is_deleted(client: TestClient, tenant: Tenant, clock: Clock) -> None:
    engine = client.app.state.engine
    pipeline = create_pipeline(client, tenant, state="paused")
    pid = uuid.UUID(pipeline["id"])
    run_once(engine, clock, pid, records=5, written=5, bytes_read=50)
    before = _hours(engine, pid)
    with unit_of_work(engine) as session:
        session.execute(delete(Run).where(Run.pipeline_id == pid))  # as a pruning of old runs would
    assert _hours(engine, pid) == before
    assert client.delete(f"/pipelines/{pid}", headers=tenant.editor).status_code == 204
    assert _hours(engine, pid) == before
    with unit_of_work(engine) as session:
        report = usage.tenant_report(session=session, ctx=TenantContext(tenant_id=uuid.UUID(tenant.id),
                                                                         role=Role.viewer, key_id=None, actor="test"),
                                     query=usage.UsageQuery.of(start=HOUR, end=HOUR + timedelta(hours=1),
                                                               granularity="hour", pipeline_id=pid, now=T0))
    assert [(r.pipeline_id, r.pipeline_name, r.records_read) for r in report.items] == [(pid, pipeline["name"], 5)]


def test_two_sessions_metering_one_bucket_both_count(client: TestClient, tenant: Tenant) -> None:
    engine = client.app.state.engine
    pid = uuid.UUID(create_pipeline(client, tenant, state="paused")["id"])
    figures = usage.Figures(records_read=3, rows_written=3)
    for _ in range(2):  # the second finds the row the first inserted: the conflict branch adds
        with unit_of_work(engine) as session:
            usage.meter(session, tenant_id=uuid.UUID(tenant.id), pipeline_id=pid, pipeline_name="p",
                        outcome="succeeded", figures=figures, wall_s=1.5, at=T0)
    rows = _hours(engine, pid)
    assert [(r["records_read"], r["rows_written"], r["runs_succeeded"], r["wall_ms"]) for r in rows] == [(6, 6, 2, 3000)]


def test_attempts_ending_at_once_in_one_bucket_all_count(client: TestClient, tenant: Tenant) -> None:
    """Eight sessions meter the same new bucket at the same moment: the first insert wins, the others
    take the conflict branch and add (on PostgreSQL truly concurrently; SQLite serialises writers)."""
    engine = client.app.state.engine
    pid = uuid.UUID(create_pipeline(client, tenant, state="paused")["id"])
    start = threading.Barrier(8)

    def attempt() -> None:
        with unit_of_work(engine) as session:
            start.wait(timeout=30)
            usage.meter(session, tenant_id=uuid.UUID(tenant.id), pipeline_id=pid, pipeline_name="p",
                        outcome="failed", figures=usage.Figures(records_read=1, bytes_read=10), wall_s=0.25, at=T0)

    with ThreadPoolExecutor(8) as pool:
        for future in [pool.submit(attempt) for _ in range(8)]:
            future.result()
    assert [(r["records_read"], r["bytes_read"], r["runs_failed"], r["wall_ms"]) for r in _hours(engine, pid)] == [
        (8, 80, 8, 2000)]
    with unit_of_work(engine) as session:
        total = session.get(UsageTotal, (uuid.UUID(tenant.id), pid))
        assert total is not None and (total.records_read, total.runs_failed, total.attempts_le_10s) == (8, 8, 8)


def test_an_attempt_whose_worker_died_is_metered_as_retried_up_to_its_lease(client: TestClient, tenant: Tenant, clock: Clock) -> None:
    engine = client.app.state.engine
    pid = uuid.UUID(create_pipeline(client, tenant, state="paused")["id"])
    run_id = start_run(engine, clock, pid)  # claimed at T0 with a 30 s lease; its worker never answers
    clock.now = T0 + timedelta(minutes=5)
    with unit_of_work(engine) as session:
        assert lifecycle.claim(session, run_id, worker="w2", lease_s=30) is not None
    assert [(r["runs_retried"], r["wall_ms"], r["records_read"]) for r in _hours(engine, pid)] == [(1, 30_000, 0)]


def test_a_report_defaults_to_the_last_day_by_hour_or_30_days_by_day() -> None:
    now = T0 + timedelta(minutes=20)
    hourly = usage.UsageQuery.of(start=None, end=None, granularity="hour", pipeline_id=None, now=now)
    daily = usage.UsageQuery.of(start=None, end=None, granularity="day", pipeline_id=None, now=now)
    assert (hourly.start, hourly.end) == (HOUR + timedelta(hours=1) - timedelta(days=1), HOUR + timedelta(hours=1))
    midnight = HOUR.replace(hour=0) + timedelta(days=1)
    assert (daily.start, daily.end) == (midnight - timedelta(days=30), midnight)
