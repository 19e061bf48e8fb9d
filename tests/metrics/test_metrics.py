"""``/metrics``: Prometheus text computed from the usage ledger, the active runs and the pipelines in the
database (the usage counters' labels, switch and monotonicity: ``tests/usage/test_usage_metrics.py``)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from api.core.db import unit_of_work, utcnow
from api.pipelines.models import Pipeline
from api.runs import lifecycle
from api.runs.retry import RunFailure
from tests.factories import Tenant, create_pipeline, operator


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


NEWEST = datetime(2026, 12, 4, 12, 30, 15, tzinfo=UTC)


def test_metrics_report_runs_durations_volumes_and_lag(client: TestClient, tenant: Tenant) -> None:
    engine = client.app.state.engine
    finished = []
    for i, state in enumerate(("succeeded", "succeeded", "failed")):
        pipeline_id = uuid.UUID(create_pipeline(client, tenant, state="paused")["id"])
        with unit_of_work(engine) as session:
            pipeline = session.get(Pipeline, pipeline_id)
            run = lifecycle.create_run(session, pipeline, trigger="manual")
            run.plan = {"partitions": [] if i else [{"topic": "orders", "partition": 0, "start": 0, "end": 100,
                                                      "earliest": 0, "latest": 100, "committed": None}]}
            lifecycle.claim(session, run.id, worker="w", lease_s=30)
            run.claimed_at = utcnow() - timedelta(seconds=45)
            session.add(run)
            if state == "succeeded":
                read = [{"topic": "orders", "partition": 0, "newest_timestamp": NEWEST.isoformat()}] if i == 0 else []
                lifecycle.commit_succeeded(session, run, summary={
                    "records_read": 100, "rows_written": 100, "bytes_read": 2000, "result": {"partitions": read}})
            else:
                lifecycle.finish(session, run, "failed", error=RunFailure("internal", "x"))
            pipeline.observed_lag = 10 * (i + 1)  # as a later planning would have observed it
            session.add(pipeline)
            finished.append(pipeline_id)
    create_pipeline(client, tenant, state="paused")  # no observed lag: no lag sample

    response = client.get("/metrics", headers=operator())

    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    samples = _samples(response.text)
    assert samples[("inlet_runs", (("state", "queued"),))] == 0
    assert samples[("inlet_runs", (("state", "running"),))] == 0
    by_tenant = (("tenant_id", tenant.id),)
    assert samples[("inlet_run_outcomes_total", (("outcome", "succeeded"), *by_tenant))] == 2
    assert samples[("inlet_run_outcomes_total", (("outcome", "failed"), *by_tenant))] == 1
    assert samples[("inlet_records_ingested_total", by_tenant)] == 200
    assert samples[("inlet_bytes_ingested_total", by_tenant)] == 4000
    assert samples[("inlet_run_duration_seconds_count", ())] == 3
    assert samples[("inlet_run_duration_seconds_bucket", (("le", "30.0"),))] == 0
    assert samples[("inlet_run_duration_seconds_bucket", (("le", "60.0"),))] == 3
    lag = {labels: v for (name, labels), v in samples.items() if name == "inlet_pipeline_lag_records"}
    # ids only: a name is tenant input and changes
    assert lag == {(("pipeline_id", str(p)), *by_tenant): 10.0 * (i + 1) for i, p in enumerate(finished)}
    newest = {dict(labels)["pipeline_id"]: v for (name, labels), v in samples.items()
              if name == "inlet_pipeline_newest_record_timestamp_seconds"}
    assert newest == {str(finished[0]): NEWEST.timestamp()}, "only the pipeline whose run read a record"


def test_metrics_need_the_operator_token(client: TestClient, tenant: Tenant) -> None:
    assert client.get("/metrics").status_code == 401
    refused = client.get("/metrics", headers=tenant.admin)
    assert refused.status_code == 403 and refused.headers["content-type"] == "application/problem+json"
