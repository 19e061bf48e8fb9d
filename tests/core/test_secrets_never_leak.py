"""A Kafka password, a schema registry's credentials and the API keys never show up where they must not: no response body or header,
no database row, no log line, and the local secret store keeps them encrypted in 0600 files."""

from __future__ import annotations

import logging
import stat

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text

from api.core.config import Settings
from api.models import metadata
from tests.factories import PASSWORD, Tenant, assert_problem, connection_body, pipeline_body

ROTATED = PASSWORD + "-rotated"
REGISTRY_PASSWORD = "sr-Pa55word-never-shown-5e2a"
REGISTRY_TOKEN = "sr-T0ken-never-shown-0b7c"


def _dump_database(url: str) -> str:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return "\n".join(
                repr(tuple(row)) for table in metadata.sorted_tables
                for row in conn.execute(text(f'SELECT * FROM "{table.name}"'))
            )
    finally:
        engine.dispose()


def _exercise(client: TestClient, tenant: Tenant, other_tenant: Tenant) -> list:
    """Every kind of call that touches the connection, its password or an API key."""
    r = []
    created = client.post("/connections", json=connection_body(),
                          headers={**tenant.editor, "Idempotency-Key": "leak-1"})
    r.append(created)
    conn = created.json()
    path = f"/connections/{conn['id']}"
    r.append(client.post("/connections", json=connection_body(name=conn["name"]),
                         headers={**tenant.editor, "Idempotency-Key": "leak-1"}))  # 422: other body
    r.append(client.post("/connections", json=connection_body(name=conn["name"]), headers=tenant.editor))  # 409
    r += [client.get(path, headers=tenant.viewer), client.get("/connections", headers=tenant.viewer)]
    same = connection_body(name=conn["name"])
    r.append(client.put(path, json=same, headers=tenant.editor))
    r.append(client.put(path, json=connection_body(name=conn["name"], credentials={
        "username": "ingest", "password": ROTATED}), headers=tenant.editor))
    r.append(client.patch(path, json={"credentials": {"username": "other", "password": PASSWORD}}, headers=tenant.editor))
    r.append(client.patch(path, json={"bootstrap_servers": "b.example.com:9092"}, headers=tenant.editor))
    for bad in (
        {"credentials": {"username": "u", "password": PASSWORD * 40}},              # too long
        {"credentials": {"username": "u", "password": PASSWORD, "extra": PASSWORD}},  # unknown field
        {"credentials": {"user": PASSWORD, "password": PASSWORD}},                  # wrong shape
        {"credentials": PASSWORD},
        {"credentials": {"username": "u", "password": PASSWORD}, "security_protocol": "PLAINTEXT"},
        {"credentials": {"username": "u", "password": PASSWORD}, "options": {"sasl.password": PASSWORD}},
        {"credentials": {"username": "u", "password": [PASSWORD]}},
    ):
        response = client.post("/connections", json=connection_body(**bad), headers=tenant.editor)
        assert_problem(response, 422)
        r.append(response)
        r.append(client.patch(path, json=bad, headers=tenant.editor))
    r.append(client.put(path, json=connection_body(name=conn["name"], credentials={"username": "u", "password": PASSWORD}),
                        headers={**tenant.editor, "If-Match": '"stale"'}))  # 412
    r.append(client.put(path, json=same, headers=other_tenant.editor))  # 404
    r.append(client.put(path, json=same, headers=tenant.viewer))  # 403
    r.append(client.post("/pipelines", json=pipeline_body(conn["id"], schedule={"cron": PASSWORD}),
                         headers=tenant.editor))
    r.append(client.post("/pipelines", json=pipeline_body(conn["id"], schedule={"cron": "* * * * *",
                                                                              "timezone": PASSWORD}),
                         headers=tenant.editor))
    r.append(client.post("/pipelines", json=pipeline_body(conn["id"], target={"type": "delta", "path": PASSWORD + "/$"}),
                         headers=tenant.editor))
    pipe = client.post("/pipelines", json=pipeline_body(conn["id"]), headers=tenant.editor)
    r += [pipe, client.delete(path, headers=tenant.editor)]  # 409: in use
    r.append(client.delete(f"/pipelines/{pipe.json()['id']}", headers=tenant.editor))
    r.append(client.get("/audit-events", params={"limit": 500}, headers=tenant.viewer))
    key = client.post("/api-keys", json={"name": "leak", "role": "viewer"},
                      headers={**tenant.admin, "Idempotency-Key": "key-1"})
    r += [key, client.post("/api-keys", json={"name": "leak", "role": "viewer"},
                           headers={**tenant.admin, "Idempotency-Key": "key-1"})]
    r.append(client.get("/api-keys", headers=tenant.admin))
    r.append(client.delete(path, headers=tenant.editor))  # finally deleted
    return r


