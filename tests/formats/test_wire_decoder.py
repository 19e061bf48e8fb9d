"""The executors' decoder against a real Schema Registry, without Kafka or Spark: the rules that decide,
per writer schema, whether a record is decoded, quarantined or fails the run."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pytest

from spark_jobs.errors import JobError
from spark_jobs.formats.wire import WireDecoder, resolve
from spark_jobs.registry import RegistryConfig
from tests.factories import LOOPBACK_ALLOWED
from tests.fixtures.schema_registry import unique_subject
from tests.fixtures.wire_format import avro_encoder, confluent_frame

V1 = {"type": "record", "name": "Reading", "fields": [{"name": "celsius", "type": "double"}]}
V2 = {**V1, "fields": [*V1["fields"], {"name": "sensor", "type": "string", "default": "unknown"}]}


def _frame(registry_id: int, schema: dict | str, record: Any) -> bytes:
    return confluent_frame(registry_id, avro_encoder(json.dumps(schema))(record))


def test_following_latest_a_newer_writer_fails_the_run_to_be_retried_and_a_pinned_reader_reads_it(real_registry) -> None:
    subject = unique_subject()
    v1 = real_registry.register(subject, json.dumps(V1))
    config = RegistryConfig(real_registry.url, egress=LOOPBACK_ALLOWED)
    latest_then = resolve(config, "value", "avro", subject, "latest")  # a run starts: version 1 is the latest
    v2 = real_registry.register(subject, json.dumps(V2))  # a producer registers version 2 mid-run
    newer = _frame(v2, V2, {"celsius": 20.5, "sensor": "s1"})

    with pytest.raises(JobError) as changed:
        WireDecoder(latest_then, config).decode(pa.array([_frame(v1, V1, {"celsius": 1.0}), newer], pa.binary()))
    assert (changed.value.kind, changed.value.message) == ("schema_changed", (
        f"values use version 2 of subject {subject!r} (schema id {v2}), registered after this run read version 1; "
        "the next attempt reads it"))

    pinned = resolve(config, "value", "avro", subject, 1)
    values, reasons = WireDecoder(pinned, config).decode(pa.array([newer], pa.binary()))
    assert (values.to_pylist(), reasons) == ([{"celsius": 20.5}], [None])
    latest_now = resolve(config, "value", "avro", subject, "latest")
    values, reasons = WireDecoder(latest_now, config).decode(pa.array([_frame(v1, V1, {"celsius": 3.0}), newer], pa.binary()))
    assert (values.to_pylist(), reasons) == ([{"celsius": 3.0, "sensor": "unknown"}, {"celsius": 20.5, "sensor": "s1"}],
                                             [None, None])


def test_a_writer_the_reader_cannot_resolve_fails_the_run_and_other_types_are_quarantined(real_registry) -> None:
    subject, other = unique_subject(), unique_subject()
    v1 = real_registry.register(subject, json.dumps(V1))
    real_registry.set_compatibility(subject, "NONE")
    text = {"type": "record", "name": "Reading", "fields": [{"name": "celsius", "type": "string"}]}
    v2 = real_registry.register(subject, json.dumps(text))
    json_id = real_registry.register(other, json.dumps({"type": "object", "properties": {"celsius": {"type": "number"}}}), "JSON")
    config = RegistryConfig(real_registry.url, egress=LOOPBACK_ALLOWED)
    pinned = resolve(config, "value", "avro", subject, 1)
    decoder = WireDecoder(pinned, config)

    values, reasons = decoder.decode(pa.array([confluent_frame(json_id, b'{"celsius": 1}'), None], pa.binary()))
    assert values.to_pylist() == [None, None]
    assert reasons == [f"value names schema id {json_id}, a JSON schema, not AVRO", "value is null"]
    with pytest.raises(JobError) as incompatible:
        decoder.decode(pa.array([_frame(v2, text, {"celsius": "warm"})], pa.binary()))
    assert incompatible.value.kind == "schema_incompatible"
    assert incompatible.value.message.startswith(
        f"value schema id {v2} cannot be read as subject {subject!r} version 1 (schema id {v1}): ")


def test_a_subject_of_another_type_or_unknown_fails_before_reading(real_registry) -> None:
    subject = unique_subject()
    real_registry.register(subject, json.dumps(V1))
    config = RegistryConfig(real_registry.url, egress=LOOPBACK_ALLOWED)

    with pytest.raises(JobError) as wrong_type:
        resolve(config, "value", "protobuf", subject, "latest")
    assert (wrong_type.value.kind, wrong_type.value.message) == (
        "schema_incompatible", f"value_format is protobuf, but subject {subject!r} version 1 is registered as AVRO")
    with pytest.raises(JobError) as missing:
        resolve(config, "value", "avro", subject, 7)
    assert missing.value.kind == "schema_not_found"
    assert missing.value.message.startswith(f"schema registry {config.host} has no version 7 of subject {subject!r}")


def test_a_value_subject_that_is_not_a_record_and_a_record_field_named_value_land_decoded(real_registry) -> None:
    from pyspark.sql.pandas.types import to_arrow_schema

    from spark_jobs.decode import Framed, decode_framed, framed_schema, quarantine_struct
    from spark_jobs.kafka_source import kafka_struct

    read_schema = to_arrow_schema(kafka_struct(False), timezone="UTC")
    config = RegistryConfig(real_registry.url, egress=LOOPBACK_ALLOWED)
    named_value = {"type": "record", "name": "Boxed", "fields": [{"name": "value", "type": "long"}]}
    for schema, record, expected in (("string", "héllo", "héllo"), (named_value, {"value": 7}, 7)):
        subject = unique_subject()
        frame = _frame(real_registry.register(subject, json.dumps(schema)), schema, record)
        value = resolve(config, "value", "avro", subject, "latest")
        table = framed_schema(read_schema, "avro", None, value, None)
        batch = pa.RecordBatch.from_pylist(
            [{"key": b"k", "value": frame, "topic": "t", "partition": 0, "offset": 5, "timestamp": None, "timestampType": 0}],
            schema=read_schema)

        rows, quarantined = decode_framed(batch, Framed(config, value, None), "run-1", table, quarantine_struct(read_schema))

        # The decoded value, never the record's wire bytes (5-byte header and all).
        assert (rows.column("value").to_pylist(), quarantined.num_rows) == ([expected], 0), schema
