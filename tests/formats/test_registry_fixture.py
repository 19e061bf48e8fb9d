"""The real Schema Registry fixture and the test-side wire-format encoders, on Karapace and a real broker."""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Callable

import fastavro
import httpx
import pytest

from tests.fixtures.kafka import read_range
from tests.fixtures.kafka_broker import RealKafka
from tests.fixtures.schema_registry import AUTH_PASSWORD, AUTH_USER, RealRegistry, unique_subject
from tests.fixtures.wire_format import (
    avro_encoder,
    confluent_frame,
    message_indexes,
    produce_framed,
    protobuf_message_class,
    register_protobuf,
)

ORDER_V1 = json.dumps({"type": "record", "name": "Order", "namespace": "inlet.test", "fields": [
    {"name": "id", "type": "long"}, {"name": "amount", "type": "int"}]})
ORDER_V2 = json.dumps({"type": "record", "name": "Order", "namespace": "inlet.test", "fields": [
    {"name": "id", "type": "long"}, {"name": "amount", "type": "int"},
    {"name": "currency", "type": "string", "default": "EUR"}]})
ORDER_AMOUNT_AS_STRING = json.dumps({"type": "record", "name": "Order", "namespace": "inlet.test", "fields": [
    {"name": "id", "type": "long"}, {"name": "amount", "type": "string"}]})

# Laid out as Karapace serves Protobuf text back (no blank line between top-level messages, nested types
# after fields), so its answer equals it.
SHIPMENT_PROTO = """syntax = "proto3";
package inlet.test;

import "google/protobuf/timestamp.proto";

message Shipment {
  string id = 1;
  int64 weight_grams = 2;
  google.protobuf.Timestamp shipped_at = 3;
  repeated string tags = 4;
}
message Envelope {
  Header header = 1;
  Shipment shipment = 2;

  message Header {
    string source = 1;
  }
}
"""

EVENT_JSON_SCHEMA = json.dumps({"$schema": "http://json-schema.org/draft-07/schema#", "title": "Event", "type": "object",
                                "properties": {"id": {"type": "integer"}, "kind": {"type": "string"}},
                                "required": ["id"]})


def avro_decode(payload: bytes, writer: str, reader: str | None = None) -> dict[str, object]:
    parsed_writer = fastavro.parse_schema(json.loads(writer))
    parsed_reader = fastavro.parse_schema(json.loads(reader)) if reader else None
    record = fastavro.schemaless_reader(io.BytesIO(payload), parsed_writer, parsed_reader)
    assert isinstance(record, dict)
    return record


def test_confluent_frame_is_magic_byte_id_indexes_payload() -> None:
    assert confluent_frame(7, b"\x02\x04hi") == b"\x00\x00\x00\x00\x07\x02\x04hi"
    assert confluent_frame(0x01020304, b"p", [0]) == b"\x00\x01\x02\x03\x04\x00p"
    # Count 2 then 1 and 0, each a zigzag varint; 70 zigzags to 140, two varint bytes.
    assert confluent_frame(300, b"p", [1, 0]) == b"\x00\x00\x00\x01\x2c\x04\x02\x00p"
    assert confluent_frame(1, b"", [2, 70]) == b"\x00\x00\x00\x00\x01\x04\x04\x8c\x01"


def test_avro_backward_evolution_gives_two_versions(real_registry: RealRegistry) -> None:
    subject = unique_subject("orders")
    real_registry.set_compatibility(subject, "BACKWARD")

    first = real_registry.register(subject, ORDER_V1)
    second = real_registry.register(subject, ORDER_V2)

    assert real_registry.versions(subject) == [1, 2]
    assert (real_registry.schema_id(subject, 1), real_registry.schema_id(subject, 2)) == (first, second)
    assert first != second
    assert real_registry.request("GET", f"/config/{subject}") == {"compatibilityLevel": "BACKWARD"}
    served = real_registry.schema(second)
    assert {**served, "schema": json.loads(served["schema"])} == {"schema": json.loads(ORDER_V2)}
    # A v1 record read with v2 gets the default: what BACKWARD promises a consumer on the new schema.
    old_record = avro_encoder(ORDER_V1)({"id": 41, "amount": 250})
    assert avro_decode(old_record, ORDER_V1, ORDER_V2) == {"id": 41, "amount": 250, "currency": "EUR"}
    assert avro_decode(avro_encoder(ORDER_V2)({"id": 42, "amount": -3, "currency": "USD"}), ORDER_V2) == {
        "id": 42, "amount": -3, "currency": "USD"}


def test_incompatible_change_is_refused_with_409(real_registry: RealRegistry) -> None:
    subject = unique_subject("orders")
    real_registry.set_compatibility(subject, "BACKWARD")
    first = real_registry.register(subject, ORDER_V1)

    with pytest.raises(httpx.HTTPStatusError) as refused:
        real_registry.register(subject, ORDER_AMOUNT_AS_STRING)

    assert refused.value.response.status_code == 409
    assert refused.value.response.json() == {
        "error_code": 409,
        "message": "Incompatible schema, compatibility_mode=BACKWARD. Incompatibilities: "
                   "reader type: string not compatible with writer type: int",
    }
    assert real_registry.versions(subject) == [1]
    assert real_registry.schema_id(subject, "latest") == first


