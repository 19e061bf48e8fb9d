"""``/connections``: create, read, list, replace, patch, delete; credentials are write-only."""

from __future__ import annotations

import uuid
from typing import Any

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
    plaintext_connection_body,
)


def _public(body: dict) -> dict:
    """What a connection body reads back as: everything but the write-only credentials."""
    return {k: v for k, v in body.items() if k != "credentials"}


def test_create_reads_back_without_credentials(client: TestClient, tenant: Tenant) -> None:
    sent = connection_body()
    created = client.post("/connections", json=sent, headers=tenant.editor)
    assert created.status_code == 201, created.text
    body = created.json()
    assert body == {**_public(sent), "id": body["id"], "ssl": None, "schema_registry": None, "has_credentials": True,
                    "credentials_version": 1, "credentials_status": "ok", "created_at": body["created_at"],
                    "updated_at": body["updated_at"]}
    assert created.headers["location"] == f"/connections/{body['id']}"
    read = client.get(f"/connections/{body['id']}", headers=tenant.viewer)
    assert read.status_code == 200
    assert read.json() == body
    assert read.headers["etag"] == created.headers["etag"]
    assert PASSWORD not in created.text + read.text


def test_plaintext_connection_has_no_credentials(client: TestClient, tenant: Tenant) -> None:
    created = client.post("/connections", json=plaintext_connection_body("127.0.0.1:9092,[::1]:9093"),
                          headers=tenant.editor)
    assert created.status_code == 201, created.text
    body = created.json()
    assert (body["security_protocol"], body["sasl_mechanism"], body["has_credentials"], body["credentials_version"]) \
        == ("PLAINTEXT", None, False, None)


def test_list_connections(client: TestClient, tenant: Tenant, other_tenant: Tenant) -> None:
    made = [create_connection(client, tenant, name=n) for n in ("b-conn", "a-conn", "c-conn")]
    create_connection(client, other_tenant, name="a-conn")
    page = client.get("/connections", params={"sort": "name", "limit": 2}, headers=tenant.viewer).json()
    assert page == {"items": [made[1], made[0]], "total": 3, "limit": 2, "offset": 0}
    named = client.get("/connections", params={"name": "c-conn"}, headers=tenant.viewer).json()
    assert named["items"] == [made[2]] and named["total"] == 1


def test_put_replaces_and_same_body_twice_changes_nothing(client: TestClient, tenant: Tenant) -> None:
    conn = create_connection(client, tenant)
    new = connection_body(name=conn["name"], bootstrap_servers="broker-9.example.com:9094", options={})
    first = client.put(f"/connections/{conn['id']}", json=new, headers=tenant.editor)
    assert first.status_code == 200, first.text
    assert first.json() == {**conn, **_public(new), "updated_at": first.json()["updated_at"]}
    events = client.get("/audit-events", params={"resource_id": conn["id"]}, headers=tenant.viewer).json()["total"]
    second = client.put(f"/connections/{conn['id']}", json=new, headers=tenant.editor)
    assert second.status_code == 200
    assert second.json() == first.json()
    assert second.headers["etag"] == first.headers["etag"]
    assert client.get("/audit-events", params={"resource_id": conn["id"]}, headers=tenant.viewer).json()["total"] == events


def test_put_with_new_password_rotates_credentials(client: TestClient, tenant: Tenant) -> None:
    conn = create_connection(client, tenant)
    body = connection_body(name=conn["name"], credentials={"username": "ingest", "password": PASSWORD + "-rotated"})
    rotated = client.put(f"/connections/{conn['id']}", json=body, headers=tenant.editor)
    assert rotated.status_code == 200, rotated.text
    assert (rotated.json()["has_credentials"], rotated.json()["credentials_version"]) == (True, 2)
    # Omitting the write-only credentials on PUT keeps them.
    kept = client.put(f"/connections/{conn['id']}", json=_public(body), headers=tenant.editor)
    assert kept.json() == rotated.json()


def test_patch_changes_only_what_it_names(client: TestClient, tenant: Tenant) -> None:
    conn = create_connection(client, tenant)
    etag = client.get(f"/connections/{conn['id']}", headers=tenant.viewer).headers["etag"]
    patched = client.patch(f"/connections/{conn['id']}", json={"bootstrap_servers": "other.example.com:9092"},
                           headers={**tenant.editor, "If-Match": etag,
                                    "Content-Type": "application/merge-patch+json"})
    assert patched.status_code == 200, patched.text
    assert patched.json() == {**conn, "bootstrap_servers": "other.example.com:9092",
                              "updated_at": patched.json()["updated_at"]}
    assert patched.headers["etag"] != etag
    assert client.get(f"/connections/{conn['id']}", headers=tenant.viewer).json() == patched.json()


