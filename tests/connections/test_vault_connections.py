"""Connections with their credentials in Vault, through the HTTP API: layout, rotation, deletion,
tenant isolation, and what happens when Vault is down, sealed or refuses Inlet (nothing changes)."""

from __future__ import annotations

import logging
import uuid
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr
from sqlalchemy import event, select
from sqlmodel import Session

from api.connections.models import Connection
from api.connections.service import client_config
from api.main import create_app
from api.models import metadata
from tests.factories import PASSWORD, connection_body, create_connection
from tests.fixtures.vault import TestVault, vault_backed

ROTATED = "r0tated-" + PASSWORD


@pytest.fixture
def settings(settings, vault):  # type: ignore[no-untyped-def]
    """Every app of this module keeps its secrets in Vault."""
    return vault_backed(settings, vault)


def _path(tenant_id: str, connection_id: str) -> str:
    return f"tenants/{tenant_id}/connections/{connection_id}"


def _creds(password: str = PASSWORD) -> dict[str, Any]:
    return {"credentials": {"username": "ingest", "password": password}}


def _row(app: Any, connection_id: str) -> Connection | None:
    with Session(app.state.engine) as session:
        return session.get(Connection, uuid.UUID(connection_id))


def _unavailable(vault: TestVault, instance: str, detail: str) -> dict[str, Any]:
    return {"type": "https://inlet.dev/problems/secret-backend-unavailable", "title": "The secret backend is unavailable",
            "status": 503, "detail": detail, "instance": instance}


def test_create_writes_the_secret_at_the_tenant_path(client, app, tenant, vault) -> None:
    created = client.post("/connections", json=connection_body(name="orders"), headers=tenant.editor)
    assert created.status_code == 201, created.text
    body = created.json()
    assert body == {
        "id": body["id"], "name": "orders", "bootstrap_servers": "broker-1.example.com:9092,broker-2.example.com:9092",
        "security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512", "ssl": None,
        "options": {"client.id": "inlet-tests"}, "has_credentials": True, "credentials_version": 1,
        "created_at": body["created_at"], "updated_at": body["updated_at"],
    }
    path = _path(tenant.id, body["id"])
    assert vault.paths() == [path]
    assert vault.read(path) == _creds()
    row = _row(app, body["id"])
    assert (row.secret_path, row.credentials_version) == (path, 1)


def test_rotation_moves_the_version_and_keeps_the_planned_one_readable(client, app, tenant, vault) -> None:
    conn = create_connection(client, tenant)
    path = _path(tenant.id, conn["id"])
    etag = client.get(f"/connections/{conn['id']}", headers=tenant.viewer).headers["ETag"]

    put_body = connection_body(name=conn["name"], credentials={"username": "ingest", "password": ROTATED})
    replaced = client.put(f"/connections/{conn['id']}", json=put_body, headers=tenant.editor | {"If-Match": etag})
    assert replaced.status_code == 200, replaced.text
    assert (replaced.json()["credentials_version"], replaced.json()["has_credentials"]) == (2, True)
    assert vault.read(path) == _creds(ROTATED)
    assert vault.read(path, 1) == _creds()

    # Identical credentials: no new version, no new revision.
    same = client.put(f"/connections/{conn['id']}", json=put_body, headers=tenant.editor)
    assert same.status_code == 200 and same.json()["credentials_version"] == 2
    assert same.headers["ETag"] == replaced.headers["ETag"]
    assert vault.metadata(path)["current_version"] == 2

    # PATCH of a public field leaves the secret alone; PATCH of credentials rotates.
    renamed = client.patch(f"/connections/{conn['id']}", json={"options": {"client.id": "renamed"}},
                           headers=tenant.editor | {"Content-Type": "application/merge-patch+json"})
    assert renamed.status_code == 200 and renamed.json()["credentials_version"] == 2
    patched = client.patch(f"/connections/{conn['id']}", json={"credentials": {"username": "other", "password": PASSWORD}},
                           headers=tenant.editor | {"Content-Type": "application/merge-patch+json"})
    assert patched.status_code == 200 and patched.json()["credentials_version"] == 3
    assert vault.read(path) == {"credentials": {"username": "other", "password": PASSWORD}}
    assert vault.metadata(path)["current_version"] == 3

    # A run planned before the rotations keeps reading its own version; new ones read the newest.
    row = _row(app, conn["id"])
    planned = client_config(row, app.state.secrets, version=1)
    assert dict(planned.credentials) == _creds()["credentials"]
    assert dict(client_config(row, app.state.secrets).credentials) == {"username": "other", "password": PASSWORD}


