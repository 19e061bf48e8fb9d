"""The scheduler's tick: each duty is its own failure boundary, so one that fails (its table locked, a
query broken) is logged and the others still do their work, on the real database."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update
from sqlalchemy.exc import OperationalError

from api.core.config import Settings
from api.core.db import unit_of_work, utcnow
from api.pipelines.models import Pipeline
from api.runs import lifecycle
from api.webhooks.models import WebhookDelivery
from tests.factories import Tenant, create_connection, create_pipeline
from tests.fixtures.dispatch import RecordingDispatcher, app, dispatcher  # noqa: F401  (the fixtures)
from tests.webhooks.helpers import create_webhook
from worker import scheduler
from worker.scheduler import tick


def _lost_run(client: TestClient, app: Any, tenant: Tenant) -> uuid.UUID:  # noqa: F811 (the fixture imported above)
    """A run queued long ago whose message was lost (created as a trigger does, without sending anything)."""
    pipeline_id = create_pipeline(client, tenant, create_connection(client, tenant)["id"], schedule=None,
                                  state="paused")["id"]
    with unit_of_work(app.state.engine) as session:
        pipeline = session.get(Pipeline, uuid.UUID(pipeline_id))
        assert pipeline is not None
        run = lifecycle.create_run(session, pipeline, trigger="manual")
        run.dispatched_at = utcnow() - timedelta(minutes=5)
        return run.id


def _lost_delivery(client: TestClient, app: Any, tenant: Tenant) -> uuid.UUID:  # noqa: F811 (the fixture imported above)
    """A webhook delivery that stays due long after it was sent: its message was lost."""
    hook = create_webhook(client, tenant, "https://alerts.example.com/")
    sent = client.post(f"/webhooks/{hook['id']}/test", headers=tenant.editor)
    assert sent.status_code == 202, sent.text
    long_ago = utcnow() - timedelta(minutes=5)
    with unit_of_work(app.state.engine) as session:
        session.execute(update(WebhookDelivery).values(next_attempt_at=long_ago, dispatched_at=long_ago))
    return uuid.UUID(sent.json()["id"])


def test_a_failing_duty_does_not_stop_the_others(
    client: TestClient, app: Any, tenant: Tenant, settings: Settings, dispatcher: RecordingDispatcher,  # noqa: F811 (the fixture imported above)
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    run_id = _lost_run(client, app, tenant)
    delivery_id = _lost_delivery(client, app, tenant)
    dispatcher.deliveries.clear()  # the test event's own send after its commit

    def locked(*args: object, **kwargs: object) -> list[object]:
        raise OperationalError("SELECT … FOR UPDATE SKIP LOCKED", {}, Exception("lock timeout"))

    monkeypatch.setattr(scheduler, "claim_due", locked)  # the first duty of the tick
    with caplog.at_level(logging.ERROR, logger="worker.scheduler"):
        report = tick(app.state.engine, dispatcher, settings)

    assert report.failed == ("fire_due_schedules",)
    assert (report.fired, report.resent, report.deliveries_resent) == (0, 1, 1)
    assert dispatcher.runs == [run_id] and dispatcher.deliveries == [delivery_id]
    assert [r.getMessage() for r in caplog.records] == ["scheduler duty fire_due_schedules failed"]
    assert caplog.records[0].exc_info is not None and isinstance(caplog.records[0].exc_info[1], OperationalError)


@pytest.mark.parametrize("failing", list(scheduler.DUTIES))
def test_every_duty_runs_whichever_one_fails(
    failing: str, settings: Settings, dispatcher: RecordingDispatcher, monkeypatch: pytest.MonkeyPatch,  # noqa: F811 (the fixture imported above)
    caplog: pytest.LogCaptureFixture,
) -> None:
    """First, middle or last: the duty that raises is reported and logged, and every other one runs."""
    called: list[str] = []

    def duty(field: str) -> Callable[[object, object, object], int]:
        def run(db: object, dispatcher: object, settings: object) -> int:
            called.append(field)
            if field == failing:
                raise RuntimeError(f"{field} broke")
            return 2
        run.__name__ = f"duty_{field}"
        return run

    monkeypatch.setattr(scheduler, "DUTIES", {field: duty(field) for field in scheduler.DUTIES})
    with caplog.at_level(logging.ERROR, logger="worker.scheduler"):
        report = tick(None, dispatcher, settings)  # type: ignore[arg-type]  # the stand-in duties need no database

    assert called == list(scheduler.DUTIES)
    assert report.failed == (f"duty_{failing}",)
    assert {field: getattr(report, field) for field in scheduler.DUTIES} == {
        field: 0 if field == failing else 2 for field in scheduler.DUTIES}
    assert [r.getMessage() for r in caplog.records] == [f"scheduler duty duty_{failing} failed"]
