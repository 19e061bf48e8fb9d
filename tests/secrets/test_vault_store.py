"""``VaultSecretStore`` against a real OpenBao server (tests/fixtures/vault.py): KV v2 versions,
metadata and destroy, policies, AppRole, namespaces, and Vault sealed, stopped, stalled or failing."""

from __future__ import annotations

import logging
import time
import uuid

import pytest

from api.secrets.backends import build_secret_store
from api.secrets.store import SecretBackendRefused, SecretBackendUnavailable, SecretNotFound
from api.secrets.vault import VaultSecretStore
from tests.factories import PASSWORD
from tests.fixtures.openbao import bao_version
from tests.fixtures.vault import TestVault, vault_backed

PATH = f"tenants/{uuid.uuid4()}/connections/{uuid.uuid4()}"
CREDS = {"credentials": {"username": "ingest", "password": PASSWORD}}
PROBE = "tenants/readiness-probe/connections/readiness-probe"
VERSION = bao_version().removeprefix("OpenBao v")


def _store(vault: TestVault, **kwargs: object) -> VaultSecretStore:
    options = {"addr": vault.addr, "token": vault.token, "prefix": vault.prefix, "namespace": vault.namespace,
               "timeout_s": 2.0} | kwargs
    return VaultSecretStore(**options)  # type: ignore[arg-type]


def _refused_login(where: str, why: str) -> str:
    return (f"Vault refused Inlet's AppRole login at {where} (INLET_VAULT_ROLE_ID / INLET_VAULT_SECRET_ID): {why}. "
            "An operator must issue a new secret id or fix the role.")


BAD_SECRET_ID = "the role id or secret id is wrong, or the secret id has expired or been used up"


def test_built_from_settings(settings, vault) -> None:
    store = build_secret_store(vault_backed(settings, vault, vault_approle_mount="auth-ci"))
    assert isinstance(store, VaultSecretStore)
    assert (store.backend, store.addr, store.mount, store.prefix, store.timeout_s, store._approle_mount) == (
        "vault", vault.addr, "secret", "inlet", 2.0, "auth-ci")


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
    assert (metadata["current_version"], metadata["oldest_version"], sorted(metadata["versions"])) == (2, 0, ["1", "2"])

    with pytest.raises(SecretNotFound) as missing:
        store.read(PATH, 3)
    assert (missing.value.status, missing.value.detail) == (404, f"Secret {PATH} version 3 does not exist")

    store.destroy(PATH)
    assert vault.metadata(PATH) is None
    with pytest.raises(SecretNotFound):
        store.read(PATH)
    store.destroy(PATH)  # destroying a missing secret is not an error


def test_describe_names_the_readable_versions_and_list_finds_every_path(vault) -> None:
    store = _store(vault)
    other = f"tenants/{uuid.uuid4()}/connections/{uuid.uuid4()}"
    for _ in range(3):
        store.write(PATH, CREDS)
    store.write(other, CREDS)
    kv = vault.server.client().secrets.kv.v2
    kv.delete_secret_versions(path=vault.full(PATH), versions=[1], mount_point="secret")  # soft delete
    kv.destroy_secret_versions(path=vault.full(PATH), versions=[2], mount_point="secret")

    described = store.describe(PATH)
    assert described is not None and described.path == PATH and described.versions == frozenset({3})
    assert abs(time.time() - described.updated_at.timestamp()) < 60
    with pytest.raises(SecretNotFound):
        store.read(PATH, 1)
    with pytest.raises(SecretNotFound):
        store.read(PATH, 2)
    assert store.describe(f"tenants/{uuid.uuid4()}/connections/{uuid.uuid4()}") is None

    assert store.list_paths("tenants") == sorted([PATH, other])
    store.destroy(other)
    assert store.list_paths("tenants") == [PATH]
    assert store.list_paths("nothing-here") == []


def test_versions_kv_will_delete_later_are_still_readable(vault) -> None:
    """With KV's delete_version_after, every version carries a deletion_time in the future."""
    store = _store(vault)
    store.write(PATH, CREDS)
    vault.server.client().secrets.kv.v2.update_metadata(path=vault.full(PATH), delete_version_after="1h",
                                                        mount_point="secret")
    assert store.write(PATH, CREDS) == 2
    assert vault.metadata(PATH)["versions"]["2"]["deletion_time"]  # set, an hour ahead
    assert store.describe(PATH).versions == frozenset({1, 2})  # type: ignore[union-attr]


def test_paths_that_could_leave_the_prefix_are_refused(vault) -> None:
    store = _store(vault)
    for bad in ("", "../other", "tenants//x", "tenants/a/../../b", "/abs"):
        with pytest.raises(ValueError):
            store.write(bad, CREDS)
    assert vault.paths() == []


