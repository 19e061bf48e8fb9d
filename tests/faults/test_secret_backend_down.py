"""The secret backend (a real OpenBao server) failing while a run needs its credentials.

Unavailable (stalled, then stopped): the run is retried with a doubling backoff, gets past the
secret backend once Vault answers again, and fails cleanly with ``secret_backend_unavailable`` when
Vault stays down. Refused (Inlet's token revoked) or the credentials' version gone: the run fails at
once with ``secret_backend_refused`` or ``credentials_missing``, since retrying cannot help. The
offsets never move.

Only a connection with credentials makes a run read Vault, and the sandbox Kafka cannot
authenticate SASL (its brokers do not serve SaslHandshake): once Vault answers, the attempt reaches
the broker and ends ``kafka_auth``. That is the proof that it got its credentials; a real broker
would go on to ingest."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from api.core.config import Settings
from tests.factories import PASSWORD, Tenant, connection_body, create_pipeline, make_tenant
from tests.fixtures.kafka import SandboxKafka
from tests.fixtures.stack import Stack
from tests.fixtures.vault import TestVault, vault_backed, vault_env
from tests.runs.helpers import committed_offsets, wait_for_run

pytestmark = pytest.mark.slow

ATTEMPTS = 4


@pytest.fixture
def settings(settings: Settings, vault: TestVault) -> Settings:
    """The API and (through ``stack.env``) the worker keep credentials in the test's Vault."""
    return vault_backed(settings, vault)


def _vault_env(stack: Stack, vault: TestVault, **overrides: str) -> None:
    stack.env.update(vault_env(vault, INLET_RUN_MAX_ATTEMPTS=str(ATTEMPTS), **overrides))


def _sasl_pipeline(stack: Stack, tenant: Tenant, sandbox_kafka: SandboxKafka, topic: str) -> dict[str, Any]:
    conn = stack.client.post("/connections", headers=tenant.editor, json=connection_body(
        bootstrap_servers=sandbox_kafka.bootstrap_servers, security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
        credentials={"username": "ingest", "password": PASSWORD}, options={}))
    assert conn.status_code == 201, conn.text
    return create_pipeline(stack.client, tenant, conn.json()["id"], schedule=None, state="paused",
                           source={"connection_id": conn.json()["id"], "topics": [topic], "value_format": "raw"},
                           target={"type": "delta", "path": f"faults/{topic}"})


def _retry_state(stack: Stack, run_id: str) -> tuple[str, int, datetime | None, str | None]:
    url = stack.settings.resolved_database_url
    engine = create_engine(url)
    with engine.connect() as conn:
        row = conn.execute(text("SELECT state, attempt, not_before, error FROM runs WHERE id = :id"),
                           {"id": run_id.replace("-", "") if url.startswith("sqlite") else run_id}).one()
    engine.dispose()
    error = row.error if isinstance(row.error, dict) or row.error is None else json.loads(row.error)
    not_before = datetime.fromisoformat(row.not_before) if isinstance(row.not_before, str) else row.not_before
    return row.state, row.attempt, not_before, (error or {}).get("kind")


def test_vault_down_while_a_run_waits_for_credentials(stack, vault, sandbox_kafka) -> None:
    _vault_env(stack, vault)
    tenant = make_tenant(stack.client)
    pipeline = _sasl_pipeline(stack, tenant, sandbox_kafka, "faults-vault")
    vault.server.freeze()  # stalled: every request times out (2 s)
    run_id = stack.client.post(f"/pipelines/{pipeline['id']}/runs", headers=tenant.editor).json()["id"]
    stack.start_worker()

    seen: dict[int, tuple[str, datetime | None, str | None]] = {}

    def retried_twice() -> bool:
        state, attempt, not_before, kind = _retry_state(stack, run_id)
        if state == "queued" and kind is not None:
            seen[attempt] = (state, not_before, kind)
        return 2 in seen or state not in ("queued", "running")

    try:
        stack.wait_for(retried_twice, timeout_s=60, every_s=0.1, what="two attempts without Vault")
    finally:
        vault.server.thaw()
    assert [seen[a][2] for a in (1, 2)] == ["secret_backend_unavailable"] * 2, seen
    # The second wait (4 s) is twice the first (2 s): each not_before is set after the previous one passed.
    assert (seen[2][1] - seen[1][1]).total_seconds() >= 4, seen
    assert committed_offsets(stack.settings.resolved_database_url, pipeline["id"]) == {}

    run = wait_for_run(stack, run_id, tenant.viewer, timeout_s=120)
    assert (run["state"], run["attempt"], run["error"]["kind"]) == ("failed", 3, "kafka_auth"), (run, stack.log_text())
    assert committed_offsets(stack.settings.resolved_database_url, pipeline["id"]) == {}

    # Vault down for good: every attempt fails on it, and the run ends failed, cleanly.
    vault.server.stop()
    run = wait_for_run(stack, stack.client.post(f"/pipelines/{pipeline['id']}/runs", headers=tenant.editor).json()["id"],
                       tenant.viewer, timeout_s=120)
    assert (run["state"], run["attempt"], run["error"]["kind"]) == ("failed", ATTEMPTS, "secret_backend_unavailable"), run
    assert run["partitions"] is None, "nothing was planned without credentials"
    assert committed_offsets(stack.settings.resolved_database_url, pipeline["id"]) == {}
    assert PASSWORD not in json.dumps(run) + stack.client.get(f"/runs/{run['id']}/log", headers=tenant.viewer).text


def test_a_refusal_or_missing_credentials_fail_a_run_at_once(stack, vault, sandbox_kafka) -> None:
    """What an operator or a user must fix is not retried: a revoked worker token, a lost secret version."""
    vault.server.write_policy("inlet", vault.inlet_policy())
    worker_token = vault.server.create_token(policies=["inlet"])
    _vault_env(stack, vault, INLET_VAULT_TOKEN=worker_token)
    tenant = make_tenant(stack.client)
    pipeline = _sasl_pipeline(stack, tenant, sandbox_kafka, "faults-vault-refused")
    stack.start_worker()

    vault.server.client().auth.token.revoke(worker_token)
    run = wait_for_run(stack, stack.client.post(f"/pipelines/{pipeline['id']}/runs", headers=tenant.editor).json()["id"],
                       tenant.viewer, timeout_s=60)
    assert (run["state"], run["attempt"]) == ("failed", 1), run
    assert run["error"] == {"kind": "secret_backend_refused", "message": (
        "Vault refused Inlet's token (INLET_VAULT_TOKEN) for a secret read: permission denied. "
        "An operator must renew the token or fix the Vault policy (see deploy/vault/inlet-policy.hcl)."),
        "topic": None, "partition": None}

    stack.kill("worker")
    _vault_env(stack, vault)  # a good token again; now the credentials' version goes missing
    stack.start_worker()
    connection_id = pipeline["source"]["connection_id"]
    path = f"tenants/{tenant.id}/connections/{connection_id}"
    vault.server.client().secrets.kv.v2.destroy_secret_versions(path=vault.full(path), versions=[1], mount_point="secret")
    run = wait_for_run(stack, stack.client.post(f"/pipelines/{pipeline['id']}/runs", headers=tenant.editor).json()["id"],
                       tenant.viewer, timeout_s=60)
    assert (run["state"], run["attempt"]) == ("failed", 1), run
    assert run["error"] == {"kind": "credentials_missing", "message": (
        f"Connection {connection_id}: version 1 of its credentials is gone from the secret store ({path}); "
        "send new credentials with PUT or PATCH"), "topic": None, "partition": None}
    assert committed_offsets(stack.settings.resolved_database_url, pipeline["id"]) == {}
