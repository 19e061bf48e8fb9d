"""Retention, table by table, on the real database: what each rule deletes and what it keeps (a
pipeline's newest run, the runs the offsets ledger still needs, deliveries still due), usage and
/metrics untouched by it, passes spread over ticks and audited once per tenant."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import delete, update
from sqlmodel import Session, col, select

from api.audit.models import AuditEvent
from api.core.config import Settings
from api.core.db import unit_of_work, utcnow
from api.core.models import IdempotencyRecord
from api.ledger.models import OffsetReplay
from api.retention.service import Retention
from api.runs.models import Run
from api.usage.models import UsageHour, UsageTotal
from api.webhooks.models import WebhookDelivery, WebhookEvent
from tests.factories import Tenant, create_pipeline, operator
from tests.retention.helpers import DAY, count, ended_run, log_chunks_of, policy, ranges_of, run_ids
from tests.usage.helpers import Clock
from tests.webhooks.helpers import create_webhook

T = ("t", 0)  # the partition most runs read
U = ("t", 1)


def _usage(engine: Any) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    with Session(engine) as session:
        hours = [tuple(r) for r in session.exec(select(UsageHour.pipeline_id, UsageHour.hour, UsageHour.records_read,
                                                       UsageHour.runs_succeeded, UsageHour.runs_failed)
                                                .order_by(col(UsageHour.hour))).all()]
        totals = [tuple(r) for r in session.exec(select(UsageTotal.pipeline_id, UsageTotal.records_read,
                                                        UsageTotal.runs_succeeded, UsageTotal.runs_failed)).all()]
    return hours, totals


def _prune(app: Any, settings: Settings, **days: float) -> Retention:
    """One whole pass (the budget is ample) at the real now."""
    retention = Retention()
    retention.tick(app.state.engine, policy(settings, **days))
    assert retention.running is None
    return retention


def test_old_runs_go_but_each_pipeline_keeps_its_newest(client: TestClient, app: Any, tenant: Tenant,
                                                        other_tenant: Tenant, settings: Settings, clock: Clock) -> None:
    engine = app.state.engine
    now, old = utcnow(), utcnow() - 100 * DAY
    busy = create_pipeline(client, tenant, state="paused")["id"]
    idle = create_pipeline(client, other_tenant, state="paused")["id"]
    offset = 0
    pruned = set()
    for i in range(4):  # old: succeeded, failed, succeeded, failed
        failed = i % 2 == 1
        ranges = {T: (offset, offset + 10)}
        pruned.add(ended_run(engine, clock, busy, at=old + i * timedelta(minutes=1), ranges=ranges,
                             error="kafka_unavailable" if failed else None, log="line\n"))
        offset += 0 if failed else 10
    recent = ended_run(engine, clock, busy, at=now - DAY, ranges={T: (offset, offset + 10)})
    lonely = ended_run(engine, clock, idle, at=old, ranges={T: (0, 5)})  # an idle pipeline's one run, long ago
    usage_before = _usage(engine)
    days = {"granularity": "day", "from": (now - 200 * DAY).strftime("%Y-%m-%dT00:00:00Z"),
            "to": (now + DAY).strftime("%Y-%m-%dT00:00:00Z")}
    reports_before = [client.get("/usage", params=days, headers=t.viewer).json() for t in (tenant, other_tenant)]
    assert sum(row["runs"]["succeeded"] for row in reports_before[0]["items"]) == 3  # what is about to go, counted

    _prune(app, settings, runs=90)

    assert run_ids(engine, busy) == {recent}
    assert run_ids(engine, idle) == {lonely}  # its newest: kept however old
    assert all(ranges_of(engine, r) == 0 and log_chunks_of(engine, r) == 0 for r in pruned)
    assert ranges_of(engine, recent) == 1
    assert _usage(engine) == usage_before  # the usage ledger is never pruned
    assert [client.get("/usage", params=days, headers=t.viewer).json() for t in (tenant, other_tenant)] == reports_before


def test_a_continuous_pipelines_runs_go_after_their_own_shorter_retention(
    client: TestClient, app: Any, tenant: Tenant, settings: Settings, clock: Clock,
) -> None:
    """A run a second is 86,400 runs a day: continuous runs are kept ``retention_continuous_runs_days``
    (2 by default), other runs of the same age stay for ``retention_runs_days``."""
    engine = app.state.engine
    now = utcnow()
    pipeline = create_pipeline(client, tenant, state="paused")["id"]
    streamed = [ended_run(engine, clock, pipeline, at=now - 3 * DAY + i * timedelta(seconds=1),
                          ranges={T: (10 * i, 10 * i + 10)}, trigger="continuous") for i in range(3)]
    triggered = ended_run(engine, clock, pipeline, at=now - 3 * DAY + timedelta(minutes=1), ranges={T: (30, 40)})
    newest = ended_run(engine, clock, pipeline, at=now - timedelta(hours=1), ranges={T: (40, 50)},
                       trigger="continuous")

    _prune(app, settings, runs=90, continuous_runs=2)

    assert run_ids(engine, pipeline) == {triggered, newest}
    assert all(ranges_of(engine, r) == 0 for r in streamed)


def test_the_runs_the_ledger_still_needs_are_kept(client: TestClient, app: Any, tenant: Tenant, settings: Settings,
                                                  clock: Clock) -> None:
    """Kept whatever their age: the run that wrote a partition's highest range, runs whose ranges a live
    replay window overlaps, a partition's ``last_run_id``; and the pipeline's newest run."""
    engine = app.state.engine
    old = utcnow() - 100 * DAY
    pid = create_pipeline(client, tenant, state="paused")["id"]

    def at(minute: int) -> Any:
        return old + timedelta(minutes=minute)

    first = ended_run(engine, clock, pid, at=at(0), ranges={T: (0, 10), U: (0, 5)})  # U's highest range, ever
    replayed = ended_run(engine, clock, pid, at=at(1), ranges={T: (10, 20), U: (5, 5)})
    plain = ended_run(engine, clock, pid, at=at(2), ranges={T: (20, 30), U: (5, 5)})
    highest = ended_run(engine, clock, pid, at=at(3), ranges={T: (30, 40), U: (5, 5)})  # T's highest range
    last = ended_run(engine, clock, pid, at=at(4), ranges={T: (40, 40), U: (5, 5)})  # read nothing: no range
    newest = ended_run(engine, clock, pid, at=at(5), ranges={T: (40, 41)}, error="kafka_unavailable")
    with unit_of_work(engine) as session:  # a replace-mode replay of [12, 15) still to be done
        session.add(OffsetReplay(pipeline_id=uuid.UUID(pid), tenant_id=uuid.UUID(tenant.id), topic="t", partition=0,
                                 start=12, end=15))

    _prune(app, settings, runs=90)

    assert run_ids(engine, pid) == {first, replayed, highest, last, newest}
    assert plain not in run_ids(engine)
    looked_up = client.get(f"/pipelines/{pid}/offsets/lookup", params={"topic": "t", "partition": 0, "offset": 13},
                           headers=tenant.viewer)
    assert looked_up.status_code == 200, looked_up.text
    assert [r["run_id"] for r in looked_up.json()["runs"]] == [str(replayed)]

    with unit_of_work(engine) as session:  # the replay done: its window is gone, and so is the run it needed
        session.execute(delete(OffsetReplay))
    _prune(app, settings, runs=90)
    assert run_ids(engine, pid) == {first, highest, last, newest}


def test_logs_go_before_their_runs(client: TestClient, app: Any, tenant: Tenant, settings: Settings,
                                   clock: Clock) -> None:
    engine = app.state.engine
    pid = create_pipeline(client, tenant, state="paused")["id"]
    month_old = ended_run(engine, clock, pid, at=utcnow() - 30 * DAY, ranges={T: (0, 10)}, log="old\n")
    week_old = ended_run(engine, clock, pid, at=utcnow() - 7 * DAY, ranges={T: (10, 20)}, log="new\n")

    _prune(app, settings, runs=90, run_logs=14)

    assert run_ids(engine, pid) == {month_old, week_old}
    assert (log_chunks_of(engine, month_old), log_chunks_of(engine, week_old)) == (0, 1)
    shown = client.get(f"/runs/{month_old}", headers=tenant.viewer)
    assert shown.status_code == 200 and shown.json()["log_tail"] == []


def test_zero_keeps_forever(client: TestClient, app: Any, tenant: Tenant, settings: Settings, clock: Clock) -> None:
    engine = app.state.engine
    pid = create_pipeline(client, tenant, state="paused")["id"]
    for minute in range(3):
        ended_run(engine, clock, pid, at=utcnow() - 3000 * DAY + timedelta(minutes=minute), log="x\n")
    with unit_of_work(engine) as session:
        session.execute(update(AuditEvent).values(created_at=utcnow() - 3000 * DAY))

    retention = _prune(app, settings, runs=0, run_logs=0, audit=0, webhooks=0, idempotency=0)

    assert len(run_ids(engine, pid)) == 3 and count(engine, AuditEvent) > 0
    assert retention.next_at is not None


def _ended_deliveries(client: TestClient, app: Any, tenant: Tenant) -> dict[str, uuid.UUID]:
    """Four test events' deliveries: two ended long ago (one succeeded, one gave up), one pending and due
    since long ago, one ended yesterday."""
    hook = create_webhook(client, tenant, "https://alerts.example.com/")
    made = {}
    for name in ("succeeded", "failed", "pending", "recent"):
        sent = client.post(f"/webhooks/{hook['id']}/test", headers=tenant.editor)
        assert sent.status_code == 202, sent.text
        made[name] = uuid.UUID(sent.json()["id"])
    long_ago, yesterday = utcnow() - 40 * DAY, utcnow() - DAY
    with unit_of_work(app.state.engine) as session:
        def end(name: str, state: str, at: Any, attempts: int) -> None:
            session.execute(update(WebhookDelivery).where(col(WebhookDelivery.id) == made[name]).values(
                state=state, attempts=attempts, finished_at=at, next_attempt_at=None, created_at=long_ago))
        end("succeeded", "succeeded", long_ago, 1)
        end("failed", "failed", long_ago, 7)
        end("recent", "succeeded", yesterday, 2)
        session.execute(update(WebhookDelivery).where(col(WebhookDelivery.id) == made["pending"]).values(
            attempts=3, next_attempt_at=long_ago, created_at=long_ago))
        session.execute(update(WebhookEvent).values(created_at=long_ago))
    return made


def _webhook_counters(client: TestClient) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = client.get("/metrics", headers=operator()).text
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for family in text_string_to_metric_families(text)
            for s in family.samples if s.name in ("inlet_webhook_deliveries_total",
                                                  "inlet_webhook_delivery_attempts_total",
                                                  "inlet_records_ingested_total", "inlet_run_outcomes_total")}


def test_ended_deliveries_go_and_those_still_due_stay_with_their_events(
    client: TestClient, app: Any, tenant: Tenant, settings: Settings, clock: Clock,
) -> None:
    engine = app.state.engine
    made = _ended_deliveries(client, app, tenant)
    pid = create_pipeline(client, tenant, state="paused")["id"]
    for minute in range(3):
        ended_run(engine, clock, pid, at=utcnow() - 100 * DAY + timedelta(minutes=minute), ranges={})
    before = _webhook_counters(client)

    _prune(app, settings, webhooks=30, runs=90)

    with Session(engine) as session:
        kept = set(session.exec(select(WebhookDelivery.id)).all())
        events = set(session.exec(select(WebhookEvent.id)).all())
        event_of = {d.id: d.event_id for d in session.exec(select(WebhookDelivery)).all()}
    assert kept == {made["pending"], made["recent"]}
    assert events == {event_of[made["pending"]], event_of[made["recent"]]}
    after = _webhook_counters(client)
    assert after == before  # counters never go down: the deleted deliveries and runs still count
    assert after[("inlet_webhook_delivery_attempts_total", ())] == 1 + 7 + 3 + 2


def test_audit_events_and_idempotency_keys_past_their_retention(
    client: TestClient, app: Any, tenant: Tenant, settings: Settings,
) -> None:
    engine = app.state.engine
    old_key, new_key = {"Idempotency-Key": "old"}, {"Idempotency-Key": "new"}
    body = {"url": "https://alerts.example.com/"}
    first = client.post("/webhooks", json=body, headers=tenant.editor | old_key)
    assert first.status_code == 201, first.text
    assert client.post("/webhooks", json=body, headers=tenant.editor | new_key).status_code == 201
    aged = count(engine, AuditEvent)  # the tenant's, its keys' and the two webhooks' creations
    with unit_of_work(engine) as session:
        session.execute(update(AuditEvent).values(created_at=utcnow() - 400 * DAY))
        session.execute(update(IdempotencyRecord).where(col(IdempotencyRecord.key) == "old")
                        .values(created_at=utcnow() - 2 * DAY))
    fresh = client.patch(f"/webhooks/{first.json()['id']}", json={"description": "kept"}, headers=tenant.editor)
    assert fresh.status_code == 200, fresh.text

    _prune(app, settings, audit=365, idempotency=1)

    with Session(engine) as session:
        audited = session.exec(select(AuditEvent).order_by(col(AuditEvent.created_at))).all()
    assert [(e.resource_type, e.action) for e in audited] == [("webhook", "update"), ("retention", "prune")]
    summary = audited[-1]
    assert summary.actor == "retention" and str(summary.tenant_id) == tenant.id
    assert summary.after is not None and summary.after["deleted"] == {"audit_events": aged}
    assert count(engine, IdempotencyRecord) == 1
    replayed = client.post("/webhooks", json=body, headers=tenant.editor | new_key)
    assert replayed.headers.get("Idempotent-Replayed") == "true"
    again = client.post("/webhooks", json=body, headers=tenant.editor | old_key)  # past its window: a new request
    assert again.status_code == 201 and again.json()["id"] != first.json()["id"]


def test_a_pass_goes_on_over_ticks_and_is_audited_once_per_tenant(
    client: TestClient, app: Any, tenant: Tenant, other_tenant: Tenant, settings: Settings, clock: Clock,
) -> None:
    engine = app.state.engine
    old = utcnow() - 100 * DAY
    mine = create_pipeline(client, tenant, state="paused")["id"]
    theirs = create_pipeline(client, other_tenant, state="paused")["id"]
    for minute in range(5):
        ended_run(engine, clock, mine, at=old + timedelta(minutes=minute), log="x\n")
        ended_run(engine, clock, theirs, at=old + timedelta(minutes=minute), log="x\n")
    with unit_of_work(engine) as session:  # only the pass's own events will be audited
        session.execute(delete(AuditEvent))
    retention = Retention()
    slow = policy(settings, batch_size=2, budget_s=1e-9, runs=90, run_logs=14)  # one batch a tick

    deleted, ticks = [], 0
    while retention.running is not None or ticks == 0:
        deleted.append(retention.tick(engine, slow))
        ticks += 1
        assert ticks < 50
    assert count(engine, AuditEvent) == 2  # one per tenant, once the pass was done
    assert sum(deleted) == 2 * 5 + 2 * 4 and max(deleted) == 2 and ticks > 5
    with Session(engine) as session:
        summaries = {str(e.tenant_id): e.after for e in session.exec(select(AuditEvent)).all()}
    assert summaries[tenant.id] is not None and summaries[tenant.id]["deleted"] == {"run_logs": 5, "runs": 4}
    assert set(summaries) == {tenant.id, other_tenant.id}
    assert retention.tick(engine, slow) == 0  # the next pass starts an interval after this one did
    assert count(engine, Run) == 2


def test_kept_rows_at_the_front_do_not_end_a_pass(client: TestClient, app: Any, tenant: Tenant, settings: Settings,
                                                  clock: Clock) -> None:
    """The oldest runs are all kept (each the newest of an idle pipeline), more than a batch of them: the
    batches go on past them to the runs that may go."""
    engine = app.state.engine
    old = utcnow() - 200 * DAY
    idle = [ended_run(engine, clock, create_pipeline(client, tenant, state="paused")["id"], at=old + timedelta(minutes=i))
            for i in range(5)]
    busy = create_pipeline(client, tenant, state="paused")["id"]
    for day in range(3):
        ended_run(engine, clock, busy, at=utcnow() - (100 - day) * DAY)
    newest = ended_run(engine, clock, busy, at=utcnow())
    retention = Retention()
    retention.tick(engine, policy(settings, batch_size=2, runs=90))
    assert retention.running is None
    assert run_ids(engine) == {*idle, newest}
