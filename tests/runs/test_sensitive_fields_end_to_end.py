"""Sensitive fields through the whole stack: HTTP API → Redis → Celery worker → Spark → Delta, sandbox
Kafka over TCP. Two pipelines of one tenant and one of another read the same orders with ``email``
hashed: the tenant's two tables hold the same hashes, the other tenant's others. The raw emails and the
tenants' field keys are then searched for in every file the stack wrote (tables, quarantines, logs,
the secret store's), every database row and the runs as the API shows them: found nowhere."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, select

from api.models import metadata
from api.secrets.backends import build_secret_store
from api.secrets.store import field_key_path
from tests.factories import create_pipeline, make_tenant, plaintext_connection_body
from tests.fixtures.kafka import produce_keyed
from tests.fixtures.stack import Stack
from tests.runs.helpers import wait_for_run
from tests.spark_jobs.helpers import duckdb_connection

pytestmark = pytest.mark.slow

SCHEMA = "id INT, email STRING, amount DOUBLE"


def _order(i: int) -> bytes:
    if i % 10 == 9:
        return f'{{"id": {i}, "email": "person{i}@raw.example"'.encode()  # cut short: to the quarantine
    return json.dumps({"id": i, "email": f"person{i}@raw.example", "amount": i + 0.5}).encode()


def _pipeline(stack: Stack, tenant: Any, bootstrap: str, topic: str, path: str) -> dict[str, Any]:
    conn = stack.client.post("/connections", json=plaintext_connection_body(bootstrap), headers=tenant.editor).json()
    return create_pipeline(stack.client, tenant, conn["id"], target={"type": "delta", "path": path}, schedule=None,
                           state="paused",
                           source={"connection_id": conn["id"], "topics": [topic], "value_format": "json", "schema": SCHEMA},
                           contract={"sensitive": [{"field": "email", "action": "hash"}],
                                     "expectations": [{"name": "an_email", "predicate": "email LIKE '%@raw.example'"}]})


def _emails(uri: str) -> dict[int, str]:
    return dict(duckdb_connection().execute(f"SELECT id, email FROM delta_scan('{uri}')").fetchall())


def test_hashes_match_within_a_tenant_differ_across_and_no_raw_value_is_kept(
        stack: Stack, sandbox_kafka, kafka_topic) -> None:
    client, bootstrap, topic = stack.client, sandbox_kafka.bootstrap_servers, kafka_topic(partitions=2)
    produce_keyed(bootstrap, topic, 30, value=_order)
    alice, bob = make_tenant(client), make_tenant(client)
    pipelines = [(alice, _pipeline(stack, alice, bootstrap, topic, "bronze/orders")),
                 (alice, _pipeline(stack, alice, bootstrap, topic, "silver/orders")),
                 (bob, _pipeline(stack, bob, bootstrap, topic, "bronze/orders"))]
    stack.start_worker()

    runs = [wait_for_run(stack, client.post(f"/pipelines/{p['id']}/runs", headers=t.editor).json()["id"], t.viewer)
            for t, p in pipelines]

    for run in runs:
        assert run["state"] == "succeeded", (run, stack.log_text())
        assert (run["rows_written"], run["rows_quarantined"]) == (27, 3)
        assert run["expectations"] == [{"name": "an_email", "action": "warn", "rows_violating": 0}]
    first, second, other = (_emails(p["status"]["target_uri"]) for _, p in pipelines)
    assert first == second and len(first) == 27
    assert all(len(digest) == 64 for digest in first.values())
    assert set(first.values()).isdisjoint(other.values()) and set(first) == set(other)

    store = build_secret_store(stack.settings)
    keys = [store.read(field_key_path(uuid.UUID(t.id)))["key"] for t in (alice, bob)]
    needles = [f"person{i}@raw.example".encode() for i in range(30)] + [k.encode() for k in keys]
    for (tenant, _), run in zip(pipelines, runs, strict=True):
        for path in (f"/runs/{run['id']}", f"/runs/{run['id']}/log"):
            answer = client.get(path, headers=tenant.admin)
            assert answer.status_code == 200 and not any(n in answer.content for n in needles), path
    engine = create_engine(stack.settings.resolved_database_url)
    with engine.connect() as conn:
        for table in metadata.sorted_tables:
            for row in conn.execute(select(table)).all():
                assert not any(n.decode() in repr(tuple(row)) for n in needles), f"table {table.name} holds one"
    engine.dispose()
    stack.stop_all()
    roots = {Path(stack.env["INLET_DATA_DIR"]), Path(stack.settings.resolved_storage_root)}
    files = [p for root in roots for p in root.rglob("*") if p.is_file()]
    assert any(p.name == "worker.log" for p in files) and any("__quarantine" in str(p) for p in files)
    assert [str(p) for p in files if any(n in p.read_bytes() for n in needles)] == []
