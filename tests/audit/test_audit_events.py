"""``GET /audit-events``: every write leaves an event with who, what, before and after (no secrets)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.factories import (
    PASSWORD,
    Tenant,
    assert_auth_refused,
    assert_problem,
    connection_body,
    create_connection,
    create_pipeline,
    operator,
)


def _trail(client: TestClient, tenant: Tenant, **params: object) -> list[dict]:
    response = client.get("/audit-events", params={"sort": "created_at", "limit": 500, **params}, headers=tenant.viewer)
    assert response.status_code == 200, response.text
    return response.json()["items"]


def test_every_write_is_recorded(client: TestClient, tenant: Tenant, other_tenant: Tenant) -> None:
    me = {role: client.get("/me", headers=tenant.as_(role)).json()["key_id"] for role in ("admin", "editor")}
    conn = create_connection(client, tenant)
    client.patch(f"/connections/{conn['id']}", json={"options": {"client.id": None}}, headers=tenant.editor)
    pipe = create_pipeline(client, tenant, conn["id"])
    client.post(f"/pipelines/{pipe['id']}/pause", headers=tenant.editor)
    client.post(f"/pipelines/{pipe['id']}/resume", headers=tenant.editor)
    client.patch(f"/pipelines/{pipe['id']}", json={"schedule": None}, headers=tenant.editor)
    client.delete(f"/pipelines/{pipe['id']}", headers=tenant.editor)
    client.delete(f"/connections/{conn['id']}", headers=tenant.editor)
    key = client.post("/api-keys", json={"name": "temp", "role": "viewer"}, headers=tenant.admin).json()
    client.delete(f"/api-keys/{key['id']}", headers=tenant.admin)
    create_connection(client, other_tenant)

    trail = _trail(client, tenant)
    assert [(e["resource_type"], e["action"], e["actor"]) for e in trail] == [
        ("tenant", "create", "operator"),
        *[("api_key", "create", "operator")] * 3,
        ("connection", "create", f"key:{me['editor']}"),
        ("connection", "update", f"key:{me['editor']}"),
        ("pipeline", "create", f"key:{me['editor']}"),
        ("pipeline", "pause", f"key:{me['editor']}"),
        ("pipeline", "resume", f"key:{me['editor']}"),
        ("pipeline", "update", f"key:{me['editor']}"),
        ("pipeline", "delete", f"key:{me['editor']}"),
        ("connection", "delete", f"key:{me['editor']}"),
        ("api_key", "create", f"key:{me['admin']}"),
        ("api_key", "revoke", f"key:{me['admin']}"),
    ]
    assert {e["resource_id"] for e in trail[4:6] + trail[11:12]} == {conn["id"]}
    assert {e["resource_id"] for e in trail[6:11]} == {pipe["id"]}
    assert trail[0]["resource_id"] == tenant.id and trail[0]["after"] == {"name": tenant.name}
    assert trail[12]["actor_key_id"] == me["admin"] and trail[1]["actor_key_id"] is None

    conn_update = trail[5]
    assert conn_update["before"]["options"] == {"client.id": "inlet-tests"}
    assert conn_update["after"] == {**conn_update["before"], "options": {}}
    assert conn_update["after"]["has_credentials"] is True and "credentials" not in conn_update["after"]
    pause = trail[7]
    assert (pause["before"]["state"], pause["after"]["state"]) == ("active", "paused")
    assert pause["after"] == {"name": pipe["name"], "source": pipe["source"], "target": pipe["target"],
                              "schedule": pipe["schedule"], "state": "paused"}
    assert trail[10]["before"]["schedule"] is None and trail[10]["after"] is None
    assert trail[13]["before"] == {"name": "temp", "role": "viewer", "prefix": key["prefix"]}
    response_text = client.get("/audit-events", headers=tenant.viewer).text
    assert PASSWORD not in response_text and key["key"] not in response_text


def test_refused_and_no_op_writes_leave_no_event(client: TestClient, tenant: Tenant) -> None:
    conn = create_connection(client, tenant)
    before = len(_trail(client, tenant))
    client.put(f"/connections/{conn['id']}", json=connection_body(name=conn["name"]), headers=tenant.editor)
    client.patch(f"/connections/{conn['id']}", json={}, headers=tenant.editor)
    client.post("/connections", json=connection_body(name=conn["name"]), headers=tenant.editor)  # 409
    client.post("/connections", json=connection_body(bootstrap_servers="x"), headers=tenant.editor)  # 422
    client.delete(f"/connections/{conn['id']}", headers={**tenant.editor, "If-Match": '"old"'})  # 412
    client.delete(f"/connections/{conn['id']}", headers=tenant.viewer)  # 403
    assert len(_trail(client, tenant)) == before


def test_filters_sort_and_pages(client: TestClient, tenant: Tenant) -> None:
    conn = create_connection(client, tenant)
    pipe = create_pipeline(client, tenant, conn["id"])
    client.post(f"/pipelines/{pipe['id']}/pause", headers=tenant.editor)
    assert [e["action"] for e in _trail(client, tenant, resource_type="pipeline")] == ["create", "pause"]
    assert [e["action"] for e in _trail(client, tenant, resource_id=conn["id"])] == ["create"]
    assert [e["resource_type"] for e in _trail(client, tenant, action="pause")] == ["pipeline"]
    newest = client.get("/audit-events", params={"limit": 2}, headers=tenant.viewer).json()
    assert [(e["resource_type"], e["action"]) for e in newest["items"]] == [("pipeline", "pause"),
                                                                              ("pipeline", "create")]
    assert (newest["total"], newest["limit"], newest["offset"]) == (7, 2, 0)
    oldest_last = client.get("/audit-events", params={"offset": 6}, headers=tenant.viewer).json()["items"]
    assert [(e["resource_type"], e["action"]) for e in oldest_last] == [("tenant", "create")]


def test_other_tenants_events_are_invisible(client: TestClient, tenant: Tenant, other_tenant: Tenant) -> None:
    theirs = create_connection(client, other_tenant)
    assert _trail(client, tenant, resource_id=theirs["id"]) == []
    assert {e["resource_id"] for e in _trail(client, tenant)}.isdisjoint({theirs["id"], other_tenant.id})


@pytest.mark.parametrize(("params", "field"), [
    ({"sort": "actor"}, "query.sort"),
    ({"limit": 501}, "query.limit"),
    ({"limit": 0}, "query.limit"),
    ({"offset": -1}, "query.offset"),
    ({"resource_type": "x" * 33}, "query.resource_type"),
])
def test_list_validates(client: TestClient, tenant: Tenant, params: dict, field: str) -> None:
    assert_problem(client.get("/audit-events", params=params, headers=tenant.viewer), 422, fields={field})


def test_refuses_callers(client: TestClient, tenant: Tenant) -> None:
    assert_auth_refused(client, "GET", "/audit-events", tenant, "viewer")
    assert_problem(client.get("/audit-events", headers=operator()), 403)
