"""A tenant admin's ``/api-keys`` and ``/me``: issue, list, read, revoke; roles and tenant isolation."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.factories import Tenant, assert_auth_refused, assert_problem, bearer


@pytest.mark.parametrize("role", ["viewer", "editor", "admin"])
def test_me_names_the_caller(client: TestClient, tenant: Tenant, role: str) -> None:
    me = client.get("/me", headers=tenant.as_(role))
    assert me.status_code == 200
    body = me.json()
    assert (body["tenant_id"], body["role"]) == (tenant.id, role)
    key = client.get(f"/api-keys/{body['key_id']}", headers=tenant.admin).json()
    assert (key["name"], key["role"]) == (f"{role}-key", role)


def test_admin_issues_a_key_that_works(client: TestClient, tenant: Tenant) -> None:
    issued = client.post("/api-keys", json={"name": "deploy bot", "role": "editor"}, headers=tenant.admin)
    assert issued.status_code == 201, issued.text
    body = issued.json()
    key = body.pop("key")
    assert body == {"id": body["id"], "tenant_id": tenant.id, "name": "deploy bot", "role": "editor",
                    "prefix": key[:12], "created_at": body["created_at"], "revoked_at": None}
    assert issued.headers["location"] == f"/api-keys/{body['id']}"
    read = client.get(f"/api-keys/{body['id']}", headers=tenant.admin)
    assert read.json() == body
    assert read.headers["etag"] == issued.headers["etag"]
    assert client.get("/me", headers=bearer(key)).json() == {"tenant_id": tenant.id, "key_id": body["id"],
                                                               "role": "editor"}


def test_list_keys_shows_metadata_only(client: TestClient, tenant: Tenant) -> None:
    listed = client.get("/api-keys", params={"sort": "name"}, headers=tenant.admin)
    assert listed.status_code == 200
    body = listed.json()
    assert (body["total"], body["limit"], body["offset"]) == (3, 50, 0)
    assert [(k["name"], k["role"], k["tenant_id"]) for k in body["items"]] == [
        ("admin-key", "admin", tenant.id), ("editor-key", "editor", tenant.id), ("viewer-key", "viewer", tenant.id)]
    for item in body["items"]:
        assert "key" not in item and "key_hash" not in item
    for key in tenant.keys.values():
        assert key not in listed.text


def test_revoke_key(client: TestClient, tenant: Tenant) -> None:
    editor_id = client.get("/me", headers=tenant.editor).json()["key_id"]
    revoked = client.delete(f"/api-keys/{editor_id}", headers=tenant.admin)
    assert revoked.status_code == 204 and revoked.content == b""
    assert_problem(client.get("/connections", headers=tenant.editor), 401)
    read = client.get(f"/api-keys/{editor_id}", headers=tenant.admin).json()
    assert read["revoked_at"] is not None
    assert client.delete(f"/api-keys/{editor_id}", headers=tenant.admin).status_code == 204
    assert client.get(f"/api-keys/{editor_id}", headers=tenant.admin).json() == read
    # Revoked keys stay listed, and an admin may revoke its own key.
    assert client.get("/api-keys", headers=tenant.admin).json()["total"] == 3
    admin_id = client.get("/me", headers=tenant.admin).json()["key_id"]
    assert client.delete(f"/api-keys/{admin_id}", headers=tenant.admin).status_code == 204
    assert_problem(client.get("/api-keys", headers=tenant.admin), 401)


def test_revoke_honours_if_match(client: TestClient, tenant: Tenant) -> None:
    viewer_id = client.get("/me", headers=tenant.viewer).json()["key_id"]
    etag = client.get(f"/api-keys/{viewer_id}", headers=tenant.admin).headers["etag"]
    assert_problem(client.delete(f"/api-keys/{viewer_id}", headers={**tenant.admin, "If-Match": '"stale"'}), 412)
    assert client.get("/me", headers=tenant.viewer).status_code == 200
    assert client.delete(f"/api-keys/{viewer_id}", headers={**tenant.admin, "If-Match": etag}).status_code == 204


@pytest.mark.parametrize(("method", "suffix"), [("GET", ""), ("DELETE", "")])
def test_other_tenants_key_is_404(client: TestClient, tenant: Tenant, other_tenant: Tenant, method: str, suffix: str) -> None:
    foreign = client.get("/me", headers=other_tenant.viewer).json()["key_id"]
    for ident in (foreign, str(uuid.uuid4())):
        assert_problem(client.request(method, f"/api-keys/{ident}{suffix}", headers=tenant.admin), 404)
    assert client.get("/me", headers=other_tenant.viewer).status_code == 200
    assert client.get(f"/api-keys/{foreign}", headers=other_tenant.admin).json()["revoked_at"] is None


def test_keys_of_one_tenant_never_list_in_another(client: TestClient, tenant: Tenant, other_tenant: Tenant) -> None:
    mine = {k["id"] for k in client.get("/api-keys", headers=tenant.admin).json()["items"]}
    theirs = {k["id"] for k in client.get("/api-keys", headers=other_tenant.admin).json()["items"]}
    assert len(mine) == len(theirs) == 3 and not mine & theirs


@pytest.mark.parametrize(("body", "field"), [
    ({"name": "k"}, "role"),
    ({"name": "k", "role": "superuser"}, "role"),
    ({"role": "viewer"}, "name"),
    ({"name": "x" * 101, "role": "viewer"}, "name"),
    ({"name": "k", "role": "viewer", "tenant_id": str(uuid.uuid4())}, "tenant_id"),
])
def test_create_key_validates(client: TestClient, tenant: Tenant, body: dict, field: str) -> None:
    assert_problem(client.post("/api-keys", json=body, headers=tenant.admin), 422, fields={field})
    assert client.get("/api-keys", headers=tenant.admin).json()["total"] == 3


def test_key_path_must_be_a_uuid(client: TestClient, tenant: Tenant) -> None:
    assert_problem(client.get("/api-keys/abc", headers=tenant.admin), 422, fields={"path.key_id"})


@pytest.mark.parametrize(("method", "path", "min_role", "json"), [
    ("GET", "/me", "viewer", None),
    ("POST", "/api-keys", "admin", {"name": "k", "role": "viewer"}),
    ("GET", "/api-keys", "admin", None),
    ("GET", "/api-keys/{key}", "admin", None),
    ("DELETE", "/api-keys/{key}", "admin", None),
])
def test_key_routes_refuse_callers(client: TestClient, tenant: Tenant, method: str, path: str, min_role: str, json: Any) -> None:
    key_id = client.get("/me", headers=tenant.viewer).json()["key_id"]
    assert_auth_refused(client, method, path.format(key=key_id), tenant, min_role, json)
    keys = client.get("/api-keys", headers=tenant.admin).json()
    assert keys["total"] == 3 and all(k["revoked_at"] is None for k in keys["items"])