def test_protobuf_round_trips_through_the_serialized_descriptor(real_registry: RealRegistry) -> None:
    subject = unique_subject("shipments")

    schema_id, shipment_class = register_protobuf(real_registry, subject, SHIPMENT_PROTO)

    assert real_registry.schema(schema_id) == {"schema": SHIPMENT_PROTO, "schemaType": "PROTOBUF"}
    assert shipment_class.DESCRIPTOR.full_name == "inlet.test.Shipment"
    shipment = shipment_class(id="s-1", weight_grams=1250, shipped_at={"seconds": 1_700_000_000, "nanos": 5},
                              tags=["fragile", "eu"])
    payload = shipment.SerializeToString()
    assert shipment_class.FromString(payload) == shipment
    assert confluent_frame(schema_id, payload, message_indexes(shipment_class)) == (
        b"\x00" + schema_id.to_bytes(4, "big") + b"\x00" + payload)

    # The other messages of the same file, by name, from the same serialized descriptor.
    serialized = base64.b64decode(real_registry.schema(schema_id, format="serialized")["schema"])
    header_class = protobuf_message_class(serialized, "inlet.test.Envelope.Header")
    envelope_class = protobuf_message_class(serialized, "inlet.test.Envelope")
    assert message_indexes(header_class) == [1, 0]
    assert message_indexes(envelope_class) == [1]
    envelope = envelope_class(header={"source": "pos-7"}, shipment={"id": "s-2", "weight_grams": 10})
    assert envelope_class.FromString(envelope.SerializeToString()) == envelope


def test_json_schema_registers(real_registry: RealRegistry) -> None:
    subject = unique_subject("events")

    schema_id = real_registry.register(subject, EVENT_JSON_SCHEMA, "JSON")

    served = real_registry.schema(schema_id)
    assert {**served, "schema": json.loads(served["schema"])} == {"schema": json.loads(EVENT_JSON_SCHEMA), "schemaType": "JSON"}
    assert real_registry.versions(subject) == [1]
    assert confluent_frame(schema_id, b'{"id":1}') == b"\x00" + schema_id.to_bytes(4, "big") + b'{"id":1}'


def test_framed_values_land_on_the_real_broker(real_registry: RealRegistry, real_kafka: RealKafka, real_topic: Callable[..., str]) -> None:
    schema_id = real_registry.register(unique_subject("orders"), ORDER_V1)
    encode = avro_encoder(ORDER_V1)
    values = [confluent_frame(schema_id, encode({"id": i, "amount": i * 10})) for i in range(5)]
    topic = real_topic(partitions=2)

    placed = produce_framed(real_kafka.bootstrap_servers, topic, values, partition=1, keys=[b"k%d" % i for i in range(5)])

    assert placed == [(1, 0), (1, 1), (1, 2), (1, 3), (1, 4)]
    read = read_range(real_kafka.bootstrap_servers, topic, 1, 0, 5)
    assert [(m.key(), m.value()) for m in read] == [(b"k%d" % i, values[i]) for i in range(5)]
    assert [avro_decode(values[i][5:], ORDER_V1) for i in range(5)] == [{"id": i, "amount": i * 10} for i in range(5)]


def test_basic_auth_refuses_a_wrong_password(real_registry_with_auth: RealRegistry) -> None:
    url = f"{real_registry_with_auth.url}/subjects"
    unauthorized = {"message": "Unauthorized"}

    anonymous = httpx.get(url)
    assert (anonymous.status_code, anonymous.json()) == (401, unauthorized)
    wrong = httpx.get(url, auth=(AUTH_USER, AUTH_PASSWORD + "x"))
    assert (wrong.status_code, wrong.json()) == (401, unauthorized)

    subject = unique_subject("secured")
    schema_id = real_registry_with_auth.register(subject, ORDER_V1)
    right = httpx.get(f"{real_registry_with_auth.url}/subjects/{subject}/versions", auth=(AUTH_USER, AUTH_PASSWORD))
    assert (right.status_code, right.json()) == (200, [1])
    assert real_registry_with_auth.schema_id(subject, 1) == schema_id


def test_stop_and_start_keep_the_schemas(real_registry: RealRegistry) -> None:
    subject = unique_subject("kept")
    first = real_registry.register(subject, ORDER_V1)
    second = real_registry.register(subject, ORDER_V2)
    old_url = real_registry.url

    real_registry.stop()
    try:
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"{old_url}/subjects")
    finally:
        real_registry.start()

    assert real_registry.versions(subject) == [1, 2]
    assert [real_registry.schema_id(subject, v) for v in (1, 2)] == [first, second]
    served = real_registry.schema(second)
    assert {**served, "schema": json.loads(served["schema"])} == {"schema": json.loads(ORDER_V2)}
