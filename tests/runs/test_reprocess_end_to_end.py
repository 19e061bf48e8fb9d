"""Reprocessing the quarantine through the whole stack: HTTP API → Redis → Celery worker → Spark → Delta,
sandbox Kafka over TCP. An expectation quarantines the orders with a negative amount, their emails
sealed in the quarantine (a hashed field). The rule was wrong: once it is gone, a dry run counts what
would land and writes nothing; the reprocess lands each of them once, hashed like the others, takes them
out of the quarantine and moves no offset; a second reprocess lands nothing. Read with DuckDB."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.factories import create_pipeline, make_tenant, plaintext_connection_body
from tests.fixtures.kafka import produce_keyed
from tests.fixtures.stack import Stack
from tests.runs.helpers import committed_offsets, wait_for_run
from tests.spark_jobs.helpers import duckdb_connection

pytestmark = pytest.mark.slow

PATCH = {"Content-Type": "application/merge-patch+json"}


def _order(i: int) -> bytes:
    """Amounts of i % 5 == 0 are refunds (negative); three customers' emails."""
    return json.dumps({"id": i, "amount": -i if i % 5 == 0 else i + 0.5, "email": f"c{i % 3}@shop.example"}).encode()


def _rows(uri: str) -> list[tuple[Any, ...]]:
    return sorted(duckdb_connection().execute(f"SELECT id, email FROM delta_scan('{uri}')").fetchall())


def test_quarantined_records_reprocessed_after_the_fix_land_once(stack: Stack, sandbox_kafka, kafka_topic) -> None:
    client, topic = stack.client, kafka_topic(partitions=2)
    produce_keyed(sandbox_kafka.bootstrap_servers, topic, 40, value=_order)
    tenant = make_tenant(client)
    conn = client.post("/connections", json=plaintext_connection_body(sandbox_kafka.bootstrap_servers),
                       headers=tenant.editor).json()
    pipeline = create_pipeline(
        client, tenant, conn["id"], target={"type": "delta", "path": "bronze/orders"}, schedule=None, state="paused",
        source={"connection_id": conn["id"], "topics": [topic], "value_format": "json",
                "schema": "id INT, amount DOUBLE, email STRING"},
        contract={"expectations": [{"name": "positive_amount", "predicate": "amount > 0", "action": "quarantine"}],
                  "sensitive": [{"field": "email", "action": "hash"}]})
    path, uri = f"/pipelines/{pipeline['id']}", pipeline["status"]["target_uri"]
    reprocess = f"{path}/quarantine/reprocess"
    stack.start_worker()
    first = wait_for_run(stack, client.post(f"{path}/runs", headers=tenant.editor).json()["id"], tenant.viewer)
    assert (first["state"], first["rows_written"], first["rows_quarantined"]) == ("succeeded", 32, 8), first
    refunds = sorted(i for i in range(40) if i % 5 == 0)
    hashed = {i % 3: email for i, email in _rows(uri)}  # each customer's hash, from the rows that landed
    quarantined = duckdb_connection().execute(f"SELECT value FROM delta_scan('{uri}__quarantine')").fetchall()
    assert len(quarantined) == 8 and not any(b"shop.example" in v for (v,) in quarantined)  # sealed
    offsets = committed_offsets(stack.settings.resolved_database_url, pipeline["id"])
    fixed = client.patch(path, json={"contract": {"expectations": []}}, headers={**tenant.editor, **PATCH})
    assert fixed.status_code == 200, fixed.text

    dry = wait_for_run(stack, client.post(reprocess, json={"dry_run": True}, headers=tenant.editor).json()["id"],
                       tenant.viewer)

    assert dry["state"] == "succeeded", (dry, stack.log_text())
    assert (dry["trigger"], dry["rows_written"], dry["rows_quarantined"]) == ("reprocess", 0, 0)
    assert dry["reprocess"] | {"since": None} == {"ranges": None, "since": None, "until": None, "dry_run": True,
                                                   "selected": 8, "decoded": 8, "still_quarantined": 0}
    assert len(_rows(uri)) == 32

    landed = wait_for_run(stack, client.post(reprocess, json={}, headers=tenant.editor).json()["id"], tenant.viewer)

    assert landed["state"] == "succeeded", (landed, stack.log_text())
    assert (landed["rows_written"], landed["reprocess"]["decoded"], landed["reprocess"]["still_quarantined"]) == (8, 8, 0)
    rows = _rows(uri)
    assert [i for i, _ in rows] == list(range(40))  # each refund once, beside the others
    assert {i: email for i, email in rows if i in refunds} == {i: hashed[i % 3] for i in refunds}
    assert duckdb_connection().execute(f"SELECT count(*) FROM delta_scan('{uri}__quarantine')").fetchone()[0] == 0
    assert committed_offsets(stack.settings.resolved_database_url, pipeline["id"]) == offsets

    again = wait_for_run(stack, client.post(reprocess, json={}, headers=tenant.editor).json()["id"], tenant.viewer)

    assert again["state"] == "succeeded", (again, stack.log_text())
    assert (again["rows_written"], again["reprocess"]["selected"], again["reprocess"]["decoded"]) == (0, 0, 0)
    assert len(_rows(uri)) == 40
    actions = [e["action"] for e in client.get("/audit-events?resource_type=run", headers=tenant.viewer).json()["items"]]
    assert actions.count("reprocess_quarantine") == 3
