"""A run's commit and a maintenance task's end at once, on PostgreSQL: each writes the pipeline's row (the
lag, the table health it embeds) and its ``table_maintenance`` row, and both take the pipeline's first,
so neither deadlocks the other (SQLite has one writer at a time)."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.core.config import Settings
from api.core.db import unit_of_work, utcnow
from api.maintenance import execution
from api.maintenance.triggers import record_commit, request
from api.pipelines.models import Pipeline
from api.pipelines.service import record_observed_lag
from spark_jobs.public import MaintenanceReport
from tests.factories import Tenant, create_pipeline
from tests.fixtures.dispatch import RecordingDispatcher, app, dispatcher  # noqa: F401  (the fixtures)


@pytest.fixture
def postgres(settings: Settings) -> None:
    if not settings.resolved_database_url.startswith("postgresql"):
        pytest.skip("row locks and deadlocks are PostgreSQL's; SQLite serialises writers (INLET_TEST_DATABASE_URL)")


def test_a_runs_commit_and_a_tasks_end_at_once_both_land(  # type: ignore[no-untyped-def]
    postgres: None, client: TestClient, tenant: Tenant, dispatcher: RecordingDispatcher,  # noqa: F811
) -> None:
    engine, settings = client.app.state.engine, client.app.state.settings
    ident = uuid.UUID(create_pipeline(client, tenant, state="paused", target={"type": "delta", "path": "bronze/locks"})["id"])
    with unit_of_work(engine) as session:
        record_commit(session, session.get(Pipeline, ident), {"files_written": 1, "bytes_written": 10})
        request(session, ident, trigger="api", actor="test", now=utcnow(), steps=["compact"])
    with unit_of_work(engine) as session:
        claimed = execution.claim(session=session, pipeline_id=ident, worker="w1", settings=settings)
    assert isinstance(claimed, execution.Claimed)

    run_holds_pipeline, errors = threading.Event(), []

    def run_commit() -> None:  # as api.runs.lifecycle.commit_succeeded: the lag first, then the table's counters
        try:
            with unit_of_work(engine) as session:
                pipeline = session.get(Pipeline, ident)
                record_observed_lag(session, pipeline, 0)
                session.flush()
                run_holds_pipeline.set()
                time.sleep(0.5)  # the task's end starts meanwhile
                record_commit(session, pipeline, {"files_written": 1, "bytes_written": 10, "delta_version": 2})
        except Exception as exc:  # noqa: BLE001 - asserted below
            errors.append(exc)

    def task_end() -> Any:
        run_holds_pipeline.wait(5)
        try:
            with unit_of_work(engine) as session:
                return execution.finish(session=session, claimed=claimed, worker="w1", report=MaintenanceReport())
        except Exception as exc:  # noqa: BLE001 - asserted below
            errors.append(exc)

    threads = [threading.Thread(target=run_commit), threading.Thread(target=task_end)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == []
    table = client.get(f"/pipelines/{ident}", headers=tenant.viewer).json()["status"]["table"]
    assert (table["files"], table["commits_since_compaction"], table["version"]) == (2, 2, 2)