def test_health_reports_ok_with_version(vault) -> None:
    assert _store(vault).health() == {"backend": "vault", "address": vault.addr, "version": VERSION, "status": "ok"}


def test_sealed_vault_is_unavailable_and_health_says_sealed(vault) -> None:
    store = _store(vault)
    vault.server.seal()
    assert store.health() == {"backend": "vault", "address": vault.addr, "version": VERSION, "status": "sealed",
                              "detail": "Vault is sealed"}
    with pytest.raises(SecretBackendUnavailable) as caught:
        store.write(PATH, CREDS)
    assert caught.value.status == 503
    assert caught.value.detail == f"Vault at {vault.addr} is sealed or unavailable (503); retry later"
    vault.server.unseal()
    assert store.health()["status"] == "ok"
    assert vault.paths() == []


def test_stopped_vault_is_unavailable(vault) -> None:
    store = _store(vault)
    store.write(PATH, CREDS)
    vault.server.stop()
    assert store.health() == {"backend": "vault", "address": vault.addr, "status": "unavailable",
                              "detail": "is unreachable (connection failed)"}
    with pytest.raises(SecretBackendUnavailable) as caught:
        store.read(PATH)
    assert caught.value.detail == f"Vault at {vault.addr} is unreachable (connection failed); retry later"


def test_stalled_vault_is_unavailable_after_the_timeout(vault) -> None:
    store = _store(vault, timeout_s=0.5)
    vault.server.freeze()
    try:
        started = time.monotonic()
        with pytest.raises(SecretBackendUnavailable) as caught:
            store.read(PATH)
        assert time.monotonic() - started < 3
        assert store.health()["status"] == "unavailable"
    finally:
        vault.server.thaw()
    assert caught.value.detail == f"Vault at {vault.addr} did not answer within 0.5s; retry later"


def test_server_error_is_unavailable(vault, vault_proxy) -> None:
    vault_proxy.fail_next("POST", r"/v1/secret/data/")
    with pytest.raises(SecretBackendUnavailable) as caught:
        _store(vault, addr=vault_proxy.addr).write(PATH, CREDS)
    assert caught.value.detail == f"Vault at {vault_proxy.addr} answered 500 (internal error) to a write request"
    assert vault.paths() == []


def test_bad_token_is_refused_clearly(vault, caplog) -> None:
    store = _store(vault, token="s.not-a-valid-token")
    refusal = ("Vault refused Inlet's token (INLET_VAULT_TOKEN) for a secret {}: permission denied. "
               "An operator must renew the token or fix the Vault policy (see deploy/vault/inlet-policy.hcl).")
    assert store.health() == {"backend": "vault", "address": vault.addr, "version": VERSION,
                              "status": "refused", "detail": refusal.format("read")}
    with caplog.at_level(logging.DEBUG), pytest.raises(SecretBackendRefused) as caught:
        store.write(PATH, CREDS)
    assert (caught.value.status, caught.value.code) == (503, "secret-backend-refused")
    assert caught.value.detail == refusal.format("write")
    assert caught.value.__cause__ is None and caught.value.__suppress_context__
    assert "s.not-a-valid-token" not in caplog.text and PASSWORD not in caplog.text


def test_a_confined_token_cannot_leave_its_tenant(vault) -> None:
    tenant_a, tenant_b = uuid.uuid4(), uuid.uuid4()
    own = f"tenants/{tenant_a}/connections/{uuid.uuid4()}"
    foreign = f"tenants/{tenant_b}/connections/{uuid.uuid4()}"
    _store(vault).write(foreign, CREDS)
    vault.server.write_policy("tenant-a", f'path "secret/data/inlet/tenants/{tenant_a}/*" '
                                          '{ capabilities = ["create", "read", "update"] }')
    confined = _store(vault, token=vault.server.create_token(policies=["tenant-a"]))
    assert confined.write(own, CREDS) == 1
    assert confined.read(own) == CREDS
    with pytest.raises(SecretBackendRefused):
        confined.read(foreign)
    with pytest.raises(SecretBackendRefused):
        confined.write(foreign, {"credentials": {"username": "evil", "password": "x"}})
    assert vault.read(foreign) == CREDS


def test_the_shipped_policy_alone_is_enough(vault) -> None:
    """AppRole tokens with deploy/vault/inlet-policy.hcl and no ``default`` policy do all Inlet does."""
    role_id, secret_id = vault.approle_for_inlet()
    store = _store(vault, token=None, role_id=role_id, secret_id=secret_id)
    assert store.health() == {"backend": "vault", "address": vault.addr, "version": VERSION, "status": "ok"}
    assert store.write(PATH, CREDS) == 1
    assert store.write(PATH, CREDS) == 2
    assert store.read(PATH, 1) == CREDS
    assert store.describe(PATH).versions == frozenset({1, 2})  # type: ignore[union-attr]
    assert store.list_paths("tenants") == [PATH]
    store.destroy(PATH)
    assert vault.paths() == []
    with pytest.raises(SecretBackendRefused):  # and nothing beyond it
        store.write("elsewhere/secret", CREDS)


