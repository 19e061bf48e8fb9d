"""Helpers for offsets tests: runs completed through the real lifecycle and planning, without Spark.

A run here is triggered over HTTP, then claimed, planned against the sandbox Kafka and its result
recorded through ``api.runs.execution`` exactly as the worker does, minus the spark-submit in
between (the job's result is made up: every planned record read): enough to test what offsets
changes do to the next runs (windows, ranges) in milliseconds."""

from __future__ import annotations

import uuid
from typing import Any

from fastapi.testclient import TestClient
from sqlmodel import select

from api.core.db import unit_of_work, utcnow
from api.ledger.models import OffsetReplay
from api.runs import execution
from api.runs.models import Run
from api.runs.planning import Plan
from spark_jobs.spec import PartitionResult, RunResult, Timings
from tests.factories import Tenant


def run_without_spark(client: TestClient, tenant: Tenant, pipeline_id: str) -> dict[str, Any]:
    """Trigger, claim, plan and commit one run as succeeded; returns the run as the API shows it."""
    triggered = client.post(f"/pipelines/{pipeline_id}/runs", headers=tenant.editor)
    assert triggered.status_code == 202, triggered.text
    run_id = uuid.UUID(triggered.json()["id"])
    app = client.app
    services = execution.Services(settings=app.state.settings, secrets=app.state.secrets)  # type: ignore[attr-defined]
    with unit_of_work(app.state.engine) as session:  # type: ignore[attr-defined]
        assert execution.claim(session=session, run_id=run_id, worker="tests", lease_s=60) is not None
    with unit_of_work(app.state.engine) as session:  # type: ignore[attr-defined]
        assert execution.plan_claimed_run(session=session, run_id=run_id, services=services) is None
        plan = Plan.from_json(session.get(Run, run_id).plan)
    now = utcnow()
    result = RunResult(run_id=str(run_id), status="succeeded", timings=Timings(started_at=now, finished_at=now),
                       partitions=[PartitionResult(topic=p.topic, partition=p.partition, start=p.start, end=p.end,
                                                   records_read=p.size) for p in plan.partitions])
    with unit_of_work(app.state.engine) as session:  # type: ignore[attr-defined]
        outcome = execution.record_result(session=session, run_id=run_id, worker="tests", result=result,
                                          retry=services.retry)
    assert outcome.verdict == "succeeded", outcome
    body = client.get(f"/runs/{run_id}", headers=tenant.viewer).json()
    assert body["state"] == "succeeded", body
    return body


def replay_windows(client: TestClient, pipeline_id: str) -> dict[tuple[str, int], tuple[int, int]]:
    with unit_of_work(client.app.state.engine) as session:  # type: ignore[attr-defined]
        rows = session.exec(select(OffsetReplay).where(OffsetReplay.pipeline_id == uuid.UUID(pipeline_id))).all()
        return {(r.topic, r.partition): (r.start, r.end) for r in rows}


def queued_runs(client: TestClient, pipeline_id: str) -> list[Run]:
    with unit_of_work(client.app.state.engine) as session:  # type: ignore[attr-defined]
        return list(session.exec(select(Run).where(Run.pipeline_id == uuid.UUID(pipeline_id), Run.state == "queued")).all())
