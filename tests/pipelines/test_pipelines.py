"""``/pipelines``: define, list, read, replace, patch, delete, pause and resume."""

from __future__ import annotations

import uuid
from datetime import datetime

import pytest
from fastapi.testclient import TestClient

from api.core.config import Settings
from tests.factories import (
    Tenant,
    assert_auth_refused,
    assert_problem,
    create_connection,
    create_pipeline,
    pipeline_body,
)


def _events(client: TestClient, tenant: Tenant, resource_id: str) -> list[tuple[str, str]]:
    items = client.get("/audit-events", params={"resource_id": resource_id, "sort": "created_at"},
                       headers=tenant.viewer).json()["items"]
    return [(e["resource_type"], e["action"]) for e in items]


def test_create_reads_back_as_written(client: TestClient, tenant: Tenant, settings: Settings) -> None:
    conn = create_connection(client, tenant)
    sent = pipeline_body(conn["id"])
    created = client.post("/pipelines", json=sent, headers=tenant.editor)
    assert created.status_code == 201, created.text
    body = created.json()
    status = body.pop("status")
    assert body == {**sent, "id": body["id"], "created_at": body["created_at"],
                    "updated_at": body["updated_at"]}
    assert status["target_uri"] == f"{settings.resolved_storage_root}/tenants/{tenant.id}/bronze/orders"
    assert datetime.fromisoformat(status["next_run_at"]).minute % 5 == 0
    assert created.headers["location"] == f"/pipelines/{body['id']}"
    read = client.get(f"/pipelines/{body['id']}", headers=tenant.viewer)
    assert read.status_code == 200
    assert read.json() == {**body, "status": status}
    assert read.headers["etag"] == created.headers["etag"]
    assert _events(client, tenant, body["id"]) == [("pipeline", "create")]


@pytest.mark.parametrize("overrides", [
    {"schedule": None, "state": "paused"},
    {"schedule": {"interval_seconds": 300}},
    {"target": {"type": "kafka", "connection_id": "{conn}", "topic": "orders.copy"}},
])
def test_other_shapes_read_back_as_written(client: TestClient, tenant: Tenant, overrides: dict) -> None:
    conn = create_connection(client, tenant)
    if "target" in overrides:
        overrides = {"target": {**overrides["target"], "connection_id": conn["id"]}}
    sent = pipeline_body(conn["id"], **overrides)
    created = client.post("/pipelines", json=sent, headers=tenant.editor)
    assert created.status_code == 201, created.text
    body = created.json()
    assert {k: v for k, v in body.items() if k not in {"id", "status", "created_at", "updated_at"}} == sent
    if sent["state"] == "paused" or sent["schedule"] is None:
        assert body["status"]["next_run_at"] is None
    if sent["target"]["type"] == "kafka":
        assert body["status"]["target_uri"] is None


def test_list_filters_and_paginates(client: TestClient, tenant: Tenant, other_tenant: Tenant) -> None:
    a, b = create_connection(client, tenant), create_connection(client, tenant)
    p1 = create_pipeline(client, tenant, a["id"], name="orders-eu")
    p2 = create_pipeline(client, tenant, a["id"], name="orders-us", state="paused")
    p3 = create_pipeline(client, tenant, b["id"], name="click_1")
    create_pipeline(client, other_tenant, name="orders-eu")

    def names(**params: object) -> list[str]:
        response = client.get("/pipelines", params={"sort": "name", **params}, headers=tenant.viewer)
        assert response.status_code == 200, response.text
        return [p["name"] for p in response.json()["items"]]

    assert names() == ["click_1", "orders-eu", "orders-us"]
    assert names(name="orders-eu") == ["orders-eu"]
    assert names(name_contains="orders") == ["orders-eu", "orders-us"]
    p4 = create_pipeline(client, tenant, b["id"], name="clickx1")
    assert names(name_contains="k_1") == ["click_1"]  # "_" and "%" are literal, not LIKE wildcards
    assert names(name_contains="%") == []
    client.delete(f"/pipelines/{p4['id']}", headers=tenant.editor)
    assert names(state="paused") == ["orders-us"]
    assert names(state="active", connection_id=a["id"]) == ["orders-eu"]
    assert names(connection_id=str(uuid.uuid4())) == []
    page = client.get("/pipelines", params={"sort": "-name", "limit": 1, "offset": 1}, headers=tenant.viewer).json()
    assert {k: v for k, v in page.items() if k != "items"} == {"total": 3, "limit": 1, "offset": 1}
    assert page["items"] == [client.get(f"/pipelines/{p1['id']}", headers=tenant.viewer).json()]
    assert {p["id"] for p in client.get("/pipelines", headers=tenant.viewer).json()["items"]} == {
        p1["id"], p2["id"], p3["id"]}


