"""Helpers for offsets tests: runs completed through the real lifecycle and planning, without Spark.

A run here is triggered over HTTP, then claimed, planned against the sandbox Kafka and committed
with ``api.runs.lifecycle`` exactly as the worker does, minus the spark-submit in between: enough to
test what offsets changes do to the next runs (windows, ranges) in milliseconds."""

from __future__ import annotations

import uuid
from typing import Any

from fastapi.testclient import TestClient
from sqlmodel import select

from api.connections.models import Connection
from api.connections.service import client_config
from api.core.db import unit_of_work
from api.kafka.client import KafkaClient
from api.offsets.models import OffsetReplay
from api.pipelines.models import Pipeline
from api.runs import lifecycle
from api.runs.models import Run
from api.runs.planning import plan_pipeline
from tests.factories import Tenant


def run_without_spark(client: TestClient, tenant: Tenant, pipeline_id: str) -> dict[str, Any]:
    """Trigger, claim, plan and commit one run as succeeded; returns the run as the API shows it."""
    triggered = client.post(f"/pipelines/{pipeline_id}/runs", headers=tenant.editor)
    assert triggered.status_code == 202, triggered.text
    run_id = uuid.UUID(triggered.json()["id"])
    app = client.app
    with unit_of_work(app.state.engine) as session:  # type: ignore[attr-defined]
        run = lifecycle.claim(session, run_id, worker="tests", lease_s=60)
        assert run is not None
        pipeline = session.get(Pipeline, run.pipeline_id)
        conn = session.get(Connection, pipeline.connection_id)
        with KafkaClient(client_config(conn, app.state.secrets), timeout_s=5) as kafka:  # type: ignore[attr-defined]
            plan = plan_pipeline(session, pipeline, kafka)
        lifecycle.store_plan(session, run, plan, source_version=None, target_version=None,
                             replace_ranges=lifecycle.replace_ranges_for(session, pipeline, plan))
        assert lifecycle.commit_succeeded(session, run, summary={"error": None})
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
