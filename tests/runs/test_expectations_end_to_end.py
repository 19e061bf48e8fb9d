"""A pipeline's expectations through the whole stack: HTTP API → Redis → Celery worker → Spark → Delta,
sandbox Kafka over TCP. The run shows each rule's count, the usage ledger and /metrics count the rows
that broke a rule, a rule past its threshold sends ``pipeline.expectation_exceeded``, and a rule made
``fail`` fails the next run before its commit: the table and the offsets stay where they were."""

from __future__ import annotations

import json
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.factories import create_pipeline, make_tenant, operator, plaintext_connection_body
from tests.fixtures.kafka import produce_keyed
from tests.fixtures.stack import Stack
from tests.fixtures.webhook_receiver import Receiver, webhook_receiver
from tests.runs.helpers import committed_offsets, wait_for_run
from tests.spark_jobs.helpers import duckdb_connection
from tests.webhooks.helpers import create_webhook, payload

pytestmark = pytest.mark.slow
__all__ = ["webhook_receiver"]  # a fixture

PATCH = {"Content-Type": "application/merge-patch+json"}


def _order(i: int) -> bytes:
    """Amounts of i % 5 == 0 are negative; ids of i % 8 == 0 are missing."""
    return json.dumps({"id": None if i % 8 == 0 else i, "amount": -i if i % 5 == 0 else i + 0.5}).encode()


def _rows(uri: str) -> int:
    return duckdb_connection().execute(f"SELECT count(*) FROM delta_scan('{uri}')").fetchone()[0]


def _violating_metric(client: Any, tenant_id: str) -> float:
    text = client.get("/metrics", headers=operator()).text
    return next(s.value for family in text_string_to_metric_families(text) for s in family.samples
                if s.name == "inlet_rows_violating_expectations_total" and s.labels == {"tenant_id": tenant_id})


def test_expectations_are_counted_alerted_on_and_fail_a_run_before_its_commit(
        stack: Stack, sandbox_kafka, kafka_topic, webhook_receiver: Receiver) -> None:
    client, topic = stack.client, kafka_topic(partitions=2)
    produce_keyed(sandbox_kafka.bootstrap_servers, topic, 40, value=_order)
    tenant = make_tenant(client)
    create_webhook(client, tenant, webhook_receiver.url, events=["pipeline.expectation_exceeded"])
    conn = client.post("/connections", json=plaintext_connection_body(sandbox_kafka.bootstrap_servers),
                       headers=tenant.editor).json()
    rules = [{"name": "positive_amount", "predicate": "amount > 0", "action": "quarantine", "alert_over_rows": 5},
             {"name": "has_id", "predicate": "id IS NOT NULL", "alert_over_ratio": 0.5}]
    pipeline = create_pipeline(
        client, tenant, conn["id"], target={"type": "delta", "path": "bronze/orders"}, schedule=None, state="paused",
        source={"connection_id": conn["id"], "topics": [topic], "value_format": "json", "schema": "id INT, amount DOUBLE"},
        contract={"expectations": rules})
    path, uri = f"/pipelines/{pipeline['id']}", pipeline["status"]["target_uri"]
    stack.start_worker()
    stack.start_webhook_worker()

    run = wait_for_run(stack, client.post(f"{path}/runs", headers=tenant.editor).json()["id"], tenant.viewer)

    negative, no_id = [i for i in range(40) if i % 5 == 0], [i for i in range(40) if i % 8 == 0]
    assert run["state"] == "succeeded", (run, stack.log_text())
    assert run["expectations"] == [{"name": "positive_amount", "action": "quarantine", "rows_violating": 8},
                                   {"name": "has_id", "action": "warn", "rows_violating": 5}]
    violating = len(set(negative) | set(no_id))
    assert run["rows_violating"] == violating
    assert (run["rows_written"], run["rows_quarantined"]) == (32, 8)
    assert _rows(uri) == 32
    usage = client.get("/usage", params={"granularity": "day"}, headers=tenant.viewer).json()["items"]
    assert sum(row["rows_violating"] for row in usage) == violating
    assert _violating_metric(client, tenant.id) == violating
    # 8 rows over positive_amount's 5; has_id's 5 of 40 are not over half.
    [event] = [payload(r) for r in webhook_receiver.wait_for(1, timeout_s=60)]
    assert event["type"] == "pipeline.expectation_exceeded"
    assert event["data"]["run_id"] == run["id"] and event["data"]["records_read"] == 40
    assert event["data"]["expectations"] == [{"name": "positive_amount", "action": "quarantine", "rows_violating": 8,
                                              "alert_over_rows": 5, "alert_over_ratio": None}]

    # The same rule, made fail: the next run fails before its commit and moves nothing.
    offsets = committed_offsets(stack.settings.resolved_database_url, pipeline["id"])
    produce_keyed(sandbox_kafka.bootstrap_servers, topic, 10, value=lambda i: _order(i + 40))
    patched = client.patch(path, json={"contract": {"expectations": [{**rules[0], "action": "fail"}]}},
                           headers={**tenant.editor, **PATCH})
    assert patched.status_code == 200, patched.text

    failed = wait_for_run(stack, client.post(f"{path}/runs", headers=tenant.editor).json()["id"], tenant.viewer)

    assert failed["state"] == "failed" and failed["attempt"] == 1, (failed, stack.log_text())
    assert failed["error"]["kind"] == "expectation_failed"
    assert "expectation positive_amount" in failed["error"]["message"]
    assert committed_offsets(stack.settings.resolved_database_url, pipeline["id"]) == offsets
    assert _rows(uri) == 32
