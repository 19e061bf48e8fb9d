"""``POST /pipelines/{id}/quarantine/reprocess``: a run (trigger reprocess) with the order it was given,
audited; roles, 404 across tenants, 409 beside an active run, and a 422 naming what is wrong for a
pipeline without a quarantine or an order that selects nothing sensible. No worker runs here: the run
stays queued. (Its run through the stack: ``test_reprocess_end_to_end``.)"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.core.db import unit_of_work
from api.pipelines.models import Pipeline
from api.runs.job_spec import build_spec
from api.runs.models import Run
from tests.factories import Tenant, assert_problem, create_connection, create_pipeline

REPROCESS = "/pipelines/{}/quarantine/reprocess"


@pytest.fixture
def pipeline(client: TestClient, tenant: Tenant) -> dict[str, Any]:
    return create_pipeline(client, tenant, state="paused")


def test_a_reprocess_is_a_queued_run_with_its_order_audited(client: TestClient, tenant: Tenant,
                                                           pipeline: dict[str, Any]) -> None:
    order = {"ranges": [{"topic": "orders", "partition": 1, "start": 10, "end": 20}],
             "since": "2026-12-07T10:00:00Z", "until": "2026-12-07T11:00:00+00:00", "dry_run": True}

    response = client.post(REPROCESS.format(pipeline["id"]), json=order, headers=tenant.editor)

    assert response.status_code == 202, response.text
    run = response.json()
    assert (run["trigger"], run["state"], run["seq"], run["partitions"]) == ("reprocess", "queued", 1, [])
    assert run["reprocess"] == {"ranges": {"orders": {"1": [10, 20]}}, "since": "2026-12-07T10:00:00Z",
                                "until": "2026-12-07T11:00:00Z", "dry_run": True, "selected": None,
                                "decoded": None, "still_quarantined": None}
    assert client.get(f"/runs/{run['id']}", headers=tenant.viewer).json()["reprocess"] == run["reprocess"]
    [event] = client.get("/audit-events?resource_type=run", headers=tenant.viewer).json()["items"]
    assert (event["action"], event["resource_id"]) == ("reprocess_quarantine", run["id"])
    assert event["after"]["dry_run"] is True and event["after"]["ranges"] == {"orders": {"1": [10, 20]}}
    # Its job reads the quarantine, not Kafka: no ranges, the order as the spec's.
    with unit_of_work(client.app.state.engine) as session:  # type: ignore[attr-defined]  # the app under test
        row = session.get(Run, uuid.UUID(run["id"]))
        assert row is not None
        spec = build_spec(session, row, session.get(Pipeline, row.pipeline_id),  # type: ignore[arg-type]  # it exists
                          settings=client.app.state.settings, secrets=client.app.state.secrets)  # type: ignore[attr-defined]
    assert spec.source.ranges == {} and spec.reprocess is not None
    assert (spec.reprocess.ranges, spec.reprocess.dry_run) == ({"orders": {"1": (10, 20)}}, True)
    assert spec.reprocess.since is not None and spec.reprocess.since.hour == 10
    assert spec.contract.field_key is None  # the tenant has none: nothing was ever sealed


def test_a_reprocess_waits_for_no_run_and_needs_an_editor(client: TestClient, tenant: Tenant,
                                                         pipeline: dict[str, Any]) -> None:
    path = REPROCESS.format(pipeline["id"])
    assert_problem(client.post(path, json={}, headers=tenant.viewer), 403)
    assert client.post(path, json={}, headers=tenant.editor).status_code == 202

    busy = assert_problem(client.post(path, json={}, headers=tenant.editor), 409)

    assert "already has run" in busy["detail"]


def test_another_tenants_pipeline_is_a_404(client: TestClient, tenant: Tenant, other_tenant: Tenant,
                                          pipeline: dict[str, Any]) -> None:
    assert_problem(client.post(REPROCESS.format(pipeline["id"]), json={}, headers=other_tenant.editor), 404)
    assert client.get(f"/pipelines/{pipeline['id']}/runs", headers=tenant.viewer).json()["total"] == 0


@pytest.mark.parametrize(("order", "field"), [
    ({"since": "2026-12-07T11:00:00Z", "until": "2026-12-07T10:00:00Z"}, "until"),
    ({"since": "2026-12-07T11:00:00"}, "since"),  # no time zone
    ({"ranges": [{"topic": "orders", "partition": 0, "start": 5, "end": 5}]}, "ranges[0].end"),
    ({"ranges": [{"topic": "orders", "partition": 0, "start": 0, "end": 9},
                 {"topic": "orders", "partition": 0, "start": 10, "end": 20}]}, "ranges[1]"),
    ({"ranges": []}, "ranges"),
    ({"ranges": [{"topic": "bad topic!", "partition": 0, "start": 0, "end": 1}]}, "ranges[0].topic"),
    ({"dry": True}, "dry"),
])
def test_an_order_that_is_not_one_is_a_422_naming_its_field(client: TestClient, tenant: Tenant,
                                                            pipeline: dict[str, Any], order: dict[str, Any],
                                                            field: str) -> None:
    assert_problem(client.post(REPROCESS.format(pipeline["id"]), json=order, headers=tenant.editor), 422,
                   fields={field})
    assert client.get(f"/pipelines/{pipeline['id']}/runs", headers=tenant.viewer).json()["total"] == 0


@pytest.mark.parametrize(("overrides", "field"), [
    ({"source": {"connection_id": "{conn}", "topics": ["orders"], "value_format": "string"}}, "source.value_format"),
    ({"target": {"type": "delta", "path": "silver/orders", "mode": "upsert", "key": ["id"]}}, "target.mode"),
    ({"target": {"type": "kafka", "connection_id": "{conn}", "topic": "orders.copy"}}, "target"),
])
def test_a_pipeline_without_a_reprocessable_quarantine_is_a_422(client: TestClient, tenant: Tenant,
                                                               overrides: dict[str, Any], field: str) -> None:
    conn = create_connection(client, tenant)["id"]
    made = create_pipeline(client, tenant, conn, state="paused",
                           **json.loads(json.dumps(overrides).replace("{conn}", conn)))

    assert_problem(client.post(REPROCESS.format(made["id"]), json={}, headers=tenant.editor), 422, fields={field})
