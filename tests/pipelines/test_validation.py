"""What a pipeline definition may say: topics, patterns, offsets, formats, schedules, Delta paths, sizes.

Each refusal is a 422 naming the field, and never echoes the refused value."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.core.config import Settings
from tests.factories import Tenant, assert_problem, create_connection, pipeline_body

SRC = "source"


def _src(**changes: Any) -> dict[str, Any]:
    return {"source": {**pipeline_body("{conn}")["source"], **changes}}


def _fill(value: Any, conn_id: str) -> Any:
    if isinstance(value, dict):
        return {k: _fill(v, conn_id) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, conn_id) for v in value]
    return conn_id if value == "{conn}" else value


ACCEPTED = [
    _src(topics=None, topic_pattern=r"^orders\.(eu|us)$"),
    _src(topics=["a.b_c-1", "x" * 249]),
    _src(starting_offsets="latest"),
    _src(starting_offsets={"orders": {"0": 42, "1": -2, "2": -1}}),
    _src(starting_timestamp="2026-11-01T00:00:00Z"),
    _src(starting_timestamp="2026-11-01T09:30:00+01:00", starting_timestamp_strategy="latest"),
    _src(value_format="raw", schema=None),
    _src(value_format="string", schema=None, include_headers=True, on_data_loss="skip"),
    _src(value_format="string", schema=None, key_format="raw"),
    _src(schema="id BIGINT NOT NULL, `user id` STRING COMMENT 'who', tags ARRAY<STRING>, "
                "attrs MAP<STRING, INT>, geo STRUCT<lat: DOUBLE, lon: DOUBLE>, amount DECIMAL(10, 2)"),
    {"schedule": {"cron": "0 3 * * 1-5", "timezone": "America/New_York"}},
    {"schedule": {"cron": "*/15 * * * *"}},
    {"schedule": {"interval_seconds": 10}},
    {"schedule": None},
    {"target": {"type": "delta", "path": "silver/orders_v2/year=2026", "partition_by": ["region", "day"]}},
    {"target": {"type": "delta", "path": "file://{root}/tenants/{tenant}/bronze/t"}},
    {"target": {"type": "kafka", "connection_id": "{conn}", "topic": "orders.copy"}},
    {"target": {"type": "kafka", "connection_id": "{conn}", "topic": "orders.copy",
                "create_topic": {"partitions": 6, "replication_factor": 3, "config": {"cleanup.policy": "compact"}}}},
    {"name": "a" * 100},
    # keyed tables (docs/keyed-tables.md)
    {"target": {"type": "delta", "path": "silver/orders", "mode": "upsert", "key": ["id"]}},
    {"target": {"type": "delta", "path": "silver/orders", "mode": "upsert", "key": ["id", "amount"],
                "sequence_by": "source.lsn", "changes": "debezium", "partition_by": ["id"]}},
    {**_src(schema="id BIGINT, meta STRUCT<v: BIGINT>"),
     "target": {"type": "delta", "path": "silver/orders", "mode": "upsert", "key": ["id"], "sequence_by": "meta.v"}},
    {"target": {"type": "delta", "path": "silver/orders", "mode": "upsert", "key": ["customer"], "key_from": "kafka_key",
                "partition_by": ["customer"]}},
    {"target": {"type": "delta", "path": "silver/orders", "mode": "upsert", "key": ["id"], "scd_type": 2}},
    {"target": {"type": "delta", "path": "silver/orders", "mode": "upsert", "key": ["id"], "scd_type": 1,
                "sequence_by": "source.lsn", "changes": "debezium"}},
    {"target": {"type": "delta", "path": "silver/orders", "mode": "upsert", "key": ["id"], "deletes": "soft"}},
    # Delta features Inlet creates the table with (docs/maintenance.md)
    {"target": {"type": "delta", "path": "t", "table_features": {"deletion_vectors": True, "cluster_by": ["id", "partition"]}}},
    {"target": {"type": "delta", "path": "t", "mode": "upsert", "key": ["id"], "table_features": {"deletion_vectors": True}}},
    {**_src(value_format="raw", schema=None), "target": {"type": "delta", "path": "t", "table_features": {"cluster_by": ["timestamp"]}}},
]


@pytest.mark.parametrize("overrides", ACCEPTED)
def test_accepted(client: TestClient, tenant: Tenant, settings: Settings, overrides: dict) -> None:
    conn = create_connection(client, tenant)
    body = _fill(pipeline_body(conn["id"], **overrides), conn["id"])
    if body["target"].get("path", "").startswith("file://"):
        body["target"]["path"] = body["target"]["path"].format(root=settings.resolved_storage_root, tenant=tenant.id)
    created = client.post("/pipelines", json=body, headers=tenant.editor)
    assert created.status_code == 201, created.text
    read = created.json()
    assert (read["name"], read["state"]) == (body["name"], body["state"])
    for key in ("source", "target", "schedule"):  # as written, plus the declared defaults
        written = body[key] or {}
        assert {k: (read[key] or {})[k] for k in written} == written


TOO_MANY = [f"t{i}" for i in range(101)]

REFUSED = [
    # topics and patterns
    (_src(topics=["bad topic!"]), "source.topics[0]"),
    (_src(topics=[".."]), "source.topics"),
    (_src(topics=["orders", "."]), "source.topics"),
    (_src(topics=["x" * 250]), "source.topics[0]"),
    (_src(topics=[]), "source.topics"),
    (_src(topics=TOO_MANY), "source.topics"),
    (_src(topics=["a", "a"]), "source.topics"),
    (_src(topic_pattern="orders.*"), "source"),
    (_src(topics=None), "source"),
    (_src(topics=None, topic_pattern="orders(["), "source.topic_pattern"),
    (_src(topics=None, topic_pattern="x" * 1001), "source.topic_pattern"),
    # offsets
    (_src(starting_offsets="newest"), "source.starting_offsets"),
    (_src(starting_offsets={"orders": {"p0": 1}}), "source.starting_offsets"),
    (_src(starting_offsets={"orders": {"0": -3}}), "source.starting_offsets"),
    (_src(starting_offsets={"refunds": {"0": 1}}), "source"),
    (_src(starting_offsets={}), "source.starting_offsets"),
    (_src(starting_timestamp="2026-11-01T00:00:00"), "source.starting_timestamp"),  # no zone: whose midnight?
    (_src(starting_timestamp="yesterday"), "source.starting_timestamp"),
    (_src(starting_timestamp="2026-11-01T00:00:00Z", starting_offsets="latest"), "source"),
    (_src(starting_timestamp="2026-11-01T00:00:00Z", starting_timestamp_strategy="earliest"),
     "source.starting_timestamp_strategy"),
    (_src(max_offsets_per_run=0), "source.max_offsets_per_run"),
    (_src(max_offsets_per_run=10**13), "source.max_offsets_per_run"),
    # formats and schemas
    (_src(value_format="xml"), "source.value_format"),
    (_src(value_format="avro", schema=None), "source.value_format"),  # the connection has no schema registry
    (_src(value_format="avro", schema=None, topics=["a", "b"]), "source"),  # which subject?
    (_src(value_format="protobuf", schema=None, value_schema={"version": 0}), "source.value_schema.version"),
    (_src(value_format="protobuf", schema=None, value_schema={"version": "3"}), "source.value_schema.version"),
    (_src(value_format="string", schema=None, value_schema={"subject": "s"}), "source"),
    (_src(value_format="string", schema=None, key_format="avro", topics=["a", "b"]), "source"),
    (_src(key_format="string"), "source"),  # json keys are strings
    (_src(schema=None), "source"),
    (_src(schema=""), "source"),
    (_src(schema="id BIGINTEGER"), "source"),
    (_src(schema="id BIGINT, id STRING"), "source"),
    (_src(schema="tags ARRAY<STRING"), "source"),
    (_src(schema="m MAP<STRING>"), "source"),
    (_src(schema="amount DOUBLE, offset BIGINT"), "source"),  # a column Inlet writes beside the decoded ones
    (_src(schema="_inlet_run_id STRING"), "source"),
    (_src(schema="id BIGINT" + ", c STRING" * 7000), "source.schema"),
    (_src(value_format="raw"), "source"),
    (_src(on_data_loss="ignore"), "source.on_data_loss"),
    (_src(connection_id="not-a-uuid"), "source.connection_id"),
    (_src(password="hunter2"), "source.password"),
    # schedules
    ({"schedule": {"cron": "61 * * * *"}}, "schedule"),
    ({"schedule": {"cron": "* * * * * *"}}, "schedule"),
    ({"schedule": {"cron": "every 5 minutes"}}, "schedule"),
    ({"schedule": {"cron": "0 0 31 2 *"}}, "schedule"),
    ({"schedule": {"cron": "*/5 * * * *", "timezone": "Mars/Olympus"}}, "schedule"),
    ({"schedule": {"cron": "*/5 * * * *", "timezone": "America"}}, "schedule"),
    ({"schedule": {"cron": "*/5 * * * *", "timezone": "../../etc/passwd"}}, "schedule"),
    ({"schedule": {"interval_seconds": 9}}, "schedule"),
    ({"schedule": {"interval_seconds": 60, "cron": "* * * * *"}}, "schedule"),
    # targets
    ({"target": {"type": "delta", "path": "/etc/inlet"}}, "target.path"),
    ({"target": {"type": "delta", "path": "~/inlet"}}, "target.path"),
    ({"target": {"type": "delta", "path": "\\\\server\\share"}}, "target.path"),
    ({"target": {"type": "delta", "path": "../other-tenant/t"}}, "target.path"),
    ({"target": {"type": "delta", "path": "bronze/../../x"}}, "target.path"),
    ({"target": {"type": "delta", "path": "bronze/./orders"}}, "target.path"),
    ({"target": {"type": "delta", "path": "bronze//orders"}}, "target.path"),
    ({"target": {"type": "delta", "path": "bronze/%2e%2e/orders"}}, "target.path"),
    ({"target": {"type": "delta", "path": "C:/data"}}, "target.path"),
    ({"target": {"type": "delta", "path": "http://example.com/t"}}, "target.path"),
    ({"target": {"type": "delta", "path": "s3://bucket/tenants/x/t"}}, "target.path"),
    ({"target": {"type": "delta", "path": "file:///etc/inlet"}}, "target.path"),
    ({"target": {"type": "delta", "path": "file://{root}/tenants/{other}/t"}}, "target.path"),
    ({"target": {"type": "delta", "path": "file://{root}/tenants/{tenant}/../{other}/t"}}, "target.path"),
    ({"target": {"type": "delta", "path": "file://{root}/tenants/{tenant}"}}, "target.path"),
    ({"target": {"type": "delta", "path": "FILE://{root}/tenants/{tenant}/t"}}, "target.path"),
    # (pydantic names a member of a tagged union by its tag: target.delta.*, target.kafka.*)
    ({"target": {"type": "delta", "path": "x" * 513}}, "target.delta.path"),
    ({"target": {"type": "delta", "path": "t", "partition_by": ["bad col"]}}, "target.delta.partition_by[0]"),
    ({"target": {"type": "delta", "path": "t", "partition_by": [f"c{i}" for i in range(9)]}},
     "target.delta.partition_by"),
    ({"target": {"type": "delta"}}, "target.delta.path"),
    ({"target": {"type": "iceberg", "path": "t"}}, "target"),
    ({"target": {"type": "kafka", "connection_id": "{conn}", "topic": "bad topic"}}, "target.kafka.topic"),
    ({"target": {"type": "kafka", "connection_id": "{conn}", "topic": "t", "path": "x"}}, "target.kafka.path"),
    ({"target": {"type": "kafka", "connection_id": "{conn}", "topic": "t", "create_topic": {"partitions": 0}}},
     "target.kafka.create_topic.partitions"),
    ({"target": {"type": "kafka", "connection_id": "{conn}", "topic": "t",
                 "create_topic": {"partitions": 1, "config": {"retention ms": "1"}}}}, "target.kafka.create_topic.config"),
    # keyed tables
    ({"target": {"type": "delta", "path": "t", "mode": "upsert"}}, "target.delta.key"),
    ({"target": {"type": "delta", "path": "t", "mode": "upsert", "key": []}}, "target.delta.key"),
    ({"target": {"type": "delta", "path": "t", "key": ["id"]}}, "target.delta.key"),
    ({"target": {"type": "delta", "path": "t", "changes": "debezium"}}, "target.delta.changes"),
    ({"target": {"type": "delta", "path": "t", "mode": "upsert", "key": ["id", "id"]}}, "target.delta.key"),
    ({"target": {"type": "delta", "path": "t", "mode": "merge", "key": ["id"]}}, "target.delta.mode"),
    ({"target": {"type": "delta", "path": "t", "mode": "upsert", "key": ["id"], "changes": "maxwell"}},
     "target.delta.changes"),
    ({"target": {"type": "delta", "path": "t", "mode": "upsert", "key": ["id"], "sequence_by": "a..b"}},
     "target.delta.sequence_by"),
    ({"target": {"type": "delta", "path": "t", "mode": "upsert", "key": ["customer"]}}, "target.key"),
    ({**_src(value_format="string", schema=None), "target": {"type": "delta", "path": "t", "mode": "upsert", "key": ["id"]}},
     "target.mode"),
    ({"target": {"type": "delta", "path": "t", "mode": "upsert", "key": ["id"], "sequence_by": "version"}},
     "target.sequence_by"),
    ({"target": {"type": "delta", "path": "t", "mode": "upsert", "key": ["id"], "changes": "debezium",
                 "sequence_by": "after.version"}}, "target.sequence_by"),
    ({"target": {"type": "delta", "path": "t", "mode": "upsert", "key": ["id"], "partition_by": ["partition"]}},
     "target.partition_by"),
    ({**_src(schema="id BIGINT, _inlet_sequence BIGINT"),
      "target": {"type": "delta", "path": "t", "mode": "upsert", "key": ["id"]}}, "source.schema"),
    ({"target": {"type": "delta", "path": "t", "key_from": "kafka_key"}}, "target.delta.key_from"),
    ({"target": {"type": "delta", "path": "t", "mode": "upsert", "key": ["a", "b"], "key_from": "kafka_key"}},
     "target.delta.key"),
    ({"target": {"type": "delta", "path": "t", "mode": "upsert", "key": ["k"], "key_from": "kafka_key",
                 "changes": "debezium"}}, "target.delta.key_from"),
    ({"target": {"type": "delta", "path": "t", "mode": "upsert", "key": ["id"], "key_from": "kafka_key"}}, "target.key"),
    ({"target": {"type": "delta", "path": "t", "mode": "upsert", "key": ["k"], "key_from": "headers"}},
     "target.delta.key_from"),
    # SCD type 2 (history rows)
    ({"target": {"type": "delta", "path": "t", "scd_type": 2}}, "target.delta.scd_type"),
    ({"target": {"type": "delta", "path": "t", "mode": "append", "scd_type": 1}}, "target.delta.scd_type"),
    ({"target": {"type": "delta", "path": "t", "mode": "upsert", "key": ["id"], "scd_type": 3}}, "target.delta.scd_type"),
    ({"target": {"type": "delta", "path": "t", "mode": "upsert", "key": ["id"], "scd_type": "2"}}, "target.delta.scd_type"),
    # Soft deletes: a keyed table's, of the latest row per key
    ({"target": {"type": "delta", "path": "t", "deletes": "soft"}}, "target.delta.deletes"),
    ({"target": {"type": "delta", "path": "t", "mode": "upsert", "key": ["id"], "deletes": "soft", "scd_type": 2}},
     "target.delta.deletes"),
    ({"target": {"type": "delta", "path": "t", "mode": "upsert", "key": ["id"], "deletes": "hard"}}, "target.delta.deletes"),
    ({**_src(schema="id BIGINT, _inlet_valid_to BIGINT"),
      "target": {"type": "delta", "path": "t", "mode": "upsert", "key": ["id"], "scd_type": 2}}, "source.schema"),
    ({**_src(value_format="string", schema=None),
      "target": {"type": "delta", "path": "t", "mode": "upsert", "key": ["id"], "scd_type": 2}}, "target.mode"),
    # Inlet's namespace, in any case and for every table; the Kafka key's column apart from the fields
    ({**_src(schema="id BIGINT, _Inlet_Current BOOLEAN")}, "source.schema"),
    ({**_src(schema="id BIGINT, _inlet_partition INT"),
      "target": {"type": "delta", "path": "t", "mode": "upsert", "key": ["id"]}}, "source.schema"),
    ({"target": {"type": "delta", "path": "t", "mode": "upsert", "key": ["_inlet_run_id"], "key_from": "kafka_key"}},
     "target.key"),
    ({"target": {"type": "delta", "path": "t", "mode": "upsert", "key": ["ID"], "key_from": "kafka_key"}}, "target.key"),
    ({"target": {"type": "delta", "path": "t", "mode": "upsert", "key": ["k"], "key_from": "kafka_key",
                 "sequence_by": "k"}}, "target.sequence_by"),
    # Delta features Inlet creates the table with
    ({"target": {"type": "delta", "path": "t", "partition_by": ["id"], "table_features": {"cluster_by": ["id"]}}},
     "target.delta.table_features.cluster_by"),
    ({"target": {"type": "delta", "path": "t", "table_features": {"cluster_by": ["id"]},
                 "maintenance": {"compaction": {"z_order_by": ["amount"]}}}}, "target.delta.table_features.cluster_by"),
    ({"target": {"type": "delta", "path": "t", "mode": "upsert", "key": ["id"], "table_features": {"cluster_by": ["id"]}}},
     "target.delta.table_features.cluster_by"),
    ({"target": {"type": "delta", "path": "t", "table_features": {"cluster_by": ["id", "id"]}}},
     "target.delta.table_features.cluster_by"),
    ({"target": {"type": "delta", "path": "t", "table_features": {"cluster_by": ["customer"]}}},
     "target.table_features.cluster_by"),
    ({"target": {"type": "delta", "path": "t", "table_features": {"cluster_by": ["a", "b", "c", "d", "e"]}}},
     "target.delta.table_features.cluster_by"),
    ({"target": {"type": "delta", "path": "t", "mode": "upsert", "key": ["id"], "scd_type": 2,
                 "table_features": {"deletion_vectors": True}}}, "target.delta.table_features.deletion_vectors"),
    ({"target": {"type": "delta", "path": "t", "table_features": {"uniform": True}}}, "target.delta.table_features.uniform"),
    # the pipeline itself
    ({"name": ""}, "name"),
    ({"name": "a" * 101}, "name"),
    ({"name": "with space"}, "name"),
    ({"state": "running"}, "state"),
    ({"owner": "me"}, "owner"),
]


@pytest.mark.parametrize(("overrides", "field"), REFUSED)
def test_refused(client: TestClient, tenant: Tenant, settings: Settings, request: pytest.FixtureRequest, overrides: dict,
                 field: str) -> None:
    conn = create_connection(client, tenant)
    body = _fill(pipeline_body(conn["id"], **overrides), conn["id"])
    path = body["target"].get("path")
    if isinstance(path, str) and "{root}" in path:
        other = request.getfixturevalue("other_tenant").id if "{other}" in path else None
        body["target"]["path"] = path.format(root=settings.resolved_storage_root, tenant=tenant.id, other=other)
    response = client.post("/pipelines", json=body, headers=tenant.editor)
    problem = assert_problem(response, 422)
    fields = [e["field"] for e in problem["errors"]]
    assert any(f == field or f.startswith(field + ".") for f in fields), fields
    assert client.get("/pipelines", headers=tenant.viewer).json()["total"] == 0
    # No refused value comes back (it could be a secret pasted into the wrong field).
    changed = {**overrides.get("source", {}), **overrides.get("target", {}), **(overrides.get("schedule") or {})}
    changed |= {k: v for k, v in overrides.items() if k not in {"source", "target", "schedule"}}
    for key, value in changed.items():
        if isinstance(value, str) and len(value) > 3 and value != body["source"].get("connection_id") \
                and value not in {"delta", "kafka"} and key in field.replace("[", ".").split(".") + ["cron", "timezone",
                                                                                                    "schema", "path"]:
            assert value not in response.text, f"{value!r} echoed: {response.text}"


def test_same_field_names_from_post_and_patch(client: TestClient, tenant: Tenant) -> None:
    conn = create_connection(client, tenant)
    bad = {"schedule": {"cron": "61 * * * *", "timezone": "UTC"}, "source": {**pipeline_body(conn["id"])["source"], "topics": ["a b"]}}
    posted = assert_problem(client.post("/pipelines", json=pipeline_body(conn["id"], **bad), headers=tenant.editor), 422)
    pipeline = client.post("/pipelines", json=pipeline_body(conn["id"]), headers=tenant.editor).json()
    patched = assert_problem(client.patch(f"/pipelines/{pipeline['id']}", json=bad, headers=tenant.editor), 422)
    put = assert_problem(client.put(f"/pipelines/{pipeline['id']}", json=pipeline_body(conn["id"], **bad),
                                    headers=tenant.editor), 422)
    assert posted["errors"] == patched["errors"] == put["errors"]
    assert "source.topics[0]" in {e["field"] for e in posted["errors"]}


@pytest.mark.parametrize("body", [None, [], "pipeline", {"name": "p"}])
def test_malformed_bodies(client: TestClient, tenant: Tenant, body: Any) -> None:
    assert_problem(client.post("/pipelines", json=body, headers=tenant.editor), 422)


def test_not_json_is_422(client: TestClient, tenant: Tenant) -> None:
    response = client.post("/pipelines", content=b"{not json", headers={**tenant.editor, "Content-Type": "application/json"})
    assert_problem(response, 422)


def test_a_schema_reusing_inlet_columns_is_refused(client: TestClient, tenant: Tenant) -> None:
    """The job would refuse it at the first run (``invalid_spec``); the API says so when it is defined."""
    conn = create_connection(client, tenant)
    body = _fill(pipeline_body(conn["id"], **_src(schema="amount DOUBLE, offset BIGINT, `key` STRING")), conn["id"])
    problem = assert_problem(client.post("/pipelines", json=body, headers=tenant.editor), 422)
    assert [e["field"] for e in problem["errors"]] == ["source.schema"]  # the rule's field, not its model
    assert problem["errors"][0]["message"] == (
        "Value error, schema: fields key, offset clash with the columns Inlet writes beside the decoded ones "
        "(_inlet_quarantine_reason, _inlet_raw_key, _inlet_raw_value, _inlet_run_id, headers, key, offset, "
        "partition, timestamp, timestampType, topic, value, and every name starting with _inlet_); rename them")


def test_value_may_name_a_variant_column_the_whole_value_and_no_other(client: TestClient, tenant: Tenant) -> None:
    """``value VARIANT`` is the record's whole value (docs/formats.md); ``value`` of any other type is refused."""
    conn = create_connection(client, tenant)
    whole = client.post("/pipelines", json=_fill(pipeline_body(conn["id"], **_src(schema="value VARIANT, id BIGINT")),
                                                 conn["id"]), headers=tenant.editor)
    assert whole.status_code == 201, whole.text
    assert whole.json()["source"]["schema"] == "value VARIANT, id BIGINT"
    typed = _fill(pipeline_body(conn["id"], **_src(schema="value STRING, id BIGINT")), conn["id"])
    problem = assert_problem(client.post("/pipelines", json=typed, headers=tenant.editor), 422)
    assert "fields value clash" in problem["errors"][0]["message"]