@pytest.mark.parametrize(("params", "field"), [
    ({"state": "running"}, "query.state"),
    ({"connection_id": "x"}, "query.connection_id"),
    ({"name_contains": "x" * 101}, "query.name_contains"),
    ({"sort": "source"}, "query.sort"),
])
def test_list_validates(client: TestClient, tenant: Tenant, params: dict, field: str) -> None:
    assert_problem(client.get("/pipelines", params=params, headers=tenant.viewer), 422, fields={field})


def test_put_is_a_full_idempotent_replace(client: TestClient, tenant: Tenant) -> None:
    pipe = create_pipeline(client, tenant)
    original_etag = client.get(f"/pipelines/{pipe['id']}", headers=tenant.viewer).headers["etag"]
    new = pipeline_body(pipe["source"]["connection_id"], name=pipe["name"], schedule={"interval_seconds": 60},
                        source={"connection_id": pipe["source"]["connection_id"], "topic_pattern": "orders\\..*"})
    first = client.put(f"/pipelines/{pipe['id']}", json=new, headers=tenant.editor)
    assert first.status_code == 200, first.text
    body = first.json()
    # a full replace: the fields the new body leaves out are gone, not kept or filled in with defaults
    assert {k: v for k, v in body.items() if k not in {"id", "status", "created_at", "updated_at"}} == new
    assert first.headers["etag"] != original_etag
    second = client.put(f"/pipelines/{pipe['id']}", json=new, headers=tenant.editor)
    assert second.json() == body
    assert second.headers["etag"] == first.headers["etag"]
    assert _events(client, tenant, pipe["id"]) == [("pipeline", "create"), ("pipeline", "update")]


def test_put_can_pause(client: TestClient, tenant: Tenant) -> None:
    pipe = create_pipeline(client, tenant)
    body = {k: v for k, v in pipe.items() if k not in {"id", "status", "created_at", "updated_at"}}
    paused = client.put(f"/pipelines/{pipe['id']}", json={**body, "state": "paused"}, headers=tenant.editor).json()
    assert (paused["state"], paused["status"]["next_run_at"]) == ("paused", None)


def test_patch_merges(client: TestClient, tenant: Tenant) -> None:
    pipe = create_pipeline(client, tenant)
    etag = client.get(f"/pipelines/{pipe['id']}", headers=tenant.viewer).headers["etag"]
    patched = client.patch(f"/pipelines/{pipe['id']}", json={"source": {"topics": ["orders", "refunds"]},
                                                             "schedule": None},
                           headers={**tenant.editor, "If-Match": etag, "Content-Type": "application/merge-patch+json"})
    assert patched.status_code == 200, patched.text
    body = patched.json()
    assert body == {**pipe, "source": {**pipe["source"], "topics": ["orders", "refunds"]}, "schedule": None,
                    "status": {**pipe["status"], "next_run_at": None}, "updated_at": body["updated_at"]}
    assert patched.headers["etag"] != etag
    assert client.get(f"/pipelines/{pipe['id']}", headers=tenant.viewer).json() == body
    assert _events(client, tenant, pipe["id"]) == [("pipeline", "create"), ("pipeline", "update")]


@pytest.mark.parametrize(("patch", "field"), [
    ({"source": {"topics": ["bad topic"]}}, "source.topics[0]"),
    ({"name": "spaces are bad"}, "name"),
    ({"color": "blue"}, "color"),
    ({"source": {"colour": "blue"}}, "source.colour"),
    ({"target": {"path": "../escape"}}, "target.path"),
    ({"state": "running"}, "state"),
])
def test_invalid_patch_is_422_and_changes_nothing(client: TestClient, tenant: Tenant, patch: dict, field: str) -> None:
    pipe = create_pipeline(client, tenant)
    assert_problem(client.patch(f"/pipelines/{pipe['id']}", json=patch, headers=tenant.editor), 422, fields={field})
    assert client.get(f"/pipelines/{pipe['id']}", headers=tenant.viewer).json() == pipe


def test_patch_body_must_be_an_object(client: TestClient, tenant: Tenant) -> None:
    pipe = create_pipeline(client, tenant)
    assert_problem(client.patch(f"/pipelines/{pipe['id']}", json=["name"], headers=tenant.editor), 422)


