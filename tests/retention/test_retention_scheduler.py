"""Retention as the scheduler's duty: a tick prunes within its budget and reports the rows, a pass that
fails is the duty's failure alone, and the next pass waits for the interval."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.exc import OperationalError

from api.core.config import Settings
from api.core.db import utcnow
from api.runs import retention as run_retention
from tests.factories import Tenant, create_pipeline
from tests.fixtures.dispatch import RecordingDispatcher
from tests.retention.helpers import DAY, ended_run, run_ids
from tests.usage.helpers import Clock
from worker import scheduler


def test_a_tick_prunes_what_the_settings_no_longer_keep(
    client: TestClient, app: Any, tenant: Tenant, settings: Settings, dispatcher: RecordingDispatcher,
    clock: Clock,
) -> None:
    engine = app.state.engine
    pid = create_pipeline(client, tenant, state="paused")["id"]
    old = [ended_run(engine, clock, pid, at=utcnow() - 100 * DAY + timedelta(minutes=i)) for i in range(3)]
    newest = ended_run(engine, clock, pid, at=utcnow() - DAY)
    tuned = settings.model_copy(update={"retention_runs_days": 90.0, "retention_budget_s": 30.0})

    report = scheduler.tick(engine, dispatcher, tuned)

    assert report.failed == () and report.rows_pruned == 3
    assert run_ids(engine, pid) == {newest} and not set(old) & run_ids(engine)
    ended_run(engine, clock, pid, at=utcnow() - 100 * DAY)  # old again, but the next pass is an interval away
    assert scheduler.tick(engine, dispatcher, tuned).rows_pruned == 0


def test_a_failing_batch_fails_the_duty_alone_and_the_pass_goes_on_next_tick(
    client: TestClient, app: Any, tenant: Tenant, settings: Settings, dispatcher: RecordingDispatcher,
    clock: Clock, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    engine = app.state.engine
    pid = create_pipeline(client, tenant, state="paused")["id"]
    for i in range(2):
        ended_run(engine, clock, pid, at=utcnow() - 100 * DAY + timedelta(minutes=i))
    newest = ended_run(engine, clock, pid, at=utcnow())
    tuned = settings.model_copy(update={"retention_runs_days": 90.0, "retention_budget_s": 30.0})
    real = run_retention.prune_runs

    def locked(*args: object, **kwargs: object) -> object:
        raise OperationalError("DELETE FROM runs …", {}, Exception("lock timeout"))

    monkeypatch.setattr(run_retention, "prune_runs", locked)
    with caplog.at_level(logging.ERROR, logger="worker.scheduler"):
        report = scheduler.tick(engine, dispatcher, tuned)
    assert report.failed == ("prune_old_rows",) and report.rows_pruned == 0
    assert len(run_ids(engine, pid)) == 3

    monkeypatch.setattr(run_retention, "prune_runs", real)
    report = scheduler.tick(engine, dispatcher, tuned)  # the same pass, not an interval later
    assert report.failed == () and report.rows_pruned == 2
    assert run_ids(engine, pid) == {newest}