def test_patch_to_plaintext_removes_credentials(client: TestClient, tenant: Tenant) -> None:
    conn = create_connection(client, tenant)
    patched = client.patch(f"/connections/{conn['id']}", headers=tenant.editor, json={
        "security_protocol": "PLAINTEXT", "sasl_mechanism": None, "credentials": None})
    assert patched.status_code == 200, patched.text
    assert (patched.json()["has_credentials"], patched.json()["credentials_version"], patched.json()["credentials_status"]) \
        == (False, None, None)


@pytest.mark.parametrize("patch", [{"name": "bad name!"}, {"color": "blue"}, {"security_protocol": "PLAINTEXT"}])
def test_invalid_patch_is_422_and_changes_nothing(client: TestClient, tenant: Tenant, patch: dict) -> None:
    conn = create_connection(client, tenant)
    assert_problem(client.patch(f"/connections/{conn['id']}", json=patch, headers=tenant.editor), 422)
    assert client.get(f"/connections/{conn['id']}", headers=tenant.viewer).json() == conn


def test_delete(client: TestClient, tenant: Tenant) -> None:
    conn = create_connection(client, tenant)
    deleted = client.delete(f"/connections/{conn['id']}", headers=tenant.editor)
    assert deleted.status_code == 204 and deleted.content == b""
    assert_problem(client.get(f"/connections/{conn['id']}", headers=tenant.viewer), 404)
    assert_problem(client.delete(f"/connections/{conn['id']}", headers=tenant.editor), 404)


@pytest.mark.parametrize("role", ["source", "target"])
def test_connection_used_by_a_pipeline_cannot_be_deleted(client: TestClient, tenant: Tenant, role: str) -> None:
    conn = create_connection(client, tenant)
    if role == "source":
        pipeline = create_pipeline(client, tenant, conn["id"])
    else:
        source = create_connection(client, tenant)
        pipeline = create_pipeline(client, tenant, source["id"],
                                   target={"type": "kafka", "connection_id": conn["id"], "topic": "copy"})
    body = assert_problem(client.delete(f"/connections/{conn['id']}", headers=tenant.editor), 409)
    assert body["pipeline_ids"] == [pipeline["id"]]
    assert client.get(f"/connections/{conn['id']}", headers=tenant.viewer).json() == conn
    client.delete(f"/pipelines/{pipeline['id']}", headers=tenant.editor)
    assert client.delete(f"/connections/{conn['id']}", headers=tenant.editor).status_code == 204


def test_duplicate_name_is_409(client: TestClient, tenant: Tenant, other_tenant: Tenant) -> None:
    conn = create_connection(client, tenant)
    body = assert_problem(client.post("/connections", json=connection_body(name=conn["name"]), headers=tenant.editor), 409)
    assert body["conflicting_id"] == conn["id"]
    other = create_connection(client, tenant)
    renamed = client.patch(f"/connections/{other['id']}", json={"name": conn["name"]}, headers=tenant.editor)
    assert_problem(renamed, 409)
    # Names are per tenant.
    assert create_connection(client, other_tenant, name=conn["name"])["name"] == conn["name"]


@pytest.mark.parametrize(("overrides", "field"), [
    ({"name": ""}, "name"),
    ({"name": "a/b"}, "name"),
    ({"bootstrap_servers": "broker.example.com"}, "bootstrap_servers"),
    ({"bootstrap_servers": "broker.example.com:0"}, "bootstrap_servers"),
    ({"bootstrap_servers": "broker.example.com:70000"}, "bootstrap_servers"),
    ({"bootstrap_servers": "a.example.com:9092,,b.example.com:9092"}, "bootstrap_servers"),
    ({"bootstrap_servers": "bad_host!:9092"}, "bootstrap_servers"),
    ({"bootstrap_servers": "[not-ipv6]:9092"}, "bootstrap_servers"),
    ({"bootstrap_servers": ",".join(f"b{i}.example.com:9092" for i in range(51))}, "bootstrap_servers"),
    ({"security_protocol": "TLS"}, "security_protocol"),
    ({"sasl_mechanism": "GSSAPI"}, "sasl_mechanism"),
    ({"credentials": {"username": "u"}}, "credentials"),
    ({"credentials": {"username": "u", "password": "p", "token": "t"}}, "credentials"),
    ({"options": {"sasl.password": "x"}}, "options"),
    ({"options": {"client.id": "x" * 1025}}, "options"),
    ({"colour": "blue"}, "colour"),
])
def test_create_validates(client: TestClient, tenant: Tenant, overrides: dict, field: str) -> None:
    response = client.post("/connections", json=connection_body(**overrides), headers=tenant.editor)
    body = assert_problem(response, 422)
    assert any(e["field"] == field or e["field"].startswith(field + ".") or e["field"].startswith(field + "[")
               for e in body["errors"]), body["errors"]
    assert client.get("/connections", headers=tenant.viewer).json()["total"] == 0


