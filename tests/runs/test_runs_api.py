"""The runs routes: trigger, list, read, log, cancel — success, 401, 403, 404 and 422 for each.

No worker runs here, so triggered runs stay queued (their message goes to a Redis nobody reads,
or to no Redis at all: the run is kept and the scheduler would send it again)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.core.db import unit_of_work
from api.runs import lifecycle
from api.runs.models import Run
from tests.factories import Tenant, assert_problem, create_pipeline


@pytest.fixture
def pipeline(client: TestClient, tenant: Tenant) -> dict[str, Any]:
    return create_pipeline(client, tenant, state="paused")


def test_trigger_queues_a_run_and_lists_it(client: TestClient, tenant: Tenant, pipeline: dict[str, Any]) -> None:
    triggered = client.post(f"/pipelines/{pipeline['id']}/runs", headers=tenant.editor)

    assert triggered.status_code == 202
    run = triggered.json()
    assert run | {"id": run["id"], "created_at": run["created_at"]} == {
        "id": run["id"], "pipeline_id": pipeline["id"], "seq": 1, "state": "queued", "trigger": "manual",
        "scheduled_for": None, "attempt": 0, "cancel_requested": False, "partitions": None, "replace_ranges": None,
        "records_read": None, "rows_written": None, "rows_quarantined": None, "bytes_read": None,
        "delta_version": None, "already_committed": None, "expectations": None, "rows_violating": None, "reprocess": None,
        "error": None,
        "created_at": run["created_at"],
        "started_at": None, "finished_at": None, "duration_s": None, "log_tail": None,
    }
    listed = client.get(f"/pipelines/{pipeline['id']}/runs", headers=tenant.viewer).json()
    assert [r["id"] for r in listed["items"]] == [run["id"]] and listed["total"] == 1
    assert client.get(f"/pipelines/{pipeline['id']}/runs?state=succeeded", headers=tenant.viewer).json()["total"] == 0
    one = client.get(f"/runs/{run['id']}", headers=tenant.viewer).json()
    assert one["id"] == run["id"] and one["log_tail"] == []
    audit = client.get("/audit-events?resource_type=run", headers=tenant.viewer).json()["items"]
    assert [(e["action"], e["resource_id"]) for e in audit] == [("trigger", run["id"])]


def test_idempotent_trigger_returns_the_same_run(client: TestClient, tenant: Tenant, pipeline: dict[str, Any]) -> None:
    headers = {**tenant.editor, "Idempotency-Key": "nightly-2026-11-22"}
    first = client.post(f"/pipelines/{pipeline['id']}/runs", headers=headers)
    again = client.post(f"/pipelines/{pipeline['id']}/runs", headers=headers)
    assert first.status_code == again.status_code == 202
    assert again.json() == first.json() and again.headers["Idempotent-Replayed"] == "true"


def test_cancel_a_queued_run_then_cancel_again_is_a_conflict(client: TestClient, tenant: Tenant, pipeline: dict[str, Any]) -> None:
    run = client.post(f"/pipelines/{pipeline['id']}/runs", headers=tenant.editor).json()

    cancelled = client.post(f"/runs/{run['id']}/cancel", headers=tenant.editor)
    assert cancelled.status_code == 200
    assert (cancelled.json()["state"], cancelled.json()["error"]["kind"]) == ("cancelled", "cancelled")
    again = client.post(f"/runs/{run['id']}/cancel", headers=tenant.editor)
    assert_problem(again, 409)
    assert again.json()["current_state"] == "cancelled"
    assert client.post(f"/pipelines/{pipeline['id']}/runs", headers=tenant.editor).status_code == 202


def test_cancel_a_running_run_asks_its_worker(client: TestClient, tenant: Tenant, pipeline: dict[str, Any]) -> None:
    run_id = uuid.UUID(client.post(f"/pipelines/{pipeline['id']}/runs", headers=tenant.editor).json()["id"])
    with unit_of_work(client.app.state.engine) as session:
        lifecycle.claim(session, run_id, worker="w1", lease_s=60)

    body = client.post(f"/runs/{run_id}/cancel", headers=tenant.editor).json()

    assert (body["state"], body["cancel_requested"]) == ("running", True)
    with unit_of_work(client.app.state.engine) as session:
        assert lifecycle.heartbeat(session, run_id, worker="w1", lease_s=60) is True


def test_run_log_is_plain_text(client: TestClient, tenant: Tenant, pipeline: dict[str, Any]) -> None:
    run_id = uuid.UUID(client.post(f"/pipelines/{pipeline['id']}/runs", headers=tenant.editor).json()["id"])
    with unit_of_work(client.app.state.engine) as session:
        lifecycle.append_log(session, run_id, "line 1\nline 2\n")
        lifecycle.append_log(session, run_id, "line 3\n")

    log = client.get(f"/runs/{run_id}/log", headers=tenant.viewer)

    assert log.status_code == 200 and log.text == "line 1\nline 2\nline 3\n"
    assert client.get(f"/runs/{run_id}", headers=tenant.viewer).json()["log_tail"] == ["line 1", "line 2", "line 3"]


ROUTES = [
    ("post", "/pipelines/{pipeline}/runs", "editor"),
    ("get", "/pipelines/{pipeline}/runs", "viewer"),
    ("get", "/runs/{run}", "viewer"),
    ("get", "/runs/{run}/log", "viewer"),
    ("post", "/runs/{run}/cancel", "editor"),
]


@pytest.mark.parametrize(("method", "path", "role"), ROUTES)
def test_runs_routes_refuse_strangers_low_roles_and_other_tenants(
    client: TestClient, tenant: Tenant, other_tenant: Tenant, pipeline: dict[str, Any], method: str, path: str, role: str
) -> None:
    with unit_of_work(client.app.state.engine) as session:
        run = session.get(Run, uuid.UUID(client.post(f"/pipelines/{pipeline['id']}/runs",
                                                     headers=tenant.editor).json()["id"]))
        lifecycle.claim(session, run.id, worker="w", lease_s=60)
    url = path.format(pipeline=pipeline["id"], run=run.id)
    call = getattr(client, method)

    assert_problem(call(url), 401)
    if role == "editor":
        assert_problem(call(url, headers=tenant.viewer), 403)
    assert_problem(call(url, headers=other_tenant.admin), 404)
    assert_problem(call(path.format(pipeline=uuid.uuid4(), run=uuid.uuid4()), headers=tenant.admin), 404)
    assert_problem(call(path.format(pipeline="not-a-uuid", run="not-a-uuid"), headers=tenant.admin), 422)
    assert call(url, headers=tenant.as_(role)).status_code in (200, 202, 409)


def test_list_runs_validates_its_filters(client: TestClient, tenant: Tenant, pipeline: dict[str, Any]) -> None:
    assert_problem(client.get(f"/pipelines/{pipeline['id']}/runs?state=done", headers=tenant.viewer), 422)
    assert_problem(client.get(f"/pipelines/{pipeline['id']}/runs?sort=worker", headers=tenant.viewer), 422)


def test_a_pipeline_with_an_active_run_is_not_deleted(client: TestClient, tenant: Tenant, pipeline: dict[str, Any]) -> None:
    """Its worker would go on committing offsets for a pipeline that is gone (the rule sits on the
    runs table, api/runs/models.py, since the pipelines domain does not know runs)."""
    run = client.post(f"/pipelines/{pipeline['id']}/runs", headers=tenant.editor).json()

    refused = client.delete(f"/pipelines/{pipeline['id']}", headers=tenant.editor)
    problem = assert_problem(refused, 409)
    assert (problem["detail"], problem["run_id"]) == (
        f"Pipeline {pipeline['id']} has run {run['id']} queued; cancel it or let it finish first", run["id"])
    assert client.get(f"/pipelines/{pipeline['id']}", headers=tenant.viewer).status_code == 200
    assert client.get(f"/runs/{run['id']}", headers=tenant.viewer).json()["state"] == "queued"

    client.post(f"/runs/{run['id']}/cancel", headers=tenant.editor)
    assert client.delete(f"/pipelines/{pipeline['id']}", headers=tenant.editor).status_code == 204
    assert client.get(f"/pipelines/{pipeline['id']}", headers=tenant.viewer).status_code == 404