@pytest.mark.parametrize(("changes", "field", "message"), [
    ({"contract": {"sensitive": [{"field": "email", "action": "hash"}]}}, "contract.sensitive",
     "whole value kept as a VARIANT"),
    ({"target": {"type": "delta", "path": "bronze/p", "partition_by": ["value"]}}, "target.partition_by",
     "no value to partition or cluster by"),
    ({"target": {"type": "delta", "path": "bronze/p", "table_features": {"cluster_by": ["attrs"]}}},
     "target.table_features.cluster_by", "no value to partition or cluster by"),
])
def test_what_a_variant_column_cannot_be(client: TestClient, tenant: Tenant, changes: dict[str, Any], field: str,
                                          message: str) -> None:
    conn = create_connection(client, tenant)
    body = _fill(pipeline_body(conn["id"], **_src(schema="value VARIANT, email STRING, attrs VARIANT"), **changes),
                 conn["id"])
    problem = assert_problem(client.post("/pipelines", json=body, headers=tenant.editor), 422)
    assert [e["field"] for e in problem["errors"]] == [field] and message in problem["errors"][0]["message"]


def test_a_keyed_table_takes_no_variant_column(client: TestClient, tenant: Tenant) -> None:
    conn = create_connection(client, tenant)
    body = _fill(pipeline_body(conn["id"], **_src(schema="id BIGINT, attrs STRUCT<extra: VARIANT>"),
                               target={"type": "delta", "path": "silver/p", "mode": "upsert", "key": ["id"]}), conn["id"])
    problem = assert_problem(client.post("/pipelines", json=body, headers=tenant.editor), 422)
    assert [e["field"] for e in problem["errors"]] == ["source.schema"]
    assert "MERGE does not carry VARIANT" in problem["errors"][0]["message"]


