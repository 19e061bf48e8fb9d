"""``VaultSecretStore`` over HTTP against the Vault stand-in (or a real Vault, see tests/fixtures/vault.py)."""

from __future__ import annotations

import logging
import uuid

import pytest

from api.secrets.store import SecretBackendRefused, SecretBackendUnavailable, SecretNotFound, build_secret_store
from api.secrets.vault import VaultSecretStore
from tests.factories import PASSWORD
from tests.fixtures.vault import TestVault, vault_backed

PATH = f"tenants/{uuid.uuid4()}/connections/{uuid.uuid4()}"
CREDS = {"credentials": {"username": "ingest", "password": PASSWORD}}


def _store(vault: TestVault, **kwargs: object) -> VaultSecretStore:
    options = {"addr": vault.addr, "token": vault.token, "prefix": vault.prefix, "timeout_s": 2.0} | kwargs
    return VaultSecretStore(**options)  # type: ignore[arg-type]


def test_built_from_settings(settings, vault) -> None:
    store = build_secret_store(vault_backed(settings, vault))
    assert isinstance(store, VaultSecretStore)
    assert (store.backend, store.addr, store.mount, store.prefix, store.timeout_s) == (
        "vault", vault.addr, "secret", vault.prefix, 2.0)


def test_write_read_versions_and_destroy(vault) -> None:
    store = _store(vault)
    assert store.write(PATH, CREDS) == 1
    rotated = {"credentials": {"username": "ingest", "password": "rotated-" + PASSWORD}}
    assert store.write(PATH, rotated) == 2

    assert vault.read(PATH) == rotated  # at <mount>/data/<prefix>/<path>
    assert vault.read(PATH, 1) == CREDS
    assert store.read(PATH) == rotated
    assert store.read(PATH, 2) == rotated
    assert store.read(PATH, 1) == CREDS  # a run planned before the rotation keeps its version
    metadata = vault.metadata(PATH)
    assert metadata is not None
    assert (metadata["current_version"], metadata["oldest_version"], sorted(metadata["versions"])) == (2, 1, ["1", "2"])

    with pytest.raises(SecretNotFound) as missing:
        store.read(PATH, 3)
    assert (missing.value.status, missing.value.detail) == (404, f"Secret {PATH} version 3 does not exist")

    store.destroy(PATH)
    assert vault.metadata(PATH) is None
    with pytest.raises(SecretNotFound):
        store.read(PATH)
    store.destroy(PATH)  # destroying a missing secret is not an error


def test_paths_that_could_leave_the_prefix_are_refused(vault) -> None:
    store = _store(vault)
    for bad in ("", "../other", "tenants//x", "tenants/a/../../b", "/abs"):
        with pytest.raises(ValueError):
            store.write(bad, CREDS)
    assert vault.paths() == []


def test_health_reports_ok_with_version(vault) -> None:
    report = _store(vault).health()
    assert report["status"] == "ok" and report["backend"] == "vault" and report["address"] == vault.addr
    assert isinstance(report.get("version"), str)


def test_sealed_vault_is_unavailable_and_health_says_sealed(vault) -> None:
    standin = vault.require_standin("seal it")
    store = _store(vault)
    standin.seal()
    assert store.health() == {"backend": "vault", "address": vault.addr, "version": "1.17.0", "status": "sealed",
                              "detail": "Vault is sealed"}
    with pytest.raises(SecretBackendUnavailable) as caught:
        store.write(PATH, CREDS)
    assert caught.value.status == 503
    assert caught.value.detail == f"Vault at {vault.addr} is sealed or unavailable (503); retry later"
    standin.unseal()
    assert vault.paths() == []


def test_stopped_vault_is_unavailable(vault) -> None:
    standin = vault.require_standin("stop it")
    store = _store(vault)
    store.write(PATH, CREDS)
    standin.stop()
    assert store.health() == {"backend": "vault", "address": vault.addr, "status": "unavailable",
                              "detail": "is unreachable (connection failed)"}
    with pytest.raises(SecretBackendUnavailable) as caught:
        store.read(PATH)
    assert caught.value.detail == f"Vault at {vault.addr} is unreachable (connection failed); retry later"


def test_server_error_is_unavailable(vault) -> None:
    standin = vault.require_standin("fail a request")
    standin.fail_next("POST", r"/data/", status=500)
    with pytest.raises(SecretBackendUnavailable) as caught:
        _store(vault).write(PATH, CREDS)
    assert caught.value.detail == f"Vault at {vault.addr} answered 500 (internal error) to a write request"


def test_bad_token_is_refused_clearly(vault, caplog) -> None:
    store = _store(vault, token="hvs.not-a-valid-token")
    assert store.health() == {"backend": "vault", "address": vault.addr, "version": store.health()["version"],
                              "status": "refused", "detail": "Vault refused Inlet's token"}
    with caplog.at_level(logging.DEBUG), pytest.raises(SecretBackendRefused) as caught:
        store.write(PATH, CREDS)
    assert (caught.value.status, caught.value.code) == (503, "secret-backend-refused")
    assert caught.value.detail == (
        "Vault refused Inlet's token (INLET_VAULT_TOKEN) for a secret write: permission denied. "
        "An operator must renew the token or fix the Vault policy."
    )
    assert caught.value.__cause__ is None and caught.value.__suppress_context__
    assert "hvs.not-a-valid-token" not in caplog.text and PASSWORD not in caplog.text


def test_a_confined_token_cannot_leave_its_tenant(vault) -> None:
    standin = vault.require_standin("issue a policy-confined token")
    tenant_a, tenant_b = uuid.uuid4(), uuid.uuid4()
    own = f"tenants/{tenant_a}/connections/{uuid.uuid4()}"
    foreign = f"tenants/{tenant_b}/connections/{uuid.uuid4()}"
    _store(vault).write(foreign, CREDS)
    token = standin.issue_token(paths=(f"{vault.prefix}/tenants/{tenant_a}/",))
    confined = _store(vault, token=token)
    assert confined.write(own, CREDS) == 1
    with pytest.raises(SecretBackendRefused):
        confined.read(foreign)


def test_approle_login_and_relogin_after_token_expiry(vault) -> None:
    standin = vault.require_standin("serve AppRole logins")
    role_id, secret_id = standin.add_approle()
    store = _store(vault, token=None, role_id=role_id, secret_id=secret_id)
    assert store.write(PATH, CREDS) == 1
    [first] = standin.tokens_issued_by_login()
    standin.revoke(first)  # what an expired token looks like to the client: 403
    assert store.read(PATH) == CREDS
    [second] = standin.tokens_issued_by_login()
    assert second != first
    assert store.health()["status"] == "ok"


def test_bad_approle_credentials_are_refused(vault) -> None:
    standin = vault.require_standin("serve AppRole logins")
    role_id, _ = standin.add_approle()
    store = _store(vault, token=None, role_id=role_id, secret_id="wrong-secret-id")
    with pytest.raises(SecretBackendRefused) as caught:
        store.read(PATH)
    assert caught.value.detail == (
        "Vault refused Inlet's AppRole login (INLET_VAULT_ROLE_ID / INLET_VAULT_SECRET_ID). "
        "An operator must issue a new secret id or fix the role."
    )
    assert store.health()["status"] == "refused"


def test_namespace_header_is_sent(vault) -> None:
    standin = vault.require_standin("see request headers")
    _store(vault, namespace="team-a").write(PATH, CREDS)
    assert standin.namespaces == ["team-a"]


def test_needs_a_token_or_approle(vault) -> None:
    with pytest.raises(ValueError, match="token"):
        VaultSecretStore(addr=vault.addr)
