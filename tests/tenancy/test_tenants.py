"""The operator's ``/tenants`` routes: create, list, read, and issue a tenant's first API keys."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.core.config import Settings
from api.main import create_app
from tests.factories import Tenant, assert_problem, bearer, make_tenant, operator


def test_create_tenant_reads_back(client: TestClient) -> None:
    created = client.post("/tenants", json={"name": "Acme Corp"}, headers=operator())
    assert created.status_code == 201, created.text
    body = created.json()
    assert set(body) == {"id", "name", "created_at"}
    assert body["name"] == "Acme Corp"
    assert created.headers["location"] == f"/tenants/{body['id']}"
    read = client.get(f"/tenants/{body['id']}", headers=operator())
    assert read.status_code == 200
    assert read.json() == body
    assert read.headers["etag"] == created.headers["etag"]


def test_list_tenants_paginates_and_sorts(client: TestClient) -> None:
    names = ["charlie", "alpha", "bravo"]
    ids = {n: client.post("/tenants", json={"name": n}, headers=operator()).json()["id"] for n in names}
    page = client.get("/tenants", params={"sort": "name", "limit": 2}, headers=operator())
    assert page.status_code == 200
    assert [t["name"] for t in page.json()["items"]] == ["alpha", "bravo"]
    assert {k: v for k, v in page.json().items() if k != "items"} == {"total": 3, "limit": 2, "offset": 0}
    rest = client.get("/tenants", params={"sort": "-name", "offset": 2}, headers=operator()).json()
    assert [(t["id"], t["name"]) for t in rest["items"]] == [(ids["alpha"], "alpha")]


def test_duplicate_tenant_name_is_409(client: TestClient) -> None:
    client.post("/tenants", json={"name": "twice"}, headers=operator())
    again = client.post("/tenants", json={"name": "twice"}, headers=operator())
    assert_problem(again, 409)
    assert client.get("/tenants", headers=operator()).json()["total"] == 1


@pytest.mark.parametrize(("body", "field"), [
    ({}, "name"),
    ({"name": ""}, "name"),
    ({"name": "x" * 101}, "name"),
    ({"name": "-leading-dash"}, "name"),
    ({"name": "semi;colon"}, "name"),
    ({"name": "ok", "plan": "gold"}, "plan"),
    ({"name": 5}, "name"),
])
def test_create_tenant_validates(client: TestClient, body: dict, field: str) -> None:
    assert_problem(client.post("/tenants", json=body, headers=operator()), 422, fields={field})


def test_get_unknown_tenant_is_404(client: TestClient) -> None:
    assert_problem(client.get(f"/tenants/{uuid.uuid4()}", headers=operator()), 404)
    assert_problem(client.get("/tenants/not-a-uuid", headers=operator()), 422, fields={"path.tenant_id"})


def test_operator_issues_keys(client: TestClient, tenant: Tenant) -> None:
    issued = client.post(f"/tenants/{tenant.id}/api-keys", json={"name": "ci", "role": "editor"}, headers=operator())
    assert issued.status_code == 201, issued.text
    body = issued.json()
    assert set(body) == {"id", "tenant_id", "name", "role", "prefix", "created_at", "revoked_at", "key"}
    assert (body["tenant_id"], body["name"], body["role"], body["revoked_at"]) == (tenant.id, "ci", "editor", None)
    assert body["key"].startswith(body["prefix"]) and body["key"].startswith("inlet_")
    assert issued.headers["location"] == f"/api-keys/{body['id']}"
    assert "etag" in issued.headers
    me = client.get("/me", headers=bearer(body["key"]))
    assert me.json() == {"tenant_id": tenant.id, "key_id": body["id"], "role": "editor"}


@pytest.mark.parametrize(("body", "field"), [
    ({"name": "k"}, "role"),
    ({"name": "k", "role": "owner"}, "role"),
    ({"name": "", "role": "viewer"}, "name"),
    ({"name": "k", "role": "viewer", "expires": "never"}, "expires"),
])
def test_operator_key_validates(client: TestClient, tenant: Tenant, body: dict, field: str) -> None:
    assert_problem(client.post(f"/tenants/{tenant.id}/api-keys", json=body, headers=operator()), 422, fields={field})


def test_operator_key_for_unknown_tenant_is_404(client: TestClient) -> None:
    response = client.post(f"/tenants/{uuid.uuid4()}/api-keys", json={"name": "k", "role": "admin"}, headers=operator())
    assert_problem(response, 404)


OPERATOR_ROUTES = [
    ("POST", "/tenants", {"name": "nope"}),
    ("GET", "/tenants", None),
    ("GET", "/tenants/{id}", None),
    ("POST", "/tenants/{id}/api-keys", {"name": "k", "role": "admin"}),
]


@pytest.mark.parametrize(("method", "path", "json"), OPERATOR_ROUTES)
def test_operator_routes_refuse_others(client: TestClient, tenant: Tenant, method: str, path: str, json: Any) -> None:
    url = path.format(id=tenant.id)
    send = {"json": json} if json is not None else {}
    assert_problem(client.request(method, url, **send), 401)
    assert_problem(client.request(method, url, headers=bearer("wrong-operator-token"), **send), 401)
    for role in ("viewer", "editor", "admin"):
        assert_problem(client.request(method, url, headers=tenant.as_(role), **send), 403)
    # Nothing was created by the refused calls.
    tenants = client.get("/tenants", headers=operator()).json()
    assert [t["id"] for t in tenants["items"]] == [tenant.id]
    assert client.get("/api-keys", headers=tenant.admin).json()["total"] == 3


def test_operator_routes_disabled_without_admin_token(settings: Settings) -> None:
    app = create_app(settings.model_copy(update={"admin_token": None}))
    with TestClient(app, raise_server_exceptions=False) as client:
        assert_problem(client.get("/tenants", headers=operator()), 403)
    app.state.engine.dispose()


def test_other_tenant_is_separate(client: TestClient, tenant: Tenant, other_tenant: Tenant) -> None:
    listed = client.get("/tenants", params={"sort": "created_at"}, headers=operator()).json()
    assert [t["id"] for t in listed["items"]] == [tenant.id, other_tenant.id]
    assert make_tenant(client).id not in (tenant.id, other_tenant.id)