REGISTRY_SOURCE = {"value_format": "avro", "schema": None}
KEYED_REGISTRY_ACCEPTED = [
    ({}, {"mode": "upsert", "key": ["id"], "sequence_by": "source.lsn", "changes": "debezium"}),
    ({"key_format": "avro"}, {"mode": "upsert", "key": ["id"], "sequence_by": "ts_ms", "changes": "debezium",
                              "scd_type": 2}),
    ({"value_format": "protobuf"}, {"mode": "upsert", "key": ["id"], "sequence_by": "meta.version", "partition_by": ["region"]}),
    ({"value_format": "json_schema", "value_schema": {"subject": "orders-value", "version": 3}},
     {"mode": "upsert", "key": ["customer"], "key_from": "kafka_key"}),
]


@pytest.mark.parametrize(("source", "target"), KEYED_REGISTRY_ACCEPTED)
def test_a_keyed_table_of_a_registry_format_is_accepted(client: TestClient, tenant: Tenant, source: dict,
                                                        target: dict) -> None:
    """Its fields are the registry schema's, which the API does not fetch: each run checks the key,
    sequence_by and partition_by against it (docs/keyed-tables.md)."""
    conn = create_connection(client, tenant, schema_registry={"url": "https://registry.example.com:8081"})
    body = _fill(pipeline_body(conn["id"], **_src(**{**REGISTRY_SOURCE, **source}),
                               target={"type": "delta", "path": "silver/orders", **target}), conn["id"])
    created = client.post("/pipelines", json=body, headers=tenant.editor)
    assert created.status_code == 201, created.text
    read = created.json()
    for part in ("source", "target"):  # as written
        assert {k: read[part][k] for k in body[part]} == body[part]


@pytest.mark.parametrize(("source", "target", "field"), [
    ({"key_format": "avro"}, {"key": ["customer"], "key_from": "kafka_key"}, "target.key_from"),
    ({}, {"key": ["id"], "changes": "debezium", "sequence_by": "after.version"}, "target.sequence_by"),
    ({"value_format": "raw"}, {"key": ["id"]}, "target.mode"),
    ({}, {"key": ["_Inlet_key"], "key_from": "kafka_key"}, "target.key"),
])
def test_what_a_keyed_table_of_a_registry_format_refuses(client: TestClient, tenant: Tenant, source: dict, target: dict,
                                                         field: str) -> None:
    conn = create_connection(client, tenant, schema_registry={"url": "https://registry.example.com:8081"})
    body = _fill(pipeline_body(conn["id"], **_src(**{**REGISTRY_SOURCE, **source}),
                               target={"type": "delta", "path": "silver/orders", "mode": "upsert", **target}), conn["id"])
    problem = assert_problem(client.post("/pipelines", json=body, headers=tenant.editor), 422)
    assert [e["field"] for e in problem["errors"]] == [field]
    assert client.get("/pipelines", headers=tenant.viewer).json()["total"] == 0
