"""Connections with their credentials in a real Vault (OpenBao, tests/fixtures/vault.py), through the
HTTP API: layout, rotation, deletion, namespaces, tenant isolation, lost secret versions, and what
happens when Vault is down, sealed, failing or refuses Inlet (nothing changes)."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr
from sqlalchemy import event, select
from sqlmodel import Session

from api.connections.client_configs import client_config, registry_config
from api.connections.models import Connection
from api.core.config import Settings
from api.main import create_app
from api.models import metadata
from tests.factories import PASSWORD, connection_body, create_connection
from tests.fixtures.openbao import bao_version
from tests.fixtures.vault import TestVault, vault_backed

ROTATED = "r0tated-" + PASSWORD


@pytest.fixture
def settings(settings: Settings, vault: TestVault) -> Settings:
    """Every app of this module keeps its secrets in Vault."""
    return vault_backed(settings, vault)


def _path(tenant_id: str, connection_id: str) -> str:
    return f"tenants/{tenant_id}/connections/{connection_id}"


def _creds(password: str = PASSWORD) -> dict[str, Any]:
    return {"credentials": {"username": "ingest", "password": password}}


def _row(app: Any, connection_id: str) -> Connection | None:
    with Session(app.state.engine) as session:
        return session.get(Connection, uuid.UUID(connection_id))


@contextmanager
def _client_of(settings: Any) -> Iterator[TestClient]:
    """Another app on the same database, with other Vault settings."""
    other = create_app(settings)
    try:
        with TestClient(other, raise_server_exceptions=False) as client:
            yield client
    finally:
        other.state.engine.dispose()


def _unavailable(vault: TestVault, instance: str, detail: str) -> dict[str, Any]:
    return {"type": "https://inlet.dev/problems/secret-backend-unavailable", "title": "The secret backend is unavailable",
            "status": 503, "detail": detail, "instance": instance}


def test_create_writes_the_secret_at_the_tenant_path(client, app, tenant, vault) -> None:
    created = client.post("/connections", json=connection_body(name="orders"), headers=tenant.editor)
    assert created.status_code == 201, created.text
    body = created.json()
    assert body == {
        "id": body["id"], "name": "orders", "bootstrap_servers": "broker-1.example.com:9092,broker-2.example.com:9092",
        "security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512", "ssl": None, "schema_registry": None,
        "options": {"client.id": "inlet-tests"}, "has_credentials": True, "credentials_version": 1,
        "credentials_status": "ok", "created_at": body["created_at"], "updated_at": body["updated_at"],
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


def test_registry_credentials_live_beside_the_clusters_and_rotate_with_them(client, app, tenant, vault) -> None:
    registry = {"url": "https://registry.example.com", "credentials": {"username": "sr", "password": ROTATED}}
    conn = create_connection(client, tenant, schema_registry=registry)
    path = _path(tenant.id, conn["id"])
    assert vault.paths() == [path]
    assert vault.read(path) == _creds() | {"registry_credentials": {"username": "sr", "password": ROTATED}}

    merge = tenant.editor | {"Content-Type": "application/merge-patch+json"}
    rotated = client.patch(f"/connections/{conn['id']}", json={"schema_registry": {"credentials": {"token": PASSWORD}}},
                           headers=merge)
    assert rotated.status_code == 200, rotated.text
    assert (rotated.json()["credentials_version"], rotated.json()["schema_registry"]["auth"]) == (2, "bearer")
    assert vault.read(path) == _creds() | {"registry_credentials": {"token": PASSWORD}}
    assert vault.read(path, 1)["registry_credentials"] == registry["credentials"]
    planned = registry_config(_row(app, conn["id"]), app.state.secrets, version=1)
    assert planned is not None and (planned.username, planned.password, planned.token) == ("sr", ROTATED, None)

    removed = client.patch(f"/connections/{conn['id']}", json={"schema_registry": None}, headers=merge)
    assert (removed.json()["credentials_version"], removed.json()["schema_registry"]) == (3, None)
    assert vault.read(path) == _creds()


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
def test_create_while_vault_fails_is_503_and_changes_nothing(client, settings, tenant, vault, vault_proxy, fault) -> None:
    addr = vault_proxy.addr if fault == "server-error" else vault.addr  # the proxy only for what a server cannot do
    detail = {
        "stopped": f"Vault at {addr} is unreachable (connection failed); retry later",
        "sealed": f"Vault at {addr} is sealed or unavailable (503); retry later",
        "server-error": f"Vault at {addr} answered 500 (internal error) to a write request",
    }[fault]
    if fault == "stopped":
        vault.server.stop()
    elif fault == "sealed":
        vault.server.seal()
    else:
        vault_proxy.fail_next("POST", r"/v1/secret/data/")

    with _client_of(settings.model_copy(update={"vault_addr": addr})) as api:
        response = api.post("/connections", json=connection_body(), headers=tenant.editor)

    assert response.status_code == 503
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json() == _unavailable(vault, "/connections", detail)
    assert client.get("/connections", headers=tenant.viewer).json() == {"items": [], "total": 0, "limit": 50, "offset": 0}
    if fault == "stopped":
        vault.server.start()
    elif fault == "sealed":
        vault.server.unseal()
    assert vault.paths() == []


def test_bad_token_is_a_clear_503_and_changes_nothing(client, settings, tenant, vault) -> None:
    with _client_of(settings.model_copy(update={"vault_token": SecretStr("hvs.revoked-token")})) as other:
        response = other.post("/connections", json=connection_body(), headers=tenant.editor)
    assert response.status_code == 503
    assert response.json() == {
        "type": "https://inlet.dev/problems/secret-backend-refused",
        "title": "The secret backend refused Inlet's credentials", "status": 503,
        "detail": "Vault refused Inlet's token (INLET_VAULT_TOKEN) for a secret write: permission denied. "
                  "An operator must renew the token or fix the Vault policy (see deploy/vault/inlet-policy.hcl).",
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
    conn = create_connection(client, tenant)
    url = f"/connections/{conn['id']}"
    vault.server.stop()
    detail = f"Vault at {vault.addr} is unreachable (connection failed); retry later"

    rotated = client.patch(url, json={"credentials": {"username": "x", "password": ROTATED}},
                           headers=tenant.editor | {"Content-Type": "application/merge-patch+json"})
    assert (rotated.status_code, rotated.json()) == (503, _unavailable(vault, url, detail))

    deleted = client.delete(url, headers=tenant.editor)
    assert deleted.status_code == 503
    assert deleted.json() == _unavailable(
        vault, url, "The vault secret backend is unavailable; nothing was changed, retry later")

    # Reads do not need Vault: the connection is shown, its credentials' state unknown.
    assert client.get(url, headers=tenant.viewer).json() == conn | {"credentials_status": "unknown"}
    assert client.get("/connections", headers=tenant.viewer).json()["items"] == [conn | {"credentials_status": "unknown"}]
    row = _row(app, conn["id"])
    assert (row.secret_path, row.credentials_version, row.revision) == (_path(tenant.id, conn["id"]), 1, 1)


def test_a_vault_that_lost_its_data_shows_missing_credentials_and_takes_new_ones(client, tenant, vault) -> None:
    """A dev server restarts empty, as a Vault restored from nothing would: no dead end for the user."""
    conn = create_connection(client, tenant)
    url = f"/connections/{conn['id']}"
    etag = client.get(url, headers=tenant.viewer).headers["ETag"]
    vault.server.restart()
    assert vault.paths() == []
    assert client.get(url, headers=tenant.viewer).json()["credentials_status"] == "missing"

    put = client.put(url, json=connection_body(name=conn["name"], credentials={"username": "ingest", "password": ROTATED}),
                     headers=tenant.editor)
    assert put.status_code == 200, put.text
    assert (put.json()["credentials_version"], put.json()["credentials_status"]) == (1, "ok")  # KV starts again at 1
    assert vault.read(_path(tenant.id, conn["id"])) == _creds(ROTATED)
    # Same version number as before, yet new credentials: a new revision and an audit event.
    assert put.headers["ETag"] != etag
    events = client.get("/audit-events", params={"resource_id": conn["id"]}, headers=tenant.admin).json()["items"]
    assert sorted(e["action"] for e in events) == ["create", "update"]


def test_a_lost_secret_version_is_no_dead_end(client, tenant, vault) -> None:
    conn = create_connection(client, tenant)
    url = f"/connections/{conn['id']}"
    path = _path(tenant.id, conn["id"])
    merge = tenant.editor | {"Content-Type": "application/merge-patch+json"}
    vault.server.client().secrets.kv.v2.destroy_secret_versions(path=vault.full(path), versions=[1], mount_point="secret")

    shown = client.get(url, headers=tenant.viewer)
    assert shown.json() == conn | {"credentials_status": "missing"}
    assert client.get("/connections", headers=tenant.viewer).json()["items"] == [conn | {"credentials_status": "missing"}]

    tested = client.post(f"{url}/test", headers=tenant.editor)
    assert tested.status_code == 409
    assert tested.json() == {
        "type": "https://inlet.dev/problems/credentials-missing", "title": "The connection's stored credentials are missing",
        "status": 409, "instance": f"{url}/test", "connection_id": conn["id"],
        "detail": f"Connection {conn['id']}: version 1 of its credentials is gone from the secret store ({path}); "
                  "send new credentials with PUT or PATCH",
    }

    # A change that leaves the credentials alone still works; one that needs them says why they must be sent.
    renamed = client.patch(url, json={"options": {"client.id": "renamed"}}, headers=merge)
    assert renamed.status_code == 200 and renamed.json()["credentials_status"] == "missing"
    kept = client.put(url, json={k: v for k, v in connection_body(name=conn["name"]).items() if k != "credentials"},
                      headers=tenant.editor)  # omitted write-only fields keep what is stored: here, nothing
    assert kept.status_code == 200 and kept.json()["credentials_status"] == "missing"
    new_key = connection_body(name=conn["name"], ssl={"certificate_pem": "CERT", "key_pem": "KEY"})
    del new_key["credentials"]
    without = client.put(url, json=new_key, headers=tenant.editor)  # changes the secret, so it must be whole
    assert without.status_code == 422
    assert without.json()["errors"] == [{"field": "credentials", "message": (
        "sasl_mechanism SCRAM-SHA-512 needs credentials (the stored ones, version 1, are gone from the secret store)"),
        "type": "value_error"}]

    patched = client.patch(url, json={"credentials": {"username": "ingest", "password": ROTATED}}, headers=merge)
    assert patched.status_code == 200, patched.text
    assert (patched.json()["credentials_version"], patched.json()["credentials_status"]) == (2, "ok")
    assert vault.read(path) == _creds(ROTATED)
    assert client.post(f"{url}/test", headers=tenant.editor).json()["type"] != tested.json()["type"]

    # Removing lost credentials works too, and leaves nothing behind.
    vault.server.client().secrets.kv.v2.destroy_secret_versions(path=vault.full(path), versions=[2], mount_point="secret")
    plain = {"name": conn["name"], "bootstrap_servers": "broker-1.example.com:9092", "security_protocol": "SSL",
             "credentials": None}
    removed = client.put(url, json=plain, headers=tenant.editor)
    assert removed.status_code == 200, removed.text
    assert (removed.json()["has_credentials"], removed.json()["credentials_status"]) == (False, None)
    assert vault.paths() == []


def test_every_change_works_inside_a_namespace(client, settings, tenant, vault) -> None:
    """HCP Vault and Vault Enterprise always use namespaces: readiness, rotation, removal and delete there."""
    vault.server.create_namespace("team-a")
    vault.namespace = "team-a"
    role_id, secret_id = vault.approle_for_inlet()
    namespaced = vault_backed(settings, vault, vault_token=None, vault_role_id=role_id,
                              vault_secret_id=SecretStr(secret_id))
    with _client_of(namespaced) as api:
        ready = api.get("/readyz").json()["checks"]["secrets"]
        assert ready == {"backend": "vault", "address": vault.addr, "namespace": "team-a",
                         "version": bao_version().removeprefix("OpenBao v"), "status": "ok"}
        conn = create_connection(api, tenant)
        url = f"/connections/{conn['id']}"
        path = _path(tenant.id, conn["id"])
        assert vault.read(path) == _creds()
        assert TestVault(vault.server).paths() == []  # nothing in the root namespace

        rotated = api.put(url, json=connection_body(name=conn["name"], credentials={"username": "ingest", "password": ROTATED}),
                          headers=tenant.editor)
        assert (rotated.status_code, rotated.json()["credentials_version"]) == (200, 2)
        plain = {"name": conn["name"], "bootstrap_servers": "broker-1.example.com:9092", "security_protocol": "SSL",
                 "credentials": None}
        removed = api.put(url, json=plain, headers=tenant.editor)
        assert (removed.status_code, removed.json()["has_credentials"]) == (200, False)
        assert vault.paths() == []

        second = create_connection(api, tenant, name="second")
        assert vault.paths() == [_path(tenant.id, second["id"])]
        assert api.delete(url, headers=tenant.editor).status_code == 204
        assert api.delete(f"/connections/{second['id']}", headers=tenant.editor).status_code == 204
        assert vault.paths() == []


def test_readyz_reports_the_vault_state(client, vault) -> None:
    version = bao_version().removeprefix("OpenBao v")
    ready = client.get("/readyz").json()
    assert ready["checks"]["secrets"] == {"backend": "vault", "address": vault.addr, "version": version, "status": "ok"}
    vault.server.seal()
    sealed = client.get("/readyz")
    assert sealed.status_code == 503 and sealed.json()["status"] == "unavailable"
    assert sealed.json()["checks"]["secrets"] == {"backend": "vault", "address": vault.addr, "version": version,
                                                  "status": "sealed", "detail": "Vault is sealed"}
    vault.server.stop()
    assert client.get("/readyz").json()["checks"]["secrets"] == {
        "backend": "vault", "address": vault.addr, "status": "unavailable", "detail": "is unreachable (connection failed)"}


def test_readyz_says_refused_when_the_approle_login_is(client, settings, vault) -> None:
    role_id, secret_id = vault.approle_for_inlet(secret_id_ttl="2s")
    with _client_of(vault_backed(settings, vault, vault_token=None, vault_role_id=role_id,
                                 vault_secret_id=SecretStr(secret_id))) as api:
        assert api.get("/readyz").json()["checks"]["secrets"]["status"] == "ok"  # logged in while it was valid
        vault.server.client().auth.token.revoke(api.app.state.secrets._client.token)
        time.sleep(2.2)  # the secret id expires: the next login is refused
        ready = api.get("/readyz")
    assert ready.status_code == 503
    assert ready.json()["checks"]["secrets"] == {
        "backend": "vault", "address": vault.addr, "version": bao_version().removeprefix("OpenBao v"), "status": "refused",
        "detail": "Vault refused Inlet's AppRole login at auth/approle (INLET_VAULT_ROLE_ID / INLET_VAULT_SECRET_ID): "
                  "the role id or secret id is wrong, or the secret id has expired or been used up. "
                  "An operator must issue a new secret id or fix the role.",
    }
    assert secret_id not in ready.text


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
    vault.server.stop()
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
