"""The secret backend (Vault) unavailable while a run waits for its credentials: the run is retried
with a doubling backoff, gets past the secret backend once Vault is back, and fails cleanly with
``secret_backend_unavailable`` when Vault stays down; the offsets never move.

Only a connection with credentials makes a run read Vault, and the sandbox Kafka cannot
authenticate SASL (its brokers do not serve SaslHandshake): once Vault is back, the attempt reaches
the broker and ends ``kafka_auth``. That is the proof that it got its credentials; a real broker
would go on to ingest. Uses the Vault stand-in of tests/fixtures (stopping it is a stand-in fault)."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from sqlalchemy import create_engine, text

from tests.factories import PASSWORD, connection_body, create_pipeline, make_tenant
from tests.fixtures.vault import vault_backed
from tests.runs.helpers import committed_offsets, wait_for_run

pytestmark = pytest.mark.slow

ATTEMPTS = 4


@pytest.fixture
def settings(settings, vault):  # type: ignore[no-untyped-def]
    """The API and (through ``stack.env``) the worker keep credentials in the test's Vault."""
    return vault_backed(settings, vault)


def _vault_env(stack, vault) -> None:  # type: ignore[no-untyped-def]
    stack.env.update({"INLET_SECRET_BACKEND": "vault", "INLET_VAULT_ADDR": vault.addr, "INLET_VAULT_TOKEN": vault.token,
                      "INLET_VAULT_PREFIX": vault.prefix, "INLET_VAULT_TIMEOUT_S": "2",
                      "INLET_RUN_MAX_ATTEMPTS": str(ATTEMPTS)})


def _retry_state(stack, run_id: str) -> tuple[str, int, datetime | None, str | None]:  # type: ignore[no-untyped-def]
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
    standin = vault.require_standin("stop Vault")
    _vault_env(stack, vault)
    tenant = make_tenant(stack.client)
    conn = stack.client.post("/connections", headers=tenant.editor, json=connection_body(
        bootstrap_servers=sandbox_kafka.bootstrap_servers, security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
        credentials={"username": "ingest", "password": PASSWORD}, options={}))
    assert conn.status_code == 201, conn.text
    pipeline = create_pipeline(stack.client, tenant, conn.json()["id"], schedule=None, state="paused",
                               source={"connection_id": conn.json()["id"], "topics": ["faults-vault"],
                                       "value_format": "raw"}, target={"type": "delta", "path": "faults/vault"})
    standin.stop()
    run_id = stack.client.post(f"/pipelines/{pipeline['id']}/runs", headers=tenant.editor).json()["id"]
    stack.start_worker()

    seen: dict[int, tuple[str, datetime | None, str | None]] = {}

    def retried_twice() -> bool:
        state, attempt, not_before, kind = _retry_state(stack, run_id)
        if state == "queued" and kind is not None:
            seen[attempt] = (state, not_before, kind)
        return 2 in seen or state not in ("queued", "running")

    stack.wait_for(retried_twice, timeout_s=60, every_s=0.1, what="two attempts without Vault")
    assert [seen[a][2] for a in (1, 2)] == ["secret_backend_unavailable"] * 2, seen
    # The second wait (4 s) is twice the first (2 s): each not_before is set after the previous one passed.
    assert (seen[2][1] - seen[1][1]).total_seconds() >= 4, seen
    assert committed_offsets(stack.settings.resolved_database_url, pipeline["id"]) == {}
    standin.start()

    run = wait_for_run(stack, run_id, tenant.viewer, timeout_s=120)
    assert (run["state"], run["attempt"], run["error"]["kind"]) == ("failed", 3, "kafka_auth"), (run, stack.log_text())
    assert committed_offsets(stack.settings.resolved_database_url, pipeline["id"]) == {}

    # Vault down for good: every attempt fails on it, and the run ends failed, cleanly.
    standin.stop()
    run = wait_for_run(stack, stack.client.post(f"/pipelines/{pipeline['id']}/runs", headers=tenant.editor).json()["id"],
                       tenant.viewer, timeout_s=120)
    assert (run["state"], run["attempt"], run["error"]["kind"]) == ("failed", ATTEMPTS, "secret_backend_unavailable"), run
    assert run["partitions"] is None, "nothing was planned without credentials"
    assert committed_offsets(stack.settings.resolved_database_url, pipeline["id"]) == {}
    assert PASSWORD not in json.dumps(run) + stack.client.get(f"/runs/{run['id']}/log", headers=tenant.viewer).text