def test_pause_and_resume(client: TestClient, tenant: Tenant) -> None:
    pipe = create_pipeline(client, tenant)
    paused = client.post(f"/pipelines/{pipe['id']}/pause", headers=tenant.editor)
    assert paused.status_code == 200, paused.text
    assert paused.json() == {**pipe, "state": "paused", "status": {**pipe["status"], "next_run_at": None},
                             "updated_at": paused.json()["updated_at"]}
    again = client.post(f"/pipelines/{pipe['id']}/pause", headers=tenant.editor)
    assert again.json() == paused.json() and again.headers["etag"] == paused.headers["etag"]
    resumed = client.post(f"/pipelines/{pipe['id']}/resume", headers={**tenant.editor, "If-Match": paused.headers["etag"]})
    assert resumed.status_code == 200, resumed.text
    assert resumed.json()["state"] == "active" and resumed.json()["status"]["next_run_at"] is not None
    assert client.get(f"/pipelines/{pipe['id']}", headers=tenant.viewer).json() == resumed.json()
    assert _events(client, tenant, pipe["id"]) == [("pipeline", "create"), ("pipeline", "pause"),
                                                   ("pipeline", "resume")]
    assert_problem(client.post(f"/pipelines/{pipe['id']}/pause", headers={**tenant.editor, "If-Match": paused.headers["etag"]}), 412)


def test_delete(client: TestClient, tenant: Tenant) -> None:
    pipe = create_pipeline(client, tenant)
    deleted = client.delete(f"/pipelines/{pipe['id']}", headers=tenant.editor)
    assert deleted.status_code == 204 and deleted.content == b""
    assert_problem(client.get(f"/pipelines/{pipe['id']}", headers=tenant.viewer), 404)
    assert_problem(client.delete(f"/pipelines/{pipe['id']}", headers=tenant.editor), 404)
    assert _events(client, tenant, pipe["id"])[-1] == ("pipeline", "delete")


def test_duplicate_name_is_409(client: TestClient, tenant: Tenant, other_tenant: Tenant) -> None:
    pipe = create_pipeline(client, tenant)
    conn_id = pipe["source"]["connection_id"]
    body = assert_problem(client.post("/pipelines", json=pipeline_body(conn_id, name=pipe["name"]),
                                      headers=tenant.editor), 409)
    assert body["conflicting_id"] == pipe["id"]
    other = create_pipeline(client, tenant, conn_id)
    assert_problem(client.patch(f"/pipelines/{other['id']}", json={"name": pipe["name"]}, headers=tenant.editor), 409)
    assert create_pipeline(client, other_tenant, name=pipe["name"])["name"] == pipe["name"]


def test_other_tenants_connection_is_refused(client: TestClient, tenant: Tenant, other_tenant: Tenant) -> None:
    theirs = create_connection(client, other_tenant)
    response = client.post("/pipelines", json=pipeline_body(theirs["id"]), headers=tenant.editor)
    body = assert_problem(response, 422, fields={"source.connection_id"})
    assert theirs["name"] not in response.text
    mine = create_connection(client, tenant)
    kafka_target = {"type": "kafka", "connection_id": theirs["id"], "topic": "t"}
    assert_problem(client.post("/pipelines", json=pipeline_body(mine["id"], target=kafka_target),
                               headers=tenant.editor), 422, fields={"target.connection_id"})
    assert body["errors"][0]["field"] == "source.connection_id"
    assert client.get("/pipelines", headers=tenant.viewer).json()["total"] == 0


ONE = [("GET", ""), ("PUT", ""), ("PATCH", ""), ("DELETE", ""), ("POST", "/pause"), ("POST", "/resume")]


@pytest.mark.parametrize(("method", "suffix"), ONE)
def test_other_tenants_pipeline_is_404(client: TestClient, tenant: Tenant, other_tenant: Tenant, method: str, suffix: str) -> None:
    theirs = create_pipeline(client, other_tenant)
    mine = create_connection(client, tenant)
    json = {"PUT": pipeline_body(mine["id"], name=theirs["name"]), "PATCH": {"state": "paused"}}.get(method)
    send = {"json": json} if json is not None else {}
    for ident in (theirs["id"], str(uuid.uuid4())):
        assert_problem(client.request(method, f"/pipelines/{ident}{suffix}", headers=tenant.editor, **send), 404)
    assert client.get(f"/pipelines/{theirs['id']}", headers=other_tenant.viewer).json() == theirs


@pytest.mark.parametrize(("method", "suffix", "min_role"), [
    ("POST", "", "editor"), ("GET", "", "viewer"),
    *[(m, "/{id}" + s, "viewer" if m == "GET" else "editor") for m, s in ONE],
])
def test_routes_refuse_callers(client: TestClient, tenant: Tenant, method: str, suffix: str, min_role: str) -> None:
    pipe = create_pipeline(client, tenant)
    conn_id = pipe["source"]["connection_id"]
    json = None
    if method == "PUT":
        json = pipeline_body(conn_id, name=pipe["name"], state="paused")
    elif method == "PATCH":
        json = {"state": "paused"}
    elif method == "POST" and suffix == "":
        json = pipeline_body(conn_id)
    assert_auth_refused(client, method, "/pipelines" + suffix.format(id=pipe["id"]), tenant, min_role, json)
    assert client.get("/pipelines", headers=tenant.viewer).json()["items"] == [pipe]