@pytest.mark.parametrize("overrides", [
    {"security_protocol": "SASL_SSL", "sasl_mechanism": None, "credentials": None},
    {"security_protocol": "PLAINTEXT"},
    {"sasl_mechanism": "OAUTHBEARER"},
    {"credentials": None},
])
def test_inconsistent_security_is_422(client: TestClient, tenant: Tenant, overrides: dict) -> None:
    assert_problem(client.post("/connections", json=connection_body(**overrides), headers=tenant.editor), 422)


@pytest.mark.parametrize(("method", "json"), [
    ("GET", None), ("PUT", "body"), ("PATCH", {"options": {}}), ("DELETE", None)])
def test_other_tenants_connection_is_404(client: TestClient, tenant: Tenant, other_tenant: Tenant, method: str, json: Any) -> None:
    theirs = create_connection(client, other_tenant)
    send = {"json": connection_body(name=theirs["name"]) if json == "body" else json} if json else {}
    for ident in (theirs["id"], str(uuid.uuid4())):
        assert_problem(client.request(method, f"/connections/{ident}", headers=tenant.editor, **send), 404)
    assert client.get(f"/connections/{theirs['id']}", headers=other_tenant.viewer).json() == theirs
    assert client.get("/connections", headers=tenant.viewer).json()["total"] == 0


def test_bad_id_is_422(client: TestClient, tenant: Tenant) -> None:
    assert_problem(client.get("/connections/42", headers=tenant.viewer), 422, fields={"path.connection_id"})


@pytest.mark.parametrize(("method", "path", "min_role"), [
    ("POST", "/connections", "editor"),
    ("GET", "/connections", "viewer"),
    ("GET", "/connections/{id}", "viewer"),
    ("PUT", "/connections/{id}", "editor"),
    ("PATCH", "/connections/{id}", "editor"),
    ("DELETE", "/connections/{id}", "editor"),
])
def test_routes_refuse_callers(client: TestClient, tenant: Tenant, method: str, path: str, min_role: str) -> None:
    conn = create_connection(client, tenant)
    json = {"PATCH": {"options": {}}, "PUT": connection_body(name=conn["name"]),
            "POST": connection_body()}.get(method)
    assert_auth_refused(client, method, path.format(id=conn["id"]), tenant, min_role, json)
    assert client.get("/connections", headers=tenant.viewer).json()["items"] == [conn]


_OAUTH = {"sasl_mechanism": "OAUTHBEARER", "credentials": {
    "client_id": "inlet", "client_secret": "oauth-secret", "token_endpoint_url": "https://idp.example.com/oauth2/token"}}


def test_sasl_extensions_are_stored_and_shown_with_the_options(client: TestClient, tenant: Tenant) -> None:
    # Confluent Cloud names the cluster and identity pool as SASL extensions beside the token (KIP-342).
    options = {"sasl.oauthbearer.extensions": "logicalCluster=lkc-8x2q1,identityPoolId=pool-Ab3d"}
    created = client.post("/connections", json=connection_body(**_OAUTH, options=options), headers=tenant.editor)
    assert created.status_code == 201, created.text
    assert (created.json()["options"], created.json()["has_credentials"]) == (options, True)
    assert client.get(f"/connections/{created.json()['id']}", headers=tenant.viewer).json() == created.json()


@pytest.mark.parametrize(("overrides", "message"), [
    ({**_OAUTH, "options": {"sasl.oauthbearer.extensions": "auth=Bearer x"}},
     "sasl.oauthbearer.extensions: SASL extension 1: the key auth is reserved for the token itself"),
    ({**_OAUTH, "options": {"sasl.oauthbearer.extensions": "logicalCluster=lkc-1,pool_id=p"}},
     "sasl.oauthbearer.extensions: SASL extension 2 is not key=value with a key of letters only (A-Z, a-z)"),
    ({"options": {"sasl.oauthbearer.extensions": "logicalCluster=lkc-1"}},
     "sasl.oauthbearer.extensions is only used with sasl_mechanism OAUTHBEARER"),
])
def test_sasl_extensions_are_checked_at_definition(client: TestClient, tenant: Tenant, overrides: dict, message: str) -> None:
    response = client.post("/connections", json=connection_body(**overrides), headers=tenant.editor)
    assert (response.status_code, response.json()) == (422, {
        "type": "https://inlet.dev/problems/validation-failed", "title": "Invalid request", "status": 422,
        "detail": "The request is not valid: options", "instance": "/connections",
        "errors": [{"field": "options", "message": f"Value error, {message}", "type": "value_error"}]})
    assert client.get("/connections", headers=tenant.viewer).json()["total"] == 0