def test_removing_credentials_destroys_the_secret_after_commit(client, app, tenant, vault) -> None:
    conn = create_connection(client, tenant)
    path = _path(tenant.id, conn["id"])
    plain = {"name": conn["name"], "bootstrap_servers": "broker-1.example.com:9092", "security_protocol": "SSL",
             "credentials": None}
    replaced = client.put(f"/connections/{conn['id']}", json=plain, headers=tenant.editor)
    assert replaced.status_code == 200, replaced.text
    assert (replaced.json()["has_credentials"], replaced.json()["credentials_version"]) == (False, None)
    assert vault.metadata(path) is None
    assert (_row(app, conn["id"]).secret_path, _row(app, conn["id"]).credentials_version) == (None, None)


def test_delete_destroys_every_version(client, tenant, vault) -> None:
    conn = create_connection(client, tenant)
    path = _path(tenant.id, conn["id"])
    client.patch(f"/connections/{conn['id']}", json={"credentials": {"username": "ingest", "password": ROTATED}},
                 headers=tenant.editor | {"Content-Type": "application/merge-patch+json"})
    assert vault.metadata(path)["current_version"] == 2
    deleted = client.delete(f"/connections/{conn['id']}", headers=tenant.editor)
    assert deleted.status_code == 204
    assert vault.metadata(path) is None and vault.paths() == []
    assert client.get(f"/connections/{conn['id']}", headers=tenant.viewer).status_code == 404


@pytest.mark.parametrize("fault", ["stopped", "sealed", "server-error"])
def test_create_while_vault_fails_is_503_and_changes_nothing(client, tenant, vault, fault) -> None:
    standin = vault.require_standin(f"make Vault {fault}")
    detail = {
        "stopped": f"Vault at {vault.addr} is unreachable (connection failed); retry later",
        "sealed": f"Vault at {vault.addr} is sealed or unavailable (503); retry later",
        "server-error": f"Vault at {vault.addr} answered 500 (internal error) to a write request",
    }[fault]
    if fault == "stopped":
        standin.stop()
    elif fault == "sealed":
        standin.seal()
    else:
        standin.fail_next("POST", r"/data/")

    response = client.post("/connections", json=connection_body(), headers=tenant.editor)

    assert response.status_code == 503
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json() == _unavailable(vault, "/connections", detail)
    assert client.get("/connections", headers=tenant.viewer).json() == {"items": [], "total": 0, "limit": 50, "offset": 0}
    standin.start()
    standin.unseal()
    assert vault.paths() == []


def test_bad_token_is_a_clear_503_and_changes_nothing(client, settings, tenant, vault) -> None:
    refused = create_app(settings.model_copy(update={"vault_token": SecretStr("hvs.revoked-token")}))
    try:
        with TestClient(refused, raise_server_exceptions=False) as other:
            response = other.post("/connections", json=connection_body(), headers=tenant.editor)
    finally:
        refused.state.engine.dispose()
    assert response.status_code == 503
    assert response.json() == {
        "type": "https://inlet.dev/problems/secret-backend-refused",
        "title": "The secret backend refused Inlet's credentials", "status": 503,
        "detail": "Vault refused Inlet's token (INLET_VAULT_TOKEN) for a secret write: permission denied. "
                  "An operator must renew the token or fix the Vault policy.",
        "instance": "/connections",
    }
    assert "hvs.revoked-token" not in response.text
    assert client.get("/connections", headers=tenant.viewer).json()["total"] == 0
    assert vault.paths() == []


def test_failed_commit_after_the_secret_write_destroys_the_secret(client, tenant, vault) -> None:
    seen: list[str] = []

    def fail_commit(session: Session) -> None:
        # The secret is in Vault by now (written before the commit); the commit then fails.
        seen.extend(vault.paths())
        raise RuntimeError("simulated commit failure")

    event.listen(Session, "before_commit", fail_commit)
    try:
        response = client.post("/connections", json=connection_body(), headers=tenant.editor)
    finally:
        event.remove(Session, "before_commit", fail_commit)

    assert response.status_code == 500
    assert response.json()["type"] == "https://inlet.dev/problems/internal-error"
    assert len(seen) == 1 and seen[0].startswith(f"tenants/{tenant.id}/connections/")
    assert vault.paths() == []  # compensated
    assert client.get("/connections", headers=tenant.viewer).json()["total"] == 0


