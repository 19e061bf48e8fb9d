"""The librdkafka size settings a tenant may set have the operator's ceilings (issue 52: a tenant could
raise ``receive.message.max.bytes`` and ``queued.max.messages.kbytes`` to ~2 GB). Refused when a
connection is written (API and portal share the service), and before each run, so that a ceiling the
operator lowers holds from the next run (``kafka_config``, not retried). Without Spark: the run is
claimed, planned and prepared through ``api.runs.execution`` as the worker does."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from fastapi.testclient import TestClient

from api.core.db import unit_of_work
from api.runs import execution
from tests.factories import Tenant, assert_problem, create_sandbox_pipeline, plaintext_connection_body
from tests.fixtures.kafka import SandboxKafka

CEILING = 64 << 20  # INLET_KAFKA_MAX_FETCH_BYTES's default


def test_size_settings_past_their_ceilings_are_refused_when_a_connection_is_written(
        client: TestClient, tenant: Tenant) -> None:
    hostile = {"receive.message.max.bytes": 2_000_000_000, "queued.max.messages.kbytes": 2_000_000,
               "fetch.max.bytes": "lots"}
    refused = client.post("/connections", json=plaintext_connection_body("broker:9092", options=hostile),
                          headers=tenant.editor)
    problem = assert_problem(refused, 422, fields={"options"})
    assert "receive.message.max.bytes is 2,000,000,000, past the ceiling of 134,217,728" in problem["detail"]
    assert "queued.max.messages.kbytes is 2,000,000, past the ceiling of 65,536" in problem["detail"]
    assert "fetch.max.bytes must be a whole number" in problem["detail"]
    assert client.get("/connections", headers=tenant.viewer).json()["items"] == []

    at_ceilings = {"fetch.max.bytes": CEILING, "receive.message.max.bytes": 2 * CEILING,
                   "queued.max.messages.kbytes": CEILING >> 10}
    created = client.post("/connections", json=plaintext_connection_body("broker:9092", options=at_ceilings),
                          headers=tenant.editor)
    assert created.status_code == 201, created.text
    patched = client.patch(f"/connections/{created.json()['id']}", json={"options": {"message.max.bytes": CEILING + 1}},
                           headers={**tenant.editor, "If-Match": created.headers["ETag"]})
    assert_problem(patched, 422, fields={"options"})
    assert client.get(f"/connections/{created.json()['id']}", headers=tenant.viewer).json()["options"] == at_ceilings


def test_a_ceiling_lowered_since_the_connection_was_written_fails_its_next_run_for_good(
        client: TestClient, tenant: Tenant, sandbox_kafka: SandboxKafka, kafka_topic: Callable[..., str]) -> None:
    topic = kafka_topic(partitions=1)
    pipeline = create_sandbox_pipeline(client, tenant, sandbox_kafka.bootstrap_servers, [topic])
    connection_id = pipeline["source"]["connection_id"]
    etag = client.get(f"/connections/{connection_id}", headers=tenant.viewer).headers["ETag"]
    assert client.patch(f"/connections/{connection_id}", json={"options": {"fetch.max.bytes": 8 << 20}},
                        headers={**tenant.editor, "If-Match": etag}).status_code == 200
    triggered = client.post(f"/pipelines/{pipeline['id']}/runs", headers=tenant.editor)
    assert triggered.status_code == 202, triggered.text
    run_id = uuid.UUID(triggered.json()["id"])
    app = client.app
    services = execution.Services(settings=app.state.settings.model_copy(update={"kafka_max_fetch_bytes": 4 << 20}),  # type: ignore[attr-defined]
                                  secrets=app.state.secrets)  # type: ignore[attr-defined]
    engine = app.state.engine  # type: ignore[attr-defined]
    with unit_of_work(engine) as session:
        assert execution.claim(session=session, run_id=run_id, worker="tests", lease_s=60) is not None
    with unit_of_work(engine) as session:
        outcome = execution.prepare_launch(session=session, run_id=run_id, services=services)
    assert isinstance(outcome, execution.Outcome) and outcome.verdict == "failed", outcome
    run = client.get(f"/runs/{run_id}", headers=tenant.viewer).json()
    assert run["state"] == "failed" and run["attempt"] == 1
    assert run["error"]["kind"] == "kafka_config"
    assert "fetch.max.bytes is 8,388,608, past the ceiling of 4,194,304" in run["error"]["message"]
