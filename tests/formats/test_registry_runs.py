"""Registry formats for real: Avro, Protobuf and JSON Schema records in the Confluent wire format, on a
real Kafka broker, with schemas in a real Schema Registry (Karapace), through the whole product:
HTTP API → Redis → Celery worker → Spark → Delta.

Each format lands exactly once with the column types its subject's schema gives; a compatible
evolution adds columns, an incompatible one fails the run naming the subject, the versions and the
field, and writes nothing; records the registry cannot account for go to quarantine with a reason;
refused registry credentials fail at once, a registry that stops answering is retried. Spark with
delta-spark reads every table these runs write as delta-rs does (``delta_spark``).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2

from tests.factories import create_pipeline, make_tenant, plaintext_connection_body
from tests.fixtures.schema_registry import AUTH_USER, unique_subject
from tests.fixtures.wire_format import avro_encoder, confluent_frame, produce_framed
from tests.runs.helpers import committed_offsets, delta_coordinates, wait_for_run

pytestmark = pytest.mark.slow

ORDER_V1 = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"},
    {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
    {"name": "placed_at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}},
    {"name": "note", "type": ["null", "string"], "default": None},
    {"name": "lines", "type": {"type": "array", "items": {"type": "record", "name": "Line", "fields": [
        {"name": "sku", "type": "string"}, {"name": "qty", "type": "int"}]}}},
    {"name": "attrs", "type": {"type": "map", "values": "string"}},
]}
ORDER_V2 = {**ORDER_V1, "fields": [*ORDER_V1["fields"], {"name": "channel", "type": ["null", "string"], "default": None}]}
ORDER_V3_INCOMPATIBLE = {**ORDER_V1, "fields": [
    f if f["name"] != "id" else {"name": "id", "type": "string"} for f in ORDER_V2["fields"]]}

ORDER_PROTO = """
syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
message Order {
  int64 id = 1;
  double amount = 2;
  google.protobuf.Timestamp placed_at = 3;
  Status status = 4;
  repeated Line lines = 5;
  map<string, string> attrs = 6;
  oneof payment { string card = 7; string iban = 8; }
  uint64 big = 9;
  enum Status { NEW = 0; PAID = 1; }
  message Line { string sku = 1; int32 qty = 2; }
}
"""

ORDER_JSON_SCHEMA = {"type": "object", "properties": {
    "id": {"type": "integer"}, "amount": {"type": "number"},
    "placed_at": {"type": "string", "format": "date-time"}, "status": {"enum": ["NEW", "PAID"]},
    "lines": {"type": "array", "items": {"$ref": "#/definitions/Line"}},
    "attrs": {"type": "object", "additionalProperties": {"type": "string"}},
    "note": {"type": ["string", "null"]},
}, "definitions": {"Line": {"type": "object", "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}}}}}

PLACED = dt.datetime(2026, 11, 24, 8, 30, tzinfo=dt.UTC)


def _order_class() -> type:
    """``ORDER_PROTO``'s Order as protoc describes it, built here: the producer's side owes nothing to
    the registry's serialized form, which Inlet decodes with (Karapace's differs for maps)."""
    F = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(name="order.proto", package="shop", syntax="proto3",
                                              dependency=["google/protobuf/timestamp.proto"])
    order = file.message_type.add(name="Order")
    for name, number, kind, type_name, label in (
            ("id", 1, F.TYPE_INT64, "", F.LABEL_OPTIONAL), ("amount", 2, F.TYPE_DOUBLE, "", F.LABEL_OPTIONAL),
            ("placed_at", 3, F.TYPE_MESSAGE, ".google.protobuf.Timestamp", F.LABEL_OPTIONAL),
            ("status", 4, F.TYPE_ENUM, ".shop.Order.Status", F.LABEL_OPTIONAL),
            ("lines", 5, F.TYPE_MESSAGE, ".shop.Order.Line", F.LABEL_REPEATED),
            ("attrs", 6, F.TYPE_MESSAGE, ".shop.Order.AttrsEntry", F.LABEL_REPEATED),
            ("big", 9, F.TYPE_UINT64, "", F.LABEL_OPTIONAL)):
        order.field.add(name=name, number=number, type=kind, label=label, **({"type_name": type_name} if type_name else {}))
    order.oneof_decl.add(name="payment")
    for name, number in (("card", 7), ("iban", 8)):
        order.field.add(name=name, number=number, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL, oneof_index=0)
    order.enum_type.add(name="Status", value=[descriptor_pb2.EnumValueDescriptorProto(name="NEW", number=0),
                                              descriptor_pb2.EnumValueDescriptorProto(name="PAID", number=1)])
    line = order.nested_type.add(name="Line")
    line.field.add(name="sku", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    line.field.add(name="qty", number=2, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL)
    entry = order.nested_type.add(name="AttrsEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    known = descriptor_pb2.FileDescriptorProto()
    timestamp_pb2.DESCRIPTOR.CopyToProto(known)
    pool.Add(known)
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))


def _registry_connection(client, tenant, real_kafka, registry, **registry_settings: Any) -> dict[str, Any]:
    body = plaintext_connection_body(real_kafka.bootstrap_servers, schema_registry={"url": registry.url, **registry_settings})
    created = client.post("/connections", json=body, headers=tenant.editor)
    assert created.status_code == 201, created.text
    return created.json()


def _pipeline(client, tenant, conn: dict[str, Any], topic: str, value_format: str, name: str, **source: Any) -> dict[str, Any]:
    return create_pipeline(client, tenant, conn["id"], name=name, schedule=None, state="paused",
                           source={"connection_id": conn["id"], "topics": [topic], "value_format": value_format, **source},
                           target={"type": "delta", "path": f"bronze/{name}"})


def _run(stack, tenant, pipeline: dict[str, Any]) -> dict[str, Any]:
    triggered = stack.client.post(f"/pipelines/{pipeline['id']}/runs", headers=tenant.editor)
    assert triggered.status_code == 202, triggered.text
    return wait_for_run(stack, triggered.json()["id"], tenant.viewer)


def _succeeded(stack, tenant, pipeline: dict[str, Any]) -> dict[str, Any]:
    run = _run(stack, tenant, pipeline)
    assert run["state"] == "succeeded", (run, stack.log_text())
    return run


def _table(uri: str) -> pa.Table:
    return DeltaTable(uri).to_pyarrow_table().sort_by([("partition", "ascending"), ("offset", "ascending")])


def _types(uri: str, names: list[str]) -> dict[str, str]:
    schema = pa.schema(DeltaTable(uri).schema().to_arrow())
    return {n: str(schema.field(n).type).replace("large_", "").replace("string_view", "string") for n in names}


def test_avro_protobuf_and_json_schema_topics_land_exactly_once_with_their_column_types(
        stack, real_kafka, real_topic, real_registry, delta_spark) -> None:
    client = stack.client
    tenant = make_tenant(client)
    conn = _registry_connection(client, tenant, real_kafka, real_registry)
    topics = {fmt: real_topic(partitions=2) for fmt in ("avro", "protobuf", "json_schema")}

    avro_id = real_registry.register(f"{topics['avro']}-value", json.dumps(ORDER_V1))
    encode = avro_encoder(json.dumps(ORDER_V1))
    avro_values = [confluent_frame(avro_id, encode({
        "id": i, "amount": Decimal(f"{i}.25"), "placed_at": PLACED, "status": "PAID" if i % 2 else "NEW",
        "note": None if i % 3 else f"note {i}", "lines": [{"sku": f"s{i}", "qty": i}], "attrs": {"k": str(i)},
    })) for i in range(10)]
    proto_id = real_registry.register(f"{topics['protobuf']}-value", ORDER_PROTO, "PROTOBUF")
    Order = _order_class()
    proto_values = []
    for i in range(10):
        order = Order(id=i, amount=i + 0.5, status=i % 2, attrs={"k": str(i)}, big=2**64 - 1 - i)
        order.placed_at.FromDatetime(PLACED)
        order.lines.add(sku=f"s{i}", qty=i)
        if i % 2:
            order.card = f"card-{i}"
        proto_values.append(confluent_frame(proto_id, order.SerializeToString(), [0]))
    json_id = real_registry.register(f"{topics['json_schema']}-value", json.dumps(ORDER_JSON_SCHEMA), "JSON")
    json_values = [confluent_frame(json_id, json.dumps({
        "id": i, "amount": i + 0.75, "placed_at": PLACED.isoformat(), "status": "NEW", "lines": [{"sku": f"s{i}", "qty": i}],
        "attrs": {"k": str(i)}, "note": None, "ignored": True,
    }).encode()) for i in range(10)]
    for fmt, values in (("avro", avro_values), ("protobuf", proto_values), ("json_schema", json_values)):
        produce_framed(real_kafka.bootstrap_servers, topics[fmt], values[:5], partition=0)
        produce_framed(real_kafka.bootstrap_servers, topics[fmt], values[5:], partition=1)
    pipelines = {fmt: _pipeline(client, tenant, conn, topics[fmt], fmt, f"orders-{fmt.replace('_', '-')}") for fmt in topics}
    stack.start_worker()

    for fmt, pipeline in pipelines.items():
        run = _succeeded(stack, tenant, pipeline)
        assert (run["records_read"], run["rows_written"], run["rows_quarantined"]) == (10, 10, 0), (fmt, run)

    avro_uri = pipelines["avro"]["status"]["target_uri"]
    assert _types(avro_uri, ["key", "id", "amount", "placed_at", "status", "note", "lines", "attrs"]) == {
        "key": "string", "id": "int64", "amount": "decimal128(10, 2)", "placed_at": "timestamp[us, tz=UTC]",
        "status": "string", "note": "string", "lines": "list<element: struct<sku: string, qty: int32>>",
        "attrs": "map<string, string>",
    }
    row = _table(avro_uri).to_pylist()[3]
    assert {k: row[k] for k in ("id", "amount", "status", "note", "lines")} == {
        "id": 3, "amount": Decimal("3.25"), "status": "PAID", "note": "note 3", "lines": [{"sku": "s3", "qty": 3}]}
    assert row["placed_at"] == PLACED and dict(row["attrs"]) == {"k": "3"}

    proto_uri = pipelines["protobuf"]["status"]["target_uri"]
    assert _types(proto_uri, ["id", "amount", "placed_at", "status", "lines", "attrs", "card", "iban", "big"]) == {
        "id": "int64", "amount": "double", "placed_at": "timestamp[us, tz=UTC]", "status": "string",
        "lines": "list<element: struct<sku: string, qty: int32>>", "attrs": "map<string, string>",
        "card": "string", "iban": "string", "big": "decimal128(20, 0)",
    }
    rows = _table(proto_uri).to_pylist()
    assert [(r["id"], r["status"], r["card"], r["iban"], r["big"]) for r in rows[:2]] == [
        (0, "NEW", None, None, Decimal(2**64 - 1)), (1, "PAID", "card-1", None, Decimal(2**64 - 2))]
    assert rows[1]["placed_at"] == PLACED and rows[1]["lines"] == [{"sku": "s1", "qty": 1}]

    json_uri = pipelines["json_schema"]["status"]["target_uri"]
    assert _types(json_uri, ["id", "amount", "placed_at", "status", "lines", "attrs", "note"]) == {
        "id": "int64", "amount": "double", "placed_at": "timestamp[us, tz=UTC]", "status": "string",
        # Karapace serves a JSON schema with its keys sorted, so the properties come in that order.
        "lines": "list<element: struct<qty: int64, sku: string>>", "attrs": "map<string, string>", "note": "string",
    }
    assert "ignored" not in DeltaTable(json_uri).schema().to_arrow().names

    # More records, another run: every record of each topic once.
    produce_framed(real_kafka.bootstrap_servers, topics["avro"], avro_values[:3], partition=0)
    assert _succeeded(stack, tenant, pipelines["avro"])["records_read"] == 3
    for fmt, pipeline in pipelines.items():
        expected = {"avro": [(0, 8), (1, 5)]}.get(fmt, [(0, 5), (1, 5)])
        assert delta_coordinates(pipeline["status"]["target_uri"]) == sorted(
            (topics[fmt], p, o) for p, n in expected for o in range(n)), fmt
        assert committed_offsets(stack.settings.resolved_database_url, pipeline["id"]) == {
            (topics[fmt], p): n for p, n in expected}
        delta_spark.assert_reads_alike(pipeline["status"]["target_uri"], _table(pipeline["status"]["target_uri"]))


def test_a_compatible_evolution_adds_columns_and_an_incompatible_one_fails_naming_the_field(
        stack, real_kafka, real_topic, real_registry, delta_spark) -> None:
    client = stack.client
    tenant = make_tenant(client)
    conn = _registry_connection(client, tenant, real_kafka, real_registry)
    topic = real_topic(partitions=1)
    subject = f"{topic}-value"

    def produce(schema: dict[str, Any], schema_id: int, ids: range, **extra: Any) -> None:
        encode = avro_encoder(json.dumps(schema))
        produce_framed(real_kafka.bootstrap_servers, topic, [confluent_frame(schema_id, encode({
            "id": i, "amount": Decimal("1.00"), "placed_at": PLACED, "status": "NEW", "note": None, "lines": [],
            "attrs": {}, **extra})) for i in ids], partition=0)

    v1 = real_registry.register(subject, json.dumps(ORDER_V1))
    produce(ORDER_V1, v1, range(4))
    pipeline = _pipeline(client, tenant, conn, topic, "avro", "evolving")
    pinned = _pipeline(client, tenant, conn, topic, "avro", "pinned", value_schema={"version": 1})
    uri = pipeline["status"]["target_uri"]
    stack.start_worker()
    _succeeded(stack, tenant, pipeline)
    assert "channel" not in DeltaTable(uri).schema().to_arrow().names

    # A producer moves to version 2 (a field added with a default: BACKWARD compatible) mid-stream.
    v2 = real_registry.register(subject, json.dumps(ORDER_V2))
    produce(ORDER_V1, v1, range(4, 6))
    produce(ORDER_V2, v2, range(6, 9), channel="web")
    run = _succeeded(stack, tenant, pipeline)
    assert (run["records_read"], run["rows_written"]) == (5, 5)
    assert _types(uri, ["channel"]) == {"channel": "string"}
    rows = _table(uri).to_pylist()
    # Rows of version 1 read after the evolution take the field's default; those written before stay null.
    assert [(r["id"], r["channel"]) for r in rows] == [(i, None) for i in range(6)] + [(i, "web") for i in range(6, 9)]
    delta_spark.assert_reads_alike(uri, _table(uri))  # the column added by a schema-evolution commit
    version = DeltaTable(uri).version()
    # Pinned to version 1, the same records are read as version 1: no new column, none lost.
    assert _succeeded(stack, tenant, pinned)["rows_written"] == 9
    assert "channel" not in DeltaTable(pinned["status"]["target_uri"]).schema().to_arrow().names
    assert [r["id"] for r in _table(pinned["status"]["target_uri"]).to_pylist()] == list(range(9))

    # Version 3 changes id from long to string: the registry allows it once compatibility is off, the table cannot.
    real_registry.set_compatibility(subject, "NONE")
    v3 = real_registry.register(subject, json.dumps(ORDER_V3_INCOMPATIBLE))
    encode = avro_encoder(json.dumps(ORDER_V3_INCOMPATIBLE))
    produce_framed(real_kafka.bootstrap_servers, topic, [confluent_frame(v3, encode({
        "id": "x", "amount": Decimal("1.00"), "placed_at": PLACED, "status": "NEW", "note": None, "lines": [], "attrs": {},
        "channel": None}))], partition=0)
    failed = _run(stack, tenant, pipeline)
    assert (failed["state"], failed["attempt"], failed["error"]["kind"]) == ("failed", 1, "schema_incompatible"), failed
    assert failed["error"]["message"] == (
        f"subject {subject!r} version 3 (schema id {v3}) cannot go into {_as_tenant_reads(uri)}: field id is int64 in "
        "the table and "
        f"string in the schema (last written from {subject} version 2 (schema id {v2}))")
    assert DeltaTable(uri).version() == version  # nothing written, not even a schema change
    assert committed_offsets(stack.settings.resolved_database_url, pipeline["id"]) == {(topic, 0): 9}
    # The pinned pipeline cannot read a long from version 3's string either: Avro's resolution says so.
    refused = _run(stack, tenant, pinned)
    assert (refused["state"], refused["error"]["kind"]) == ("failed", "schema_incompatible"), refused
    assert refused["error"]["message"].startswith(f"value schema id {v3} cannot be read as subject {subject!r} version 1 ")


def test_records_the_registry_cannot_account_for_go_to_quarantine_with_the_reason(
        stack, real_kafka, real_topic, real_registry, delta_spark) -> None:
    client = stack.client
    tenant = make_tenant(client)
    conn = _registry_connection(client, tenant, real_kafka, real_registry)
    topic = real_topic(partitions=1)
    schema = {"type": "record", "name": "Reading", "fields": [{"name": "celsius", "type": "double"}]}
    schema_id = real_registry.register(f"{topic}-value", json.dumps(schema))
    good = confluent_frame(schema_id, avro_encoder(json.dumps(schema))({"celsius": 21.5}))
    values = [good, confluent_frame(99_999, b"\x00" * 8), confluent_frame(schema_id, b"\x01"), b'{"celsius": 3}', good]
    produce_framed(real_kafka.bootstrap_servers, topic, values, partition=0)
    pipeline = _pipeline(client, tenant, conn, topic, "avro", "quarantining")
    stack.start_worker()

    run = _succeeded(stack, tenant, pipeline)

    assert (run["records_read"], run["rows_written"], run["rows_quarantined"]) == (5, 2, 3)
    uri = pipeline["status"]["target_uri"]
    assert [(r["offset"], r["celsius"]) for r in _table(uri).to_pylist()] == [(0, 21.5), (4, 21.5)]
    quarantined = DeltaTable(f"{uri}__quarantine").to_pyarrow_table().sort_by("offset").to_pylist()
    assert [(r["offset"], r["value"]) for r in quarantined] == [(1, values[1]), (2, values[2]), (3, values[3])]
    reasons = [r["_inlet_quarantine_reason"] for r in quarantined]
    assert reasons[0] == "value names schema id 99999, which the registry does not know"
    assert reasons[1].startswith(f"value does not decode with schema id {schema_id}: ")
    assert reasons[2] == "value is not in the Confluent wire format (magic byte 0 and a schema id)"
    delta_spark.assert_reads_alike(f"{uri}__quarantine", DeltaTable(f"{uri}__quarantine").to_pyarrow_table())
    assert committed_offsets(stack.settings.resolved_database_url, pipeline["id"]) == {(topic, 0): 5}


def test_refused_registry_credentials_fail_a_run_at_once_and_quietly(
        stack, real_kafka, real_topic, real_registry_with_auth) -> None:
    client = stack.client
    tenant = make_tenant(client)
    wrong = "not-the-registry-password-5e1f"
    conn = _registry_connection(client, tenant, real_kafka, real_registry_with_auth,
                                credentials={"username": AUTH_USER, "password": wrong})
    topic = real_topic(partitions=1)
    produce_framed(real_kafka.bootstrap_servers, topic, [confluent_frame(1, b"\x02")], partition=0)
    pipeline = _pipeline(client, tenant, conn, topic, "avro", "refused", value_schema={"subject": unique_subject()})
    stack.start_worker()

    run = _run(stack, tenant, pipeline)

    assert (run["state"], run["attempt"], run["error"]["kind"]) == ("failed", 1, "registry_auth"), run  # not retried
    assert run["error"]["message"].startswith(f"schema registry {real_registry_with_auth.url} refused the credentials (401")
    log = client.get(f"/runs/{run['id']}/log", headers=tenant.viewer).text
    assert wrong not in str(run) + log + stack.log_text()


def test_a_registry_that_stops_answering_mid_run_is_retried_like_kafka(
        stack, real_kafka, real_topic, real_registry) -> None:
    client = stack.client
    tenant = make_tenant(client)
    conn = _registry_connection(client, tenant, real_kafka, real_registry)
    topic = real_topic(partitions=1)
    schema = {"type": "record", "name": "Ping", "fields": [{"name": "n", "type": "int"}]}
    schema_id = real_registry.register(f"{topic}-value", json.dumps(schema))
    encode = avro_encoder(json.dumps(schema))
    produce_framed(real_kafka.bootstrap_servers, topic, [confluent_frame(schema_id, encode({"n": n})) for n in range(20)],
                   partition=0)
    pipeline = _pipeline(client, tenant, conn, topic, "avro", "registry-down")
    stack.start_worker()
    pid = int((real_registry.run_dir / "karapace.pid").read_text())

    os.kill(pid, signal.SIGSTOP)  # it accepts connections and never answers, as a hung registry does
    try:
        run_id = client.post(f"/pipelines/{pipeline['id']}/runs", headers=tenant.editor).json()["id"]
        stack.wait_for(lambda: client.get(f"/runs/{run_id}", headers=tenant.viewer).json()["attempt"] >= 2,
                       timeout_s=120, what="the first attempt to fail and a retry to be planned")
    finally:
        os.kill(pid, signal.SIGCONT)

    run = wait_for_run(stack, run_id, tenant.viewer)
    assert run["state"] == "succeeded", (run, stack.log_text())
    log = client.get(f"/runs/{run_id}/log", headers=tenant.viewer).text
    assert f"schema registry {real_registry.url} did not answer" in log, log
    assert [r["n"] for r in _table(pipeline["status"]["target_uri"]).to_pylist()] == list(range(20))


def test_keys_decode_with_a_subject_of_their_own(stack, real_kafka, real_topic, real_registry) -> None:
    client = stack.client
    tenant = make_tenant(client)
    conn = _registry_connection(client, tenant, real_kafka, real_registry)
    topic = real_topic(partitions=1)
    key_schema = {"type": "record", "name": "OrderKey", "fields": [{"name": "region", "type": "string"},
                                                                  {"name": "id", "type": "long"}]}
    key_id = real_registry.register(f"{topic}-key", json.dumps(key_schema))
    encode = avro_encoder(json.dumps(key_schema))
    keys = [confluent_frame(key_id, encode({"region": "eu", "id": i})) for i in range(3)] + [None]
    produce_framed(real_kafka.bootstrap_servers, topic, [f"v{i}".encode() for i in range(4)], partition=0, keys=keys)
    pipeline = _pipeline(client, tenant, conn, topic, "string", "keyed", key_format="avro")
    stack.start_worker()

    run = _succeeded(stack, tenant, pipeline)

    assert (run["records_read"], run["rows_written"], run["rows_quarantined"]) == (4, 4, 0)
    uri = pipeline["status"]["target_uri"]
    assert _types(uri, ["key", "value"]) == {"key": "struct<region: string, id: int64>", "value": "string"}
    assert [(r["key"], r["value"]) for r in _table(uri).to_pylist()] == [
        ({"region": "eu", "id": 0}, "v0"), ({"region": "eu", "id": 1}, "v1"), ({"region": "eu", "id": 2}, "v2"),
        (None, "v3")]  # a record without a key has a null key, not a quarantined one


def _as_tenant_reads(uri: str) -> str:
    """A table's URI as a run's error shows it to its tenant: the path under its storage folder
    (``api.runs.tenant_errors``)."""
    return uri.split("/tenants/", 1)[1].split("/", 1)[1]