def test_password_and_keys_never_leak(client: TestClient, tenant: Tenant, other_tenant: Tenant, settings: Settings,
                                      caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    responses = _exercise(client, tenant, other_tenant)
    new_key = next(r for r in responses if r.request.url.path == "/api-keys" and r.status_code == 201).json()["key"]
    api_keys = [*tenant.keys.values(), *other_tenant.keys.values(), new_key]
    secrets = [PASSWORD, *api_keys]

    for response in responses:
        assert response.status_code < 500, response.text
        seen = response.text + repr(response.headers.raw)
        assert PASSWORD not in seen, f"{response.request.method} {response.request.url} echoed the password"
        for key in api_keys:
            if key == new_key and response.status_code == 201 and response.json().get("key") == new_key:
                continue  # the one response that issues the key shows it
            assert key not in seen, f"{response.request.method} {response.request.url} showed an API key"

    database = _dump_database(settings.resolved_database_url)
    assert tenant.id.replace("-", "") in database.replace("-", "")  # the dump did read rows
    for secret in secrets:
        assert secret not in database

    logs = "\n".join(f"{r.name} {r.getMessage()} {r.exc_text or ''}" for r in caplog.records)
    assert caplog.records, "nothing was logged at all: the capture is not working"
    for secret in secrets:
        assert secret not in logs


def test_local_secret_store_is_encrypted_and_private(client: TestClient, tenant: Tenant, settings: Settings) -> None:
    created = client.post("/connections", json=connection_body(), headers=tenant.editor)
    assert created.status_code == 201
    client.put(f"/connections/{created.json()['id']}", headers=tenant.editor, json=connection_body(
        name=created.json()["name"], credentials={"username": "ingest", "password": ROTATED}))
    files = sorted((settings.data_dir / "secrets").glob("*.secret"))
    assert len(files) == 1
    key_file = settings.resolved_secret_key_file
    for path in (*files, key_file):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    for path in files:
        raw = path.read_bytes()
        assert PASSWORD.encode() not in raw and b"ingest" not in raw and str(tenant.id).encode() not in raw
    assert stat.S_IMODE((settings.data_dir / "secrets").stat().st_mode) == 0o700


def test_a_password_pasted_into_bootstrap_servers_is_not_echoed(client: TestClient, tenant: Tenant) -> None:
    response = client.post("/connections", json=connection_body(bootstrap_servers=PASSWORD), headers=tenant.editor)
    assert_problem(response, 422, fields={"bootstrap_servers"})
    assert PASSWORD not in response.text


def test_schema_registry_credentials_never_leak(client: TestClient, tenant: Tenant, other_tenant: Tenant, settings: Settings,
                                                caplog: pytest.LogCaptureFixture) -> None:
    """The registry's password and token: not in any response (a 422 of any shape included), not in
    the database or the audit log, not in a log line."""
    caplog.set_level(logging.DEBUG)
    basic = {"url": "https://registry.example.com", "credentials": {"username": "sr", "password": REGISTRY_PASSWORD}}
    token = {"url": "https://registry.example.com", "credentials": {"token": REGISTRY_TOKEN}}
    r = []
    created = client.post("/connections", json=connection_body(schema_registry=basic), headers=tenant.editor)
    r.append(created)
    path = f"/connections/{created.json()['id']}"
    r.append(client.patch(path, json={"schema_registry": token}, headers=tenant.editor))
    r.append(client.put(path, json=connection_body(name=created.json()["name"], schema_registry=basic), headers=tenant.editor))
    for bad in (
        {"url": f"https://sr:{REGISTRY_PASSWORD}@registry.example.com"},
        {"url": f"https://registry.example.com/?token={REGISTRY_TOKEN}"},
        {"url": "https://registry.example.com", "credentials": {"username": "sr", "password": REGISTRY_PASSWORD,
                                                                "token": REGISTRY_TOKEN}},
        {"url": "https://registry.example.com", "credentials": {"token": REGISTRY_TOKEN * 400}},
        {"url": "https://registry.example.com", "credentials": {"password": REGISTRY_PASSWORD}},
        {"url": "https://registry.example.com", "credentials": REGISTRY_TOKEN},
        {"url": REGISTRY_PASSWORD},
    ):
        refused = client.post("/connections", json=connection_body(schema_registry=bad), headers=tenant.editor)
        assert_problem(refused, 422)
        r += [refused, client.patch(path, json={"schema_registry": bad}, headers=tenant.editor)]
    r.append(client.patch(path, json={"schema_registry": token}, headers=other_tenant.editor))  # 404
    r.append(client.post(f"{path}/test", headers=tenant.editor))  # example.com: the cluster fails first
    r.append(client.post("/connections:test", json=connection_body(bootstrap_servers="127.0.0.1:1",
                                                                    schema_registry=token), headers=tenant.editor))
    r += [client.get(path, headers=tenant.viewer), client.get("/connections", headers=tenant.viewer),
          client.get("/audit-events", params={"limit": 500}, headers=tenant.viewer)]
    r.append(client.delete(path, headers=tenant.editor))

    assert [x.status_code for x in r[:3]] == [201, 200, 200]
    assert [x.status_code for x in r[-7:]] == [404, 502, 502, 200, 200, 200, 204]
    database = _dump_database(settings.resolved_database_url)
    assert "registry.example.com" in database  # the dump did read the registry's public part (in the audit log)
    logs = "\n".join(f"{x.name} {x.getMessage()} {x.exc_text or ''}" for x in caplog.records)
    for secret in (REGISTRY_PASSWORD, REGISTRY_TOKEN):
        for response in r:
            assert response.status_code != 500, response.text
            assert secret not in response.text + repr(response.headers.raw), response.request.url
        assert secret not in database and secret not in logs