def test_rotation_and_delete_while_vault_is_down_change_nothing(client, app, tenant, vault) -> None:
    standin = vault.require_standin("stop Vault")
    conn = create_connection(client, tenant)
    path = _path(tenant.id, conn["id"])
    standin.stop()
    detail = f"Vault at {vault.addr} is unreachable (connection failed); retry later"

    rotated = client.patch(f"/connections/{conn['id']}", json={"credentials": {"username": "x", "password": ROTATED}},
                           headers=tenant.editor | {"Content-Type": "application/merge-patch+json"})
    assert (rotated.status_code, rotated.json()) == (503, _unavailable(vault, f"/connections/{conn['id']}", detail))

    deleted = client.delete(f"/connections/{conn['id']}", headers=tenant.editor)
    assert deleted.status_code == 503
    assert deleted.json() == _unavailable(
        vault, f"/connections/{conn['id']}", "The vault secret backend is unavailable; nothing was changed, retry later")

    standin.start()
    assert client.get(f"/connections/{conn['id']}", headers=tenant.viewer).json() == conn
    assert vault.metadata(path)["current_version"] == 1 and vault.read(path) == _creds()


def test_readyz_reports_the_vault_state(client, vault) -> None:
    standin = vault.require_standin("seal Vault")
    ready = client.get("/readyz").json()
    assert ready["checks"]["secrets"] == {"backend": "vault", "address": vault.addr, "version": "1.17.0", "status": "ok"}
    standin.seal()
    sealed = client.get("/readyz")
    assert sealed.status_code == 503 and sealed.json()["status"] == "unavailable"
    assert sealed.json()["checks"]["secrets"] == {"backend": "vault", "address": vault.addr, "version": "1.17.0",
                                                  "status": "sealed", "detail": "Vault is sealed"}
    standin.stop()
    assert client.get("/readyz").json()["checks"]["secrets"] == {
        "backend": "vault", "address": vault.addr, "status": "unavailable", "detail": "is unreachable (connection failed)"}


def test_another_tenant_cannot_reach_the_secret_through_any_route(client, tenant, other_tenant, vault) -> None:
    conn = create_connection(client, tenant)
    path = _path(tenant.id, conn["id"])
    url = f"/connections/{conn['id']}"
    merge = {"Content-Type": "application/merge-patch+json"}
    attempts = [
        client.get(url, headers=other_tenant.viewer),
        client.put(url, json=connection_body(credentials={"username": "x", "password": ROTATED}), headers=other_tenant.editor),
        client.patch(url, json={"credentials": {"username": "x", "password": ROTATED}}, headers=other_tenant.editor | merge),
        client.post(f"{url}/test", headers=other_tenant.editor),
        client.delete(url, headers=other_tenant.admin),
    ]
    for response in attempts:
        assert response.status_code == 404, response.text
        assert response.json() == {"type": "https://inlet.dev/problems/not-found", "title": "Not found", "status": 404,
                                   "detail": f"Connection {conn['id']} does not exist", "instance": response.json()["instance"]}
        assert response.json()["instance"] in (url, f"{url}/test")
    assert client.get("/connections", headers=other_tenant.viewer).json()["total"] == 0
    assert vault.metadata(path)["current_version"] == 1 and vault.read(path) == _creds()
    assert vault.paths() == [path]


def test_the_password_is_never_in_the_database_a_response_or_a_log(client, app, settings, tenant, vault, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    responses = []
    conn = create_connection(client, tenant)
    url = f"/connections/{conn['id']}"
    merge = tenant.editor | {"Content-Type": "application/merge-patch+json"}
    responses.append(client.patch(url, json={"credentials": {"username": "ingest", "password": ROTATED}}, headers=merge))
    responses.append(client.get(url, headers=tenant.viewer))
    responses.append(client.get("/connections", headers=tenant.viewer))
    responses.append(client.get("/audit-events", headers=tenant.admin))
    responses.append(client.post("/connections", json=connection_body(name=conn["name"]), headers=tenant.editor))  # 409
    responses.append(client.post("/connections", json=connection_body(bootstrap_servers="bad"), headers=tenant.editor))  # 422
    responses.append(client.post(f"{url}/test", headers=tenant.editor))  # fails: example.com brokers
    vault.require_standin("stop Vault").stop()
    responses.append(client.patch(url, json={"credentials": {"username": "ingest", "password": PASSWORD}}, headers=merge))
    assert [r.status_code for r in responses[:6]] == [200, 200, 200, 200, 409, 422]
    assert responses[-1].status_code == 503

    for secret in (PASSWORD, ROTATED):
        for response in responses:
            assert secret not in response.text
            assert secret not in str(response.headers)
        assert secret not in caplog.text
        with Session(app.state.engine) as session:
            for table in metadata.sorted_tables:
                assert secret not in str(session.execute(select(table)).all()), table.name
        if settings.resolved_database_url.startswith("sqlite"):
            db_file = Path(settings.resolved_database_url.removeprefix("sqlite:///"))
            for part in db_file.parent.glob(db_file.name + "*"):  # the database, its WAL and shm files
                assert secret.encode() not in part.read_bytes(), part.name
