"""A connection's schema registry through the HTTP API: its settings read back, its credentials
write-only in the connection's secret (kept, rotated, removed, lost), validation, roles and tenants.
The connection test against a registry is in test_connection_registry_probe.py."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session

from api.connections.client_configs import registry_config
from api.connections.models import Connection
from tests.factories import (
    PASSWORD,
    Tenant,
    assert_auth_refused,
    assert_problem,
    connection_body,
    create_connection,
    plaintext_connection_body,
)

REGISTRY_PASSWORD = "sr-s3cr3t-Pa55-for-tests-77e1"
TOKEN = "sr-bearer-T0ken-for-tests-3b9d"
URL = "https://registry.example.com:8081"
CA = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
MERGE = {"Content-Type": "application/merge-patch+json"}


def registry(**overrides: Any) -> dict[str, Any]:
    return {"url": URL, "credentials": {"username": "inlet", "password": REGISTRY_PASSWORD}} | overrides


def shown(auth: str = "basic", **overrides: Any) -> dict[str, Any]:
    """The registry as the API shows it."""
    return {"url": URL, "ca_pem": None, "endpoint_identification": "https", "auth": auth} | overrides


def _row(app: Any, connection_id: str) -> Connection:
    with Session(app.state.engine) as session:
        row = session.get(Connection, uuid.UUID(connection_id))
    assert row is not None
    return row


def _secret(app: Any, connection_id: str, version: int | None = None) -> dict[str, Any]:
    row = _row(app, connection_id)
    assert row.secret_path is not None
    return app.state.secrets.read(row.secret_path, version)  # type: ignore[no-any-return]


def _events(client: TestClient, tenant: Any, connection_id: str) -> list[dict[str, Any]]:
    return client.get("/audit-events", params={"resource_id": connection_id, "sort": "created_at"},
                      headers=tenant.admin).json()["items"]


def test_create_reads_the_registry_back_without_its_credentials(client: TestClient, app: Any, tenant: Tenant) -> None:
    sent = connection_body(schema_registry=registry(ca_pem=CA, endpoint_identification="none"))
    created = client.post("/connections", json=sent, headers=tenant.editor)
    assert created.status_code == 201, created.text
    body = created.json()
    assert body == {
        "id": body["id"], "name": sent["name"], "bootstrap_servers": sent["bootstrap_servers"],
        "security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512", "ssl": None,
        "options": {"client.id": "inlet-tests"}, "schema_registry": shown(ca_pem=CA, endpoint_identification="none"),
        "has_credentials": True, "credentials_version": 1, "credentials_status": "ok",
        "created_at": body["created_at"], "updated_at": body["updated_at"],
    }
    read = client.get(f"/connections/{body['id']}", headers=tenant.viewer)
    assert read.json() == body
    assert REGISTRY_PASSWORD not in created.text + read.text + client.get("/connections", headers=tenant.viewer).text
    # One secret holds the cluster's and the registry's credentials.
    assert _secret(app, body["id"]) == {"credentials": {"username": "ingest", "password": PASSWORD},
                                        "registry_credentials": {"username": "inlet", "password": REGISTRY_PASSWORD}}
    assert _row(app, body["id"]).schema_registry == {"url": URL, "ca_pem": CA, "endpoint_identification": "none",
                                                     "auth": "basic"}
    created_event = _events(client, tenant, body["id"])[0]
    assert created_event["after"]["schema_registry"] == shown(ca_pem=CA, endpoint_identification="none")
    config = registry_config(_row(app, body["id"]), app.state.secrets)
    assert config is not None
    assert (config.url, config.username, config.password, config.token, config.ca_pem, config.verify_hostname) == (
        URL, "inlet", REGISTRY_PASSWORD, None, CA, False)


def test_a_bearer_token_or_no_credentials_at_all(client: TestClient, app: Any, tenant: Tenant) -> None:
    bearer = create_connection(client, tenant, schema_registry=registry(credentials={"token": TOKEN}))
    assert bearer["schema_registry"] == shown("bearer")
    assert _secret(app, bearer["id"])["registry_credentials"] == {"token": TOKEN}
    config = registry_config(_row(app, bearer["id"]), app.state.secrets)
    assert config is not None and (config.username, config.password, config.token) == (None, None, TOKEN)

    open_registry = {"url": "http://registry.internal:8081"}
    plain = client.post("/connections", json=plaintext_connection_body("b1.example.com:9092", schema_registry=open_registry),
                        headers=tenant.editor)
    assert plain.status_code == 201, plain.text
    assert plain.json()["schema_registry"] == shown("none", url="http://registry.internal:8081")
    # Nothing write-only: no secret at all.
    assert (plain.json()["has_credentials"], plain.json()["credentials_version"], _row(app, plain.json()["id"]).secret_path) \
        == (False, None, None)
    config = registry_config(_row(app, plain.json()["id"]), app.state.secrets)
    assert config is not None and (config.url, config.username, config.token, config.verify_hostname) == (
        "http://registry.internal:8081", None, None, True)
    without = create_connection(client, tenant)
    assert without["schema_registry"] is None and registry_config(_row(app, without["id"]), app.state.secrets) is None


def test_registry_credentials_are_kept_rotated_and_removed(client: TestClient, app: Any, tenant: Tenant) -> None:
    conn = create_connection(client, tenant, schema_registry=registry())
    url = f"/connections/{conn['id']}"
    etag = client.get(url, headers=tenant.viewer).headers["etag"]

    # PUT without the registry's credentials keeps them: nothing changes, not even the ETag.
    put_body = connection_body(name=conn["name"], schema_registry={"url": URL})
    del put_body["credentials"]
    kept = client.put(url, json=put_body, headers=tenant.editor)
    assert kept.status_code == 200, kept.text
    assert kept.json() == conn and kept.headers["etag"] == etag

    # PATCH of the URL keeps them too.
    moved = client.patch(url, json={"schema_registry": {"url": "https://sr.example.com"}}, headers=tenant.editor | MERGE)
    assert moved.status_code == 200, moved.text
    assert moved.json() == {**conn, "schema_registry": shown(url="https://sr.example.com"),
                            "updated_at": moved.json()["updated_at"]}

    # New credentials, even of the other kind, are a new version of the secret.
    rotated = client.patch(url, json={"schema_registry": {"credentials": {"token": TOKEN}}}, headers=tenant.editor | MERGE)
    assert rotated.status_code == 200, rotated.text
    assert (rotated.json()["schema_registry"]["auth"], rotated.json()["credentials_version"]) == ("bearer", 2)
    assert _secret(app, conn["id"]) == {"credentials": {"username": "ingest", "password": PASSWORD},
                                        "registry_credentials": {"token": TOKEN}}
    # A run planned before the rotation keeps reading the version it was planned with.
    planned = registry_config(_row(app, conn["id"]), app.state.secrets, version=1)
    assert planned is not None and (planned.username, planned.password, planned.token) == ("inlet", REGISTRY_PASSWORD, None)
    same = client.put(url, json={**put_body, "schema_registry": {"url": "https://sr.example.com",
                                                                 "credentials": {"token": TOKEN}}}, headers=tenant.editor)
    assert same.json() == rotated.json() and same.headers["etag"] == rotated.headers["etag"]

    # null removes them (a new version without them); the Kafka credentials stay.
    dropped = client.patch(url, json={"schema_registry": {"credentials": None}}, headers=tenant.editor | MERGE)
    assert (dropped.json()["schema_registry"], dropped.json()["credentials_version"]) == (
        shown("none", url="https://sr.example.com"), 3)
    assert _secret(app, conn["id"]) == {"credentials": {"username": "ingest", "password": PASSWORD}}

    removed = client.patch(url, json={"schema_registry": None}, headers=tenant.editor | MERGE)
    assert removed.status_code == 200, removed.text
    assert (removed.json()["schema_registry"], removed.json()["credentials_version"]) == (None, 3)
    assert registry_config(_row(app, conn["id"]), app.state.secrets) is None

    events = _events(client, tenant, conn["id"])
    assert [e["action"] for e in events] == ["create", "update", "update", "update", "update"]
    assert [e["after"]["schema_registry"] for e in events] == [
        shown(), shown(url="https://sr.example.com"), shown("bearer", url="https://sr.example.com"),
        shown("none", url="https://sr.example.com"), None]
    for text in (str(events), str(_row(app, conn["id"]))):
        assert REGISTRY_PASSWORD not in text and TOKEN not in text


def test_removing_the_registry_of_a_connection_without_other_secrets_destroys_the_secret(client: TestClient, app: Any, tenant: Tenant) -> None:
    created = client.post("/connections", json=plaintext_connection_body("b1.example.com:9092", schema_registry=registry()),
                          headers=tenant.editor)
    conn = created.json()
    path = _row(app, conn["id"]).secret_path
    assert (conn["has_credentials"], conn["credentials_version"], path) == (
        True, 1, f"tenants/{tenant.id}/connections/{conn['id']}")
    assert app.state.secrets.read(path) == {"registry_credentials": {"username": "inlet", "password": REGISTRY_PASSWORD}}

    removed = client.patch(f"/connections/{conn['id']}", json={"schema_registry": None}, headers=tenant.editor | MERGE)
    assert removed.status_code == 200, removed.text
    assert removed.json() == {**conn, "schema_registry": None, "has_credentials": False, "credentials_version": None,
                              "credentials_status": None, "updated_at": removed.json()["updated_at"]}
    assert app.state.secrets.describe(path) is None and _row(app, conn["id"]).secret_path is None


def test_a_lost_secret_version_asks_for_the_registry_credentials_again(client: TestClient, app: Any, tenant: Tenant) -> None:
    conn = create_connection(client, tenant, schema_registry=registry())
    url = f"/connections/{conn['id']}"
    app.state.secrets.destroy(_row(app, conn["id"]).secret_path)  # as if the store lost it
    new_kafka = {"credentials": {"username": "ingest", "password": PASSWORD + "-new"}}

    refused = client.patch(url, json=new_kafka, headers=tenant.editor | MERGE)
    body = assert_problem(refused, 422, fields={"schema_registry.credentials"})
    assert body["errors"] == [{"field": "schema_registry.credentials", "type": "value_error", "message": (
        "The schema registry's basic credentials need to be sent again (the stored ones, version 1, are gone from the "
        "secret store); send \"credentials\": null to use the registry without them")}]

    both = client.patch(url, json={**new_kafka, "schema_registry": {"credentials": {"token": TOKEN}}},
                        headers=tenant.editor | MERGE)
    assert both.status_code == 200, both.text
    assert (both.json()["schema_registry"]["auth"], both.json()["credentials_status"]) == ("bearer", "ok")
    assert _secret(app, conn["id"])["registry_credentials"] == {"token": TOKEN}


@pytest.mark.parametrize(("registry_body", "field"), [
    ({"url": "ftp://registry.example.com"}, "schema_registry.url"),
    ({"url": "registry.example.com:8081"}, "schema_registry.url"),
    ({"url": "https://"}, "schema_registry.url"),
    ({"url": "https://bad_host!:8081"}, "schema_registry.url"),
    ({"url": "https://registry.example.com:99999"}, "schema_registry.url"),
    ({"url": "https://registry.example.com/ x"}, "schema_registry.url"),
    ({"url": "https://registry.example.com/?tenant=a"}, "schema_registry.url"),
    ({"url": "https://[not-ipv6]:8081"}, "schema_registry.url"),
    ({"url": f"https://inlet:{REGISTRY_PASSWORD}@registry.example.com"}, "schema_registry.url"),
    ({"url": "https://" + "a" * 2048 + ".example.com"}, "schema_registry.url"),
    ({"url": URL, "credentials": {"username": "u", "password": REGISTRY_PASSWORD, "token": TOKEN}},
     "schema_registry.credentials"),
    ({"url": URL, "credentials": {"username": "u"}}, "schema_registry.credentials"),
    ({"url": URL, "credentials": {"token": ""}}, "schema_registry.credentials"),
    ({"url": URL, "credentials": {"user": "u", "password": REGISTRY_PASSWORD}}, "schema_registry.credentials"),
    ({"url": "http://registry.example.com", "ca_pem": CA}, "schema_registry"),
    ({"url": URL, "endpoint_identification": "off"}, "schema_registry.endpoint_identification"),
    ({"url": URL, "colour": "blue"}, "schema_registry.colour"),
    ({}, "schema_registry.url"),
])
def test_an_invalid_registry_is_422_and_never_echoed(client: TestClient, tenant: Tenant, registry_body: dict, field: str) -> None:
    created = client.post("/connections", json=connection_body(schema_registry=registry_body), headers=tenant.editor)
    body = assert_problem(created, 422)
    assert any(e["field"] == field or e["field"].startswith(field + ".") for e in body["errors"]), body["errors"]
    assert REGISTRY_PASSWORD not in created.text and TOKEN not in created.text
    conn = create_connection(client, tenant)
    patched = client.patch(f"/connections/{conn['id']}", json={"schema_registry": registry_body},
                           headers=tenant.editor | MERGE)
    assert_problem(patched, 422)
    assert REGISTRY_PASSWORD not in patched.text and TOKEN not in patched.text
    assert client.get(f"/connections/{conn['id']}", headers=tenant.viewer).json() == conn
    assert client.get("/connections", headers=tenant.viewer).json()["total"] == 1


def test_userinfo_and_both_kinds_of_credentials_say_what_to_do(client: TestClient, tenant: Tenant) -> None:
    userinfo = client.post("/connections", headers=tenant.editor, json=connection_body(
        schema_registry={"url": f"https://inlet:{REGISTRY_PASSWORD}@registry.example.com"}))
    assert assert_problem(userinfo, 422)["errors"] == [{
        "field": "schema_registry.url", "type": "value_error",
        "message": "Value error, the URL must not hold credentials (user:password@): send them as "
                   "schema_registry.credentials"}]
    both = client.post("/connections", headers=tenant.editor, json=connection_body(
        schema_registry=registry(credentials={"username": "u", "password": REGISTRY_PASSWORD, "token": TOKEN})))
    assert assert_problem(both, 422)["errors"] == [{
        "field": "schema_registry.credentials", "type": "value_error",
        "message": "Value error, give username and password (basic auth) or a token (bearer), not both"}]


@pytest.mark.parametrize(("method", "min_role"), [("POST", "editor"), ("PUT", "editor"), ("PATCH", "editor"),
                                                 ("GET", "viewer")])
def test_registry_changes_refuse_callers_and_other_tenants(client: TestClient, tenant: Tenant, other_tenant: Tenant, method: str,
                                                           min_role: str) -> None:
    conn = create_connection(client, tenant, schema_registry=registry())
    theirs = create_connection(client, other_tenant, schema_registry=registry())
    new = registry(credentials={"token": TOKEN})
    json = {"POST": connection_body(schema_registry=new), "PUT": connection_body(name=conn["name"], schema_registry=new),
            "PATCH": {"schema_registry": new}}.get(method)
    path = "/connections" if method == "POST" else f"/connections/{conn['id']}"
    assert_auth_refused(client, method, path, tenant, min_role, json)
    if method != "POST":
        for ident in (theirs["id"], str(uuid.uuid4())):
            assert_problem(client.request(method, f"/connections/{ident}", json=json, headers=tenant.editor), 404)
    assert client.get("/connections", headers=tenant.viewer).json()["items"] == [conn]
    assert client.get("/connections", headers=other_tenant.viewer).json()["items"] == [theirs]