def test_readiness_names_a_missing_capability(vault) -> None:
    without_delete = vault.inlet_policy().replace('["read", "list", "delete"]', '["read", "list"]')
    vault.server.write_policy("no-delete", without_delete)
    store = _store(vault, token=vault.server.create_token(policies=["no-delete"]))
    assert store.health() == {
        "backend": "vault", "address": vault.addr, "version": VERSION, "status": "refused",
        "detail": f"Inlet's Vault token lacks delete on secret/metadata/inlet/{PROBE} (see deploy/vault/inlet-policy.hcl)",
    }


def test_readiness_without_the_capabilities_endpoint_checks_a_read(vault) -> None:
    """A token with KV grants but neither ``default`` nor capabilities-self: KV works, so it is ready."""
    kv_only = vault.inlet_policy().split('path "sys/capabilities-self"')[0]
    vault.server.write_policy("kv-only", kv_only)
    store = _store(vault, token=vault.server.create_token(policies=["kv-only"]))
    assert store.health() == {
        "backend": "vault", "address": vault.addr, "version": VERSION, "status": "ok",
        "detail": "Vault does not let Inlet's token list its own capabilities (grant update on sys/capabilities-self, "
                  "as deploy/vault/inlet-policy.hcl does); reading was checked, writing was not",
    }
    assert store.write(PATH, CREDS) == 1


def test_approle_logs_in_again_after_token_expiry_and_revocation(vault) -> None:
    role_id, secret_id = vault.approle_for_inlet(token_ttl="2s", token_max_ttl="2s")
    store = _store(vault, token=None, role_id=role_id, secret_id=secret_id)
    assert store.write(PATH, CREDS) == 1
    first = store._client.token
    time.sleep(2.5)  # the token expired: Vault answers 403 and the store logs in again
    assert store.read(PATH) == CREDS
    second = store._client.token
    assert second != first
    vault.server.client().auth.token.revoke(second)
    assert store.read(PATH) == CREDS
    assert store._client.token not in (first, second)
    assert store.health()["status"] == "ok"


def test_a_used_up_secret_id_is_a_refusal_naming_the_login(vault) -> None:
    role_id, secret_id = vault.approle_for_inlet(secret_id_num_uses=1)
    store = _store(vault, token=None, role_id=role_id, secret_id=secret_id)
    assert store.write(PATH, CREDS) == 1  # the one use
    vault.server.client().auth.token.revoke(store._client.token)
    with pytest.raises(SecretBackendRefused) as caught:
        store.read(PATH)
    assert caught.value.detail == _refused_login("auth/approle", BAD_SECRET_ID)
    assert store.health() == {"backend": "vault", "address": vault.addr, "version": VERSION, "status": "refused",
                              "detail": caught.value.detail}


def test_an_expired_secret_id_is_a_refusal(vault) -> None:
    role_id, secret_id = vault.approle_for_inlet(secret_id_ttl="1s")
    time.sleep(1.5)
    store = _store(vault, token=None, role_id=role_id, secret_id=secret_id)
    with pytest.raises(SecretBackendRefused) as caught:
        store.write(PATH, CREDS)
    assert caught.value.detail == _refused_login("auth/approle", BAD_SECRET_ID)


def test_approle_not_mounted_gives_the_login_message(vault) -> None:
    store = _store(vault, token=None, role_id="role", secret_id="secret")
    with pytest.raises(SecretBackendRefused) as caught:
        store.read(PATH)
    assert caught.value.detail == _refused_login(
        "auth/approle", "permission denied (is AppRole enabled at auth/approle?)")


def test_everything_works_inside_a_namespace(vault) -> None:
    vault.server.create_namespace("team-a")
    vault.namespace = "team-a"
    role_id, secret_id = vault.approle_for_inlet()  # AppRole, policy and KV all inside the namespace
    store = _store(vault, token=None, role_id=role_id, secret_id=secret_id)
    assert store.health() == {"backend": "vault", "address": vault.addr, "namespace": "team-a", "version": VERSION,
                              "status": "ok"}
    assert store.write(PATH, CREDS) == 1
    assert store.write(PATH, CREDS) == 2
    assert vault.read(PATH, 1) == CREDS  # in team-a's KV …
    assert TestVault(vault.server).read(PATH) is None  # … not the root namespace's
    assert store.describe(PATH).versions == frozenset({1, 2})  # type: ignore[union-attr]
    assert store.list_paths("tenants") == [PATH]
    store.destroy(PATH)
    assert vault.paths() == []


def test_needs_a_token_or_approle(vault) -> None:
    with pytest.raises(ValueError, match="token"):
        VaultSecretStore(addr=vault.addr)
