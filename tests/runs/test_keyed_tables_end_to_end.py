"""A keyed table for real: a Debezium topic through HTTP API → Redis → Celery worker → Spark → one
MERGE per run, then replays to earliest in both modes, which leave the same table. Sandbox Kafka over
TCP, and the same on a real broker where one is configured (``INLET_TEST_KAFKA_HOME``); Debezium's Avro
through a real Schema Registry (``INLET_TEST_SCHEMA_REGISTRY_HOME``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import cast

import pytest
from deltalake import DeltaTable

from api.runs.delta_state import app_id
from tests.factories import create_pipeline, create_sandbox_pipeline, make_tenant, plaintext_connection_body
from tests.fixtures.debezium import SCHEMA, change_log, final_rows, history_rows, live_rows, produce_changes
from tests.fixtures.debezium_avro import KEY, AvroChanges, envelope_schema
from tests.fixtures.kafka import SandboxKafka, produce_keyed
from tests.fixtures.kafka_broker import RealKafka
from tests.fixtures.schema_registry import RealRegistry
from tests.fixtures.stack import Stack
from tests.runs.helpers import committed_offsets, run_succeeded

pytestmark = pytest.mark.slow


def test_a_debezium_pipeline_keeps_the_final_state_through_replays(
        stack: Stack, any_kafka: SandboxKafka | RealKafka, any_topic: Callable[..., str]) -> None:
    bootstrap, topic = any_kafka.bootstrap_servers, any_topic(partitions=3)
    log = change_log(seed=7, keys=25, n=300)
    ends = produce_changes(bootstrap, topic, log)
    client = stack.client
    tenant = make_tenant(client)
    pipeline = create_sandbox_pipeline(
        client, tenant, bootstrap, [topic], source={"value_format": "json", "schema": SCHEMA},
        target={"type": "delta", "path": "silver/customers", "mode": "upsert", "key": ["id"],
                "sequence_by": "source.lsn", "changes": "debezium"})
    assert pipeline["target"]["mode"] == "upsert" and pipeline["target"]["key"] == ["id"]
    offsets = f"/pipelines/{pipeline['id']}/offsets"
    stack.start_worker()

    first = run_succeeded(stack, tenant, pipeline)
    uri = pipeline["status"]["target_uri"]
    expected = final_rows(log)
    deletes = sum(1 for change in log if change[1] == "d")
    # One run over the whole log: each key's latest change sets its row.
    assert (first["records_read"], first["rows_written"]) == (len(log) + deletes, len({change[0] for change in log}))
    assert live_rows(uri) == expected
    assert committed_offsets(stack.settings.resolved_database_url, pipeline["id"]) == {(topic, p): n for p, n in ends.items()}

    for mode in ("replace", "append"):
        patched = client.patch(offsets, json={"reset": "earliest", "replay_mode": mode}, headers=tenant.editor)
        assert patched.status_code == 200, patched.text
        again = run_succeeded(stack, tenant, pipeline)
        assert (again["records_read"], again["rows_written"]) == (len(log) + deletes, 0)  # nothing newer
        assert live_rows(uri) == expected, mode
    assert DeltaTable(uri).transaction_version(app_id(pipeline["id"])) == again["seq"]


def test_a_compacted_topic_keyed_by_its_kafka_key_lands_as_the_latest_value_per_key_its_deletes_soft(
        stack: Stack, sandbox_kafka: SandboxKafka, kafka_topic: Callable[..., str]) -> None:
    topic = kafka_topic(partitions=3)

    def value(i: int) -> bytes | None:  # every 7th record a tombstone
        return None if i % 7 == 3 else json.dumps({"name": f"n{i}", "tier": i % 4}).encode()

    produce_keyed(sandbox_kafka.bootstrap_servers, topic, 200, key=lambda i: f"customer-{i % 20}", value=value)  # type: ignore[arg-type]
    latest = {f"customer-{i % 20}": value(i) for i in range(200)}  # a key's records land in one partition, in order
    last_row = {f"customer-{i % 20}": json.loads(cast(bytes, value(i))) for i in range(200) if value(i) is not None}
    client = stack.client
    tenant = make_tenant(client)
    pipeline = create_sandbox_pipeline(
        client, tenant, sandbox_kafka.bootstrap_servers, [topic],
        source={"value_format": "json", "schema": "name STRING, tier INT"},
        target={"type": "delta", "path": "silver/by-kafka-key", "mode": "upsert", "key": ["customer"],
                "key_from": "kafka_key", "deletes": "soft"})
    assert pipeline["target"]["deletes"] == "soft"
    stack.start_worker()

    run = run_succeeded(stack, tenant, pipeline)
    assert run["records_read"] == 200
    rows = DeltaTable(pipeline["status"]["target_uri"]).to_pyarrow_table().to_pylist()
    assert sorted((r["customer"], r["name"], r["tier"]) for r in rows if not r["_inlet_deleted"]) == sorted(
        (k, json.loads(v)["name"], json.loads(v)["tier"]) for k, v in latest.items() if v is not None)
    deleted = {r["customer"]: r for r in rows if r["_inlet_deleted"]}
    assert sorted(deleted) == sorted(k for k, v in latest.items() if v is None)
    # Soft deletes: a deleted key keeps its last values, and when it was deleted.
    assert {k: (r["name"], r["tier"]) for k, r in deleted.items()} == {k: (last_row[k]["name"], last_row[k]["tier"]) for k in deleted}
    assert all(r["_inlet_deleted_at"] is not None for r in deleted.values())


def test_an_scd_type_2_pipeline_keeps_the_reference_history_through_replays(
        stack: Stack, any_kafka: SandboxKafka | RealKafka, any_topic: Callable[..., str]) -> None:
    bootstrap, topic = any_kafka.bootstrap_servers, any_topic(partitions=3)
    log = change_log(seed=8, keys=20, n=240)
    produce_changes(bootstrap, topic, log)
    client = stack.client
    tenant = make_tenant(client)
    pipeline = create_sandbox_pipeline(
        client, tenant, bootstrap, [topic], source={"value_format": "json", "schema": SCHEMA},
        target={"type": "delta", "path": "silver/customers_history", "mode": "upsert", "key": ["id"],
                "sequence_by": "source.lsn", "changes": "debezium", "scd_type": 2})
    assert pipeline["target"]["scd_type"] == 2
    stack.start_worker()

    first = run_succeeded(stack, tenant, pipeline)
    uri = pipeline["status"]["target_uri"]
    columns = ["id", "name", "tier", "_inlet_valid_from", "_inlet_valid_to", "_inlet_current", "_inlet_deleted"]

    def history() -> list[tuple]:
        rows = DeltaTable(uri).to_pyarrow_table().to_pylist()
        return sorted((tuple(r[c] for c in columns) for r in rows), key=lambda r: (r[0], r[3]))

    expected = history_rows(log)
    assert first["rows_written"] == len(log) == len(expected)
    assert history() == expected
    for mode in ("replace", "append"):
        patched = client.patch(f"/pipelines/{pipeline['id']}/offsets", json={"reset": "earliest", "replay_mode": mode},
                               headers=tenant.editor)
        assert patched.status_code == 200, patched.text
        assert "already in the key's history adds nothing" in patched.json()["keyed_table"]["detail"]
        again = run_succeeded(stack, tenant, pipeline)
        assert again["rows_written"] == 0
        assert history() == expected, mode
    assert DeltaTable(uri).transaction_version(app_id(pipeline["id"])) == again["seq"]



def test_a_debezium_avro_pipeline_through_the_registry_keeps_the_final_state_through_a_replay(
        stack: Stack, real_kafka: RealKafka, real_topic: Callable[..., str], real_registry: RealRegistry) -> None:
    """Debezium's AvroConverter on the real broker: Avro keys and envelopes under the topic's default
    subjects (``<topic>-key``, ``<topic>-value``), tombstones after deletes, read through the connection's
    registry by the API's pipeline, worker and job."""
    topic, log = real_topic(partitions=3), change_log(seed=5, keys=20, n=200)
    changes = AvroChanges(real_registry.register(f"{topic}-value", envelope_schema()),
                          real_registry.register(f"{topic}-key", KEY))
    produced = sum(changes.produce(real_kafka.bootstrap_servers, topic, log).values())
    client = stack.client
    tenant = make_tenant(client)
    conn = client.post("/connections", json=plaintext_connection_body(
        real_kafka.bootstrap_servers, schema_registry={"url": real_registry.url}), headers=tenant.editor)
    assert conn.status_code == 201, conn.text
    pipeline = create_pipeline(
        client, tenant, conn.json()["id"], schedule=None, state="paused",
        source={"connection_id": conn.json()["id"], "topics": [topic], "value_format": "avro", "key_format": "avro"},
        target={"type": "delta", "path": "silver/customers-avro", "mode": "upsert", "key": ["id"],
                "sequence_by": "source.lsn", "changes": "debezium"})
    stack.start_worker()

    first = run_succeeded(stack, tenant, pipeline)
    uri = pipeline["status"]["target_uri"]
    assert (first["records_read"], first["rows_written"], first["rows_quarantined"]) == \
        (produced, len({change[0] for change in log}), 0)
    assert live_rows(uri) == final_rows(log)

    patched = client.patch(f"/pipelines/{pipeline['id']}/offsets", json={"reset": "earliest", "replay_mode": "append"},
                           headers=tenant.editor)
    assert patched.status_code == 200, patched.text
    again = run_succeeded(stack, tenant, pipeline)
    assert again["records_read"] == produced
    assert live_rows(uri) == final_rows(log)
    assert DeltaTable(uri).transaction_version(app_id(pipeline["id"])) == again["seq"]
