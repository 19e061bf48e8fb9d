"""A replay of a keyed table (a Delta target in mode upsert) says what its next runs do with the replayed
ranges: re-apply the changes by sequence, a replace replay as an append one (docs/keyed-tables.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi.testclient import TestClient

from tests.factories import Tenant, create_sandbox_pipeline
from tests.fixtures.kafka import SandboxKafka

_FORWARD = ("The replayed changes are re-applied per key, ordered {order}: a change sets a row only if it is newer "
            "than the one the row holds, so rows only move forward and replayed older changes are no-ops; a deleted "
            "key stays deleted unless a replayed change is newer than its delete.")
_AS_APPEND = " replay_mode replace behaves as append for a keyed table: nothing is taken out first."


def _keyed(client: TestClient, tenant: Tenant, sandbox_kafka: SandboxKafka, topic: str,
           **target: Any) -> dict[str, Any]:
    return create_sandbox_pipeline(
        client, tenant, sandbox_kafka.bootstrap_servers, [topic],
        source={"value_format": "json", "schema": "id BIGINT, name STRING, meta STRUCT<version: BIGINT>"},
        target={"type": "delta", "path": "silver/customers", "mode": "upsert", "key": ["id"], **target})


def _patch(client: TestClient, tenant: Tenant, pipe: dict[str, Any], body: dict[str, Any]) -> Any:
    response = client.patch(f"/pipelines/{pipe['id']}/offsets", json=body, headers=tenant.editor)
    assert response.status_code == 200, response.text
    return response.json()


def test_a_keyed_tables_dry_run_replay_says_the_changes_are_reapplied_by_sequence(
        client: TestClient, tenant: Tenant, sandbox_kafka: SandboxKafka, kafka_topic: Callable[..., str]) -> None:
    topic = kafka_topic(partitions=1)
    pipe = _keyed(client, tenant, sandbox_kafka, topic, sequence_by="meta.version")
    _patch(client, tenant, pipe, {"offsets": [{"topic": topic, "partition": 0, "offset": 0}]})
    before = client.get(f"/pipelines/{pipe['id']}/offsets", headers=tenant.viewer).headers["etag"]

    dry = _patch(client, tenant, pipe, {"reset": "earliest", "replay_mode": "replace", "dry_run": True})
    assert dry == {"dry_run": True, "mode": "earliest", "replay_mode": "replace", "etag": before,
                   "rows": [{"topic": topic, "partition": 0, "before": 0, "after": 0, "clamped": False,
                             "earliest": 0, "latest": 0}],
                   "keyed_table": {"key": ["id"], "sequence_by": "meta.version", "applied_as": "append",
                                   "detail": _FORWARD.format(order="by meta.version") + _AS_APPEND}}
    appended = _patch(client, tenant, pipe, {"shift_by": 0, "dry_run": True})
    assert appended["keyed_table"] == {"key": ["id"], "sequence_by": "meta.version", "applied_as": "append",
                                       "detail": _FORWARD.format(order="by meta.version")}


def test_a_keyed_table_ordered_by_offset_says_so_and_an_applied_change_keeps_the_note(
        client: TestClient, tenant: Tenant, sandbox_kafka: SandboxKafka, kafka_topic: Callable[..., str]) -> None:
    topic = kafka_topic(partitions=1)
    pipe = _keyed(client, tenant, sandbox_kafka, topic, changes="debezium")
    applied = _patch(client, tenant, pipe, {"reset": "earliest"})
    assert applied["dry_run"] is False and applied["keyed_table"] == {
        "key": ["id"], "sequence_by": None, "applied_as": "append",
        "detail": _FORWARD.format(order="by Kafka offset")}


def test_an_append_tables_replay_carries_no_keyed_note(
        client: TestClient, tenant: Tenant, sandbox_kafka: SandboxKafka, kafka_topic: Callable[..., str]) -> None:
    topic = kafka_topic(partitions=1)
    pipe = create_sandbox_pipeline(client, tenant, sandbox_kafka.bootstrap_servers, [topic])
    dry = _patch(client, tenant, pipe, {"reset": "earliest", "replay_mode": "replace", "dry_run": True})
    assert dry["keyed_table"] is None and dry["replay_mode"] == "replace"


def test_an_scd_type_2_tables_replay_says_replayed_changes_add_only_what_its_history_lacks(
        client: TestClient, tenant: Tenant, sandbox_kafka: SandboxKafka, kafka_topic: Callable[..., str]) -> None:
    topic = kafka_topic(partitions=1)
    pipe = _keyed(client, tenant, sandbox_kafka, topic, sequence_by="meta.version", scd_type=2)
    dry = _patch(client, tenant, pipe, {"reset": "earliest", "replay_mode": "replace", "dry_run": True})
    assert dry["keyed_table"] == {
        "key": ["id"], "sequence_by": "meta.version", "applied_as": "append",
        "detail": "The replayed changes are added to each key's history, ordered by meta.version: a change whose "
                  "sequence is already in the key's history adds nothing and closed versions stay closed; a change "
                  "the history lacks becomes a version between its neighbours by sequence." + _AS_APPEND}
