"""Every event type from its real source to a receiver on loopback: API → Redis → worker → Spark →
Delta for the runs, the scheduler for lag alerts, the offsets API for a reset; each delivered once
per occurrence by ``inlet webhook-worker``, signed as Standard Webhooks says. Sandbox Kafka over TCP."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from tests.factories import create_pipeline, make_tenant, plaintext_connection_body
from tests.fixtures.kafka import SandboxFaults, SandboxKafka, produce_keyed
from tests.fixtures.stack import Stack
from tests.fixtures.webhook_receiver import Receiver
from tests.runs.helpers import wait_for_run
from tests.webhooks.helpers import create_webhook, payload, signature_ok

pytestmark = pytest.mark.slow

ALL_EVENTS = ["run.failed", "run.succeeded", "pipeline.recovered", "pipeline.data_loss", "pipeline.lag_exceeded",
              "pipeline.lag_recovered", "pipeline.expectation_exceeded", "offsets.changed"]
PATCH = {"Content-Type": "application/merge-patch+json"}


def _types(received: list[Any]) -> Counter[str]:
    return Counter(payload(r)["type"] for r in received)


def test_each_event_is_delivered_once_per_occurrence(stack: Stack, sandbox_kafka: SandboxKafka, kafka_faults: SandboxFaults, kafka_topic: Callable[..., str],
                                                     webhook_receiver: Receiver) -> None:
    client = stack.client
    topic = kafka_topic(partitions=1)
    produce_keyed(sandbox_kafka.bootstrap_servers, topic, 60)
    tenant = make_tenant(client)
    hook = create_webhook(client, tenant, webhook_receiver.url, events=ALL_EVENTS)
    conn = client.post("/connections", json=plaintext_connection_body(sandbox_kafka.bootstrap_servers),
                       headers=tenant.editor).json()
    pipeline = create_pipeline(client, tenant, conn["id"], source={"connection_id": conn["id"], "topics": [topic],
                                                                   "value_format": "raw", "on_data_loss": "fail"},
                               target={"type": "delta", "path": "bronze/webhooks"}, schedule=None, state="paused")
    path = f"/pipelines/{pipeline['id']}"
    stack.start_worker()
    stack.start_webhook_worker()

    # An offsets reset, then records expire before they are read: the run fails on data loss.
    assert client.patch(f"{path}/offsets", json={"reset": "earliest"}, headers=tenant.editor).status_code == 200
    kafka_faults.delete_records(topic, 0, 20)
    failed = wait_for_run(stack, client.post(f"{path}/runs", headers=tenant.editor).json()["id"], tenant.viewer)
    assert failed["state"] == "failed" and failed["error"]["kind"] == "data_loss", (failed, stack.log_text())

    # Skipping the loss, 30 offsets per run: the next run succeeds with a gap and leaves a lag of 30.
    patched = client.patch(path, json={"source": {"on_data_loss": "skip", "max_offsets_per_run": 30}},
                           headers={**tenant.editor, **PATCH})
    assert patched.status_code == 200, patched.text
    assert client.put(f"{path}/lag-alert", json={"lag_records": 15}, headers=tenant.editor).status_code == 200
    assert client.post(f"{path}/resume", headers=tenant.editor).status_code == 200
    lossy = wait_for_run(stack, client.post(f"{path}/runs", headers=tenant.editor).json()["id"], tenant.viewer)
    assert lossy["state"] == "succeeded", (lossy, stack.log_text())
    assert [p["gap"] for p in lossy["partitions"]] == [[0, 20]]
    stack.start_scheduler()
    webhook_receiver.wait_for(6, timeout_s=60)

    # The rest is read: the lag is gone, and the scheduler clears the alert.
    client.patch(path, json={"source": {"max_offsets_per_run": None}}, headers={**tenant.editor, **PATCH})
    last = wait_for_run(stack, client.post(f"{path}/runs", headers=tenant.editor).json()["id"], tenant.viewer)
    assert last["state"] == "succeeded" and last["records_read"] == 30, (last, stack.log_text())

    received = webhook_receiver.wait_for(8, timeout_s=60)
    time.sleep(3)
    assert len(webhook_receiver.requests) == 8, _types(webhook_receiver.requests)
    assert _types(received) == Counter({"offsets.changed": 1, "run.failed": 1, "run.succeeded": 2,
                                        "pipeline.recovered": 1, "pipeline.data_loss": 1, "pipeline.lag_exceeded": 1,
                                        "pipeline.lag_recovered": 1})
    assert len({r.headers["webhook-id"] for r in received}) == 8
    assert all(signature_ok(hook["secret"], r) for r in received)
    data = {}
    for r in received:
        data.setdefault(payload(r)["type"], []).append(payload(r)["data"])
    assert data["offsets.changed"][0]["partitions"] == [{"topic": topic, "partition": 0, "before": None, "after": 0}]
    assert data["offsets.changed"][0]["changed_by"]["api_key_name"] == "editor-key"
    assert (data["run.failed"][0]["run_id"], data["run.failed"][0]["failure_kind"], data["run.failed"][0]["will_retry"]) \
        == (failed["id"], "data_loss", False)
    assert (data["pipeline.recovered"][0]["run_id"], data["pipeline.recovered"][0]["failed_runs"]) == (lossy["id"], 1)
    assert data["pipeline.data_loss"][0]["partitions"] == [{"topic": topic, "partition": 0, "from_offset": 0,
                                                           "to_offset": 20, "records_lost": 20}]
    assert (data["pipeline.lag_exceeded"][0]["observed_lag"], data["pipeline.lag_recovered"][0]["observed_lag"]) == (30, 0)
    assert sorted(d["run_id"] for d in data["run.succeeded"]) == sorted([lossy["id"], last["id"]])
    logged = client.get(f"/webhooks/{hook['id']}/deliveries", headers=tenant.viewer).json()
    assert logged["total"] == 8 and {(d["state"], d["attempts"]) for d in logged["items"]} == {("succeeded", 1)}
