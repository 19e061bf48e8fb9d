"""A continuous pipeline's chain of looks, step by step on the real database (no worker): the schedule
as the API takes it, the slot each message claims, what each verdict sends next, and why the chain
never forks (the scheduler's safety net and an edit each take the slot over by compare-and-set)."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session

from api.core.db import unit_of_work, utcnow
from api.pipelines.models import Pipeline
from api.pipelines.scheduling import CONTINUOUS_HOLD_S, claim_due
from api.runs import continuous, execution, lifecycle
from api.runs.planning import Plan
from tests.factories import Tenant, assert_problem, create_connection, create_pipeline
from tests.fixtures.dispatch import RecordingDispatcher, app, dispatcher  # noqa: F401  (the fixtures)

CONTINUOUS = {"continuous": True, "idle_wait_ms": 200, "max_offsets_per_run": 50}


def _pipeline(client: TestClient, tenant: Tenant, **overrides: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {"schedule": CONTINUOUS, **overrides}
    return create_pipeline(client, tenant, create_connection(client, tenant)["id"], **fields)


def _row(app: Any, pipeline_id: str) -> Pipeline:  # noqa: F811 (the fixture imported above)
    with Session(app.state.engine) as session:
        row = session.get(Pipeline, uuid.UUID(pipeline_id))
        assert row is not None
        return row


def test_the_schedule_reads_back_as_written_and_bad_values_are_named(client: TestClient, tenant: Tenant) -> None:
    created = _pipeline(client, tenant)
    assert created["schedule"] == CONTINUOUS
    bare = _pipeline(client, tenant, name="bare", schedule={"continuous": True})
    assert bare["schedule"] == {"continuous": True}  # the defaults (500 ms, 100,000 offsets) are not written back
    connection_id = create_connection(client, tenant)["id"]
    for schedule, field in (({"continuous": True, "idle_wait_ms": 10}, "schedule.ContinuousSchedule.idle_wait_ms"),
                            ({"continuous": False}, "schedule.ContinuousSchedule.continuous"),
                            ({"continuous": True, "interval_seconds": 10}, "schedule")):  # two kinds
        refused = client.post("/pipelines", headers=tenant.editor, json={
            "name": "bad", "source": {"connection_id": connection_id, "topics": ["t"]},
            "target": {"type": "delta", "path": "bronze/bad"}, "schedule": schedule})
        body = assert_problem(refused, 422)
        assert field in {e["field"] for e in body["errors"]}, body
        assert all(e["field"].startswith((field, "schedule.ContinuousSchedule")) for e in body["errors"]), body

    # a merge patch to another kind names the field to null
    patched = client.patch(f"/pipelines/{created['id']}", headers=tenant.editor,
                           json={"schedule": {"interval_seconds": 60}})
    body = assert_problem(patched, 422, fields={"schedule"})
    assert "set the one it replaces to null" in body["errors"][0]["message"], body
    patched = client.patch(f"/pipelines/{created['id']}", headers=tenant.editor,
                           json={"schedule": {"interval_seconds": 60, **dict.fromkeys(CONTINUOUS)}})
    assert patched.status_code == 200 and patched.json()["schedule"] == {"interval_seconds": 60}, patched.text


def test_an_active_pipeline_looks_at_once_and_a_paused_one_not(
    client: TestClient, tenant: Tenant, app: Any, dispatcher: RecordingDispatcher,  # noqa: F811 (the fixtures)
) -> None:
    active = _pipeline(client, tenant)
    paused = _pipeline(client, tenant, name="paused", state="paused")
    assert [(str(p), delay) for p, _, delay in dispatcher.continuations] == [(active["id"], 0.0)]
    assert dispatcher.continuations[0][1] == _row(app, active["id"]).next_run_at
    assert _row(app, paused["id"]).next_run_at is None

    resumed = client.post(f"/pipelines/{paused['id']}/resume", headers=tenant.editor)
    assert resumed.status_code == 200, resumed.text
    assert [str(p) for p, _, _ in dispatcher.continuations] == [active["id"], paused["id"]]


def test_each_verdict_sends_the_next_look_after_its_wait(
    client: TestClient, tenant: Tenant, app: Any, dispatcher: RecordingDispatcher,  # noqa: F811 (the fixtures)
) -> None:
    pipeline_id = uuid.UUID(_pipeline(client, tenant)["id"])
    waits = {}
    for verdict in ("succeeded", "skipped", "nothing-new", "cancelled", "failed", "plan-failed", "over-quota",
                    "queued", "busy", "paused", "superseded", "not-claimable"):
        with unit_of_work(app.state.engine) as session:
            waits[verdict] = continuous.continue_after(session, verdict=verdict, pipeline_id=pipeline_id)
    assert waits == {"succeeded": 0.0, "skipped": 0.2, "nothing-new": 0.2, "cancelled": 0.2,
                     "failed": CONTINUOUS_HOLD_S, "plan-failed": CONTINUOUS_HOLD_S, "over-quota": CONTINUOUS_HOLD_S,
                     "queued": None, "busy": None, "paused": None, "superseded": None, "not-claimable": None}
    slot, delay = dispatcher.continuations[-1][1:]
    assert delay == CONTINUOUS_HOLD_S and _row(app, str(pipeline_id)).next_run_at == slot


def test_a_pipeline_with_a_run_or_paused_or_scheduled_otherwise_continues_nothing(
    client: TestClient, tenant: Tenant, app: Any, dispatcher: RecordingDispatcher,  # noqa: F811 (the fixtures)
) -> None:
    busy = _pipeline(client, tenant)
    interval = create_pipeline(client, tenant, create_connection(client, tenant)["id"], name="interval",
                               schedule={"interval_seconds": 60})
    paused = _pipeline(client, tenant, name="paused", state="paused")
    with unit_of_work(app.state.engine) as session:
        pipeline = session.get(Pipeline, uuid.UUID(busy["id"]))
        assert pipeline is not None
        lifecycle.create_run(session, pipeline, trigger="manual")
    dispatcher.continuations.clear()
    for pipeline in (busy, interval, paused):
        with unit_of_work(app.state.engine) as session:
            assert continuous.continue_after(session, verdict="succeeded", pipeline_id=uuid.UUID(pipeline["id"])) is None
    assert dispatcher.continuations == []


def test_a_message_fires_only_the_slot_it_names_so_the_chain_never_forks(
    client: TestClient, tenant: Tenant, app: Any, dispatcher: RecordingDispatcher,  # noqa: F811 (the fixtures)
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pipeline_id = uuid.UUID(_pipeline(client, tenant)["id"])
    first_slot = dispatcher.continuations[0][1]
    services = execution.Services(settings=app.state.settings, secrets=app.state.secrets)
    looks: list[str] = []

    def plan_now(session: Session, pipeline: Pipeline) -> Plan:
        looks.append(str(pipeline.id))
        return Plan(partitions=[])  # the topic is idle
    monkeypatch.setattr(execution.Services, "plan_now", lambda self, session, pipeline: plan_now(session, pipeline))

    def fire(slot: Any) -> Any:
        with unit_of_work(app.state.engine) as session:
            return execution.fire_schedule(session=session, pipeline_id=pipeline_id, slot=slot, services=services,
                                           claim=True)

    assert fire(first_slot) == execution.Outcome("nothing-new")
    held = _row(app, str(pipeline_id)).next_run_at
    assert held is not None and held > utcnow() + timedelta(seconds=CONTINUOUS_HOLD_S - 5)  # held while it looks
    assert fire(first_slot) == execution.Outcome("superseded"), "a second copy of a message does nothing"

    # The scheduler takes an overdue slot over: the worker's late message for it then does nothing.
    with unit_of_work(app.state.engine) as session:
        continuous.continue_after(session, verdict="nothing-new", pipeline_id=pipeline_id)
    late_slot = dispatcher.continuations[-1][1]
    with unit_of_work(app.state.engine) as session:
        assert claim_due(session, now=late_slot + timedelta(seconds=1), limit=10) == [(pipeline_id, late_slot)]
    assert fire(late_slot) == execution.Outcome("superseded")
    assert looks == [str(pipeline_id)], "only the first message looked at Kafka"
