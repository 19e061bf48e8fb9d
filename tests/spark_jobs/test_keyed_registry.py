"""Keyed tables of registry-format values (``target.mode`` upsert with ``value_format`` avro): Debezium's
Avro envelopes and Avro rows, encoded with ids of a real Schema Registry (Karapace), read as changes by
the executors' one decoder (``formats.wire``) and merged into a real local Delta table, read back with
delta-rs: inserts, updates, deletes, tombstones and runs applied out of order land as exactly the state
(or SCD type 2 history) the reference computes; records that do not decode, or whose writer lacks the
sequence, go to quarantine with their reason; keys and sequence_by are checked against the subject."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from spark_jobs.decode import Framed
from spark_jobs.delta_tables import Table
from spark_jobs.delta_tables.changes import HIDDEN, ChangeReader, latest
from spark_jobs.delta_tables.commit import merge_changes
from spark_jobs.delta_tables.history import merge_history
from spark_jobs.errors import JobError
from spark_jobs.formats.wire import RegistryFormat, resolve
from spark_jobs.registry import RegistryConfig
from spark_jobs.spec import Egress, RunSpec, Txn
from spark_jobs.storage import Store
from tests.factories import LOOPBACK_ALLOWED
from tests.fixtures.debezium import (
    QUARANTINE,
    change_log,
    changes_in,
    final_rows,
    history_rows,
    live_rows,
    record_batch,
    rows_set,
)
from tests.fixtures.debezium_avro import KEY, SOURCE, VALUE, AvroChanges, envelope_schema
from tests.fixtures.schema_registry import unique_subject
from tests.fixtures.wire_format import avro_encoder, confluent_frame, register_protobuf
from tests.spark_jobs.helpers import make_spec, run_job

ROW = json.dumps({**VALUE, "name": "Row"})


def _framed(registry, value_schema: str, key_schema: str | None = None) -> tuple[Framed, int, int | None]:
    """The subjects registered and resolved as a run's driver resolves them; their schema ids."""
    config = RegistryConfig(registry.url, egress=LOOPBACK_ALLOWED)
    value_subject = unique_subject("customers")
    value_id = registry.register(value_subject, value_schema)
    key_id, key = None, None
    if key_schema is not None:
        key_subject = value_subject.removesuffix("-value") + "-key"
        key_id = registry.register(key_subject, key_schema)
        key = resolve(config, "key", "avro", key_subject, "latest")
    return Framed(config, resolve(config, "value", "avro", value_subject, "latest"), key), value_id, key_id


def _batch(records: Sequence[tuple[bytes | None, bytes | None]], partition: int, first: int) -> pa.RecordBatch:
    return record_batch([v for _, v in records], [k for k, _ in records], partition=partition,
                        offsets=list(range(first, first + len(records))))


def _apply(reader: ChangeReader, table: Table, runs: list[list[pa.RecordBatch]], history: bool = False,
           first: int = 1) -> pa.Table:
    """Each run's batches read as the tasks read them and merged (one MERGE per run, versions from
    ``first``); the quarantine rows."""
    quarantined = []
    for version, batches in enumerate(runs, start=first):
        parts = []
        for batch in batches:
            changes, bad, _ = reader.read(batch, f"run-{version}", QUARANTINE)
            parts.append(changes)
            quarantined.append(bad)
        kept = (*reader.key, "_inlet_sequence") if history else reader.key
        merged = latest(pa.concat_tables(parts), kept).drop_columns(list(HIDDEN))
        assert (merge_history if history else merge_changes)(table, Txn(app_id="p", version=version), merged, reader.key)
    return pa.concat_tables(quarantined)


def _uneven_runs(records: list[tuple[bytes, bytes | None]], seed: int) -> list[list[pa.RecordBatch]]:
    """The records over 3 partitions (keys move partition halfway, as a repartition leaves them) and 3
    runs that cut the partitions unevenly, applied last run first: later changes merge before earlier."""
    rng = random.Random(seed)
    partitions: dict[int, list[tuple[bytes, bytes | None]]] = {0: [], 1: [], 2: []}
    for n, record in enumerate(records):
        partitions[(rng.randrange(3) + (n >= len(records) // 2)) % 3].append(record)
    runs: list[list[pa.RecordBatch]] = [[], [], []]
    for p, held in partitions.items():
        cuts = sorted(rng.sample(range(len(held) + 1), 2))
        for run, (start, end) in enumerate(zip([0, *cuts], [*cuts, len(held)], strict=True)):
            if end > start:
                runs[run].append(_batch(held[start:end], p, start))
    return runs[::-1]


@pytest.mark.parametrize("scd_type", [1, 2])
def test_debezium_avro_envelopes_land_as_the_reference_state_whatever_the_order(real_registry, tmp_path: Path,
                                                                              scd_type: int) -> None:
    framed, envelope_id, key_id = _framed(real_registry, envelope_schema(), KEY)
    assert key_id is not None
    reader = ChangeReader(framed, ["id"], "source.lsn", True, "UTC")
    assert [(f.name, str(f.type)) for f in reader.row_schema] == [("id", "int64"), ("name", "string"), ("tier", "int32")]
    log = change_log(seed=7, keys=25, n=400)
    table = Table(Store(), str(tmp_path / "customers"))

    quarantined = _apply(reader, table, _uneven_runs(AvroChanges(envelope_id, key_id).records(log), seed=7),
                         history=scd_type == 2)

    assert quarantined.num_rows == 0
    if scd_type == 1:
        assert live_rows(table.uri) == final_rows(log)
    else:
        rows = DeltaTable(table.uri).to_pyarrow_table().to_pylist()
        assert sorted(((r["id"], r["name"], r["tier"], r["_inlet_valid_from"], r["_inlet_valid_to"], r["_inlet_current"],
                        r["_inlet_deleted"]) for r in rows), key=lambda r: (r[0], r[3])) == history_rows(log)
    before = DeltaTable(table.uri).to_pyarrow_table().sort_by([("id", "ascending")])
    # A replay of everything, in one run: nothing moves.
    replay = [_batch(AvroChanges(envelope_id, key_id).records(log), 0, 0)]
    assert _apply(reader, table, [replay], history=scd_type == 2, first=4).num_rows == 0
    after = DeltaTable(table.uri).to_pyarrow_table().sort_by([("id", "ascending")])
    assert after.drop_columns(["_inlet_run_id"]) == before.drop_columns(["_inlet_run_id"])


def test_records_that_do_not_decode_or_whose_writer_lacks_the_sequence_go_to_quarantine(real_registry, tmp_path: Path) -> None:
    framed, envelope_id, _ = _framed(real_registry, envelope_schema())
    # A writer whose source record has no lsn (another subject's): read as the subject's, lsn null.
    no_lsn = envelope_schema({**SOURCE, "fields": [f for f in SOURCE["fields"] if f["name"] != "lsn"]})
    no_lsn_id = real_registry.register(unique_subject("older"), no_lsn)
    json_id = real_registry.register(unique_subject("other"), json.dumps({"type": "object"}), "JSON")
    changes = AvroChanges(envelope_id, 0)
    reader = ChangeReader(framed, ["id"], "source.lsn", True, "UTC")
    batch = record_batch([
        changes.envelope("c", None, {"id": 1, "name": "a", "tier": 1}, 10),
        changes.envelope("u", {"id": 1, "name": "a", "tier": 1}, {"id": 1, "name": "b", "tier": 2}, 20),
        b"not framed",
        confluent_frame(envelope_id, b"\x02\xff\xff"),
        confluent_frame(999_999, b"\x00"),
        confluent_frame(json_id, b"{}"),
        AvroChanges(no_lsn_id, 0, no_lsn).envelope("c", None, {"id": 2, "name": "x", "tier": 0}, 30),
        changes.envelope("t", None, None, 40),
        changes.envelope("d", None, None, 50),
        None,  # Debezium's tombstone: skipped
        changes.envelope("d", {"id": 1, "name": "b", "tier": 2}, None, 60),
    ])
    rows, quarantine, skipped = reader.read(batch, "run-1", QUARANTINE)

    assert skipped == 1
    assert [(r["id"], r["name"], r["_inlet_sequence"], r["_inlet_deleted"]) for r in rows.to_pylist()] == [
        (1, "a", 10, False), (1, "b", 20, False), (1, None, 60, True)]
    reasons = dict(zip(quarantine["offset"].to_pylist(), quarantine["_inlet_quarantine_reason"].to_pylist(), strict=True))
    assert reasons.pop(3).startswith(f"value does not decode with schema id {envelope_id}: ")
    assert reasons == {
        2: "value is not in the Confluent wire format (magic byte 0 and a schema id)",
        4: "value names schema id 999999, which the registry does not know",
        5: f"value names schema id {json_id}, a JSON schema, not AVRO",
        6: "sequence_by source.lsn is null",
        7: "op 't' is not applied to a keyed table",
        8: "op 'd' without its before image",
    }
    assert dict(zip(quarantine["offset"].to_pylist(), quarantine["value"].to_pylist(), strict=True))[2] == b"not framed"


def test_avro_rows_set_their_key_and_a_tombstone_deletes_the_key_its_avro_kafka_key_names(real_registry,
                                                                                        tmp_path: Path) -> None:
    framed, row_id, key_id = _framed(real_registry, ROW, KEY)
    assert key_id is not None
    encode, encode_key = avro_encoder(ROW), avro_encoder(KEY)

    def row(i: int, name: str) -> bytes:
        return confluent_frame(row_id, encode({"id": i, "name": name, "tier": None}))

    def key(i: int) -> bytes:
        return confluent_frame(key_id, encode_key({"id": i}))

    reader = ChangeReader(framed, ["id"], None, False, "UTC")
    table = Table(Store(), str(tmp_path / "rows"))
    first = [_batch([(key(1), row(1, "a")), (key(2), row(2, "b")), (key(3), row(3, "c"))], 0, 0)]
    second = [_batch([(key(1), row(1, "a2")), (key(2), None), (b"\x00", None), (None, None)], 0, 3)]

    quarantined = _apply(reader, table, [second, first])  # the later run first: it holds higher offsets

    assert live_rows(table.uri) == [(1, "a2", None), (3, "c", None)]
    reasons = quarantined["_inlet_quarantine_reason"].to_pylist()
    assert reasons == [("a tombstone whose key does not decode: key is not in the Confluent wire format "
                        "(magic byte 0 and a schema id)"), "a tombstone whose key does not decode: the key is null"]


def test_key_sequence_and_partition_fields_are_checked_against_the_subject(real_registry) -> None:
    framed, _, _ = _framed(real_registry, envelope_schema())
    described = framed.value.describe() if framed.value else ""
    cases = [  # key, sequence_by, what the refusal says
        ("customer_id", "source.lsn", f"key column customer_id is not a field of the after record of {described}"),
        ("id", "source.offset", f"sequence_by source.offset is not a field of {described}"),
        ("id", "source.db", "sequence_by source.db is string: an integer, timestamp or date"),
        ("id", "after.tier", "sequence_by after.tier: a field of the envelope's source or ts_ms"),
    ]
    for key, sequence_by, message in cases:
        with pytest.raises(JobError) as refused:
            ChangeReader(framed, [key], sequence_by, True, "UTC")
        assert refused.value.kind == "invalid_spec" and refused.value.message.startswith(message), refused.value.message
    with pytest.raises(JobError, match=f"partition_by region is not a field of the after record of {re.escape(described)}"):
        ChangeReader(framed, ["id"], "source.lsn", True, "UTC", partition_by=("tier", "region"))
    assert ChangeReader(framed, ["id"], "source.lsn", True, "UTC", partition_by=("tier",)).key == ("id",)
    rows, _, _ = _framed(real_registry, ROW, json.dumps({"type": "record", "name": "K", "fields": [
        {"name": "customer", "type": "string"}]}))
    with pytest.raises(JobError, match="key column id is not a field of the keys' subject"):
        ChangeReader(rows, ["id"], None, False, "UTC")
    with pytest.raises(JobError) as not_envelope:
        ChangeReader(rows, ["id"], None, True, "UTC")
    assert not_envelope.value.kind == "schema_incompatible"
    assert "is not a Debezium envelope" in not_envelope.value.message


@pytest.mark.slow
def test_a_debezium_avro_topic_lands_as_the_final_state_through_the_whole_job(real_kafka, real_topic, real_registry,
                                                                              tmp_path: Path) -> None:
    """The whole job (warm engine, local Spark, the real broker): the driver resolves the subjects, the
    tasks decode with them; a key's later changes merged before its earlier ones, a retry and a replay."""
    framed, envelope_id, key_id = _framed(real_registry, envelope_schema(), KEY)
    assert framed.value is not None and framed.key is not None and key_id is not None
    topic, log = real_topic(partitions=3), change_log(seed=11, keys=30, n=300)
    ends = AvroChanges(envelope_id, key_id).produce(real_kafka.bootstrap_servers, topic, log)
    uri = str(tmp_path / "customers")
    target = {"type": "delta", "uri": uri, "quarantine_uri": f"{uri}__quarantine", "mode": "upsert", "key": ["id"],
              "sequence_by": "source.lsn", "changes": "debezium"}
    source = {"value_format": "avro", "registry": {"url": real_registry.url}, "key_format": "avro",
              "value_subject": {"subject": framed.value.subject}, "key_subject": {"subject": framed.key.subject}}
    cuts = {p: end if p == 0 else end // 3 for p, end in ends.items()}

    def spec(version: int, ranges: dict[int, tuple[int, int]]) -> RunSpec:
        made = make_spec(real_kafka.bootstrap_servers, {topic: {str(p): r for p, r in ranges.items()}}, target,
                         version=version, pipeline_id="keyed-avro", **source)
        return made.model_copy(update={"egress": Egress(allow=("127.0.0.0/8",))})

    halves = [{p: (0, cuts[p]) for p in ends}, {p: (cuts[p], ends[p]) for p in ends}]
    runs = [spec(version, ranges) for version, ranges in enumerate(halves, start=1)]
    results = [run_job(s, tmp_path / f"work{n}") for n, s in enumerate(runs)]
    assert [r.status for r in results] == ["succeeded"] * 2, [r.error for r in results]
    assert [r.rows_written for r in results] == rows_set([changes_in(log, ranges) for ranges in halves])
    assert sum(r.rows_quarantined for r in results) == 0
    assert live_rows(uri) == final_rows(log)

    retried = run_job(runs[1], tmp_path / "retry")
    assert retried.status == "succeeded" and retried.already_committed, retried.error
    replayed = run_job(spec(3, {p: (0, end) for p, end in ends.items()}), tmp_path / "replay")
    assert replayed.status == "succeeded" and not replayed.already_committed, replayed.error
    assert replayed.rows_written == 0
    assert live_rows(uri) == final_rows(log)
    assert DeltaTable(uri).transaction_version("inlet-pipeline-keyed-avro") == 3


CUSTOMER_PROTO = 'syntax = "proto3";\npackage shop;\nmessage Customer { int64 id = 1; string name = 2; int32 tier = 3; }\n'
CUSTOMER_JSON = json.dumps({"type": "object", "properties": {
    "id": {"type": "integer"}, "name": {"type": "string"}, "tier": {"type": "integer"}}, "required": ["id"]})


@pytest.mark.parametrize("fmt", ["protobuf", "json_schema"])
def test_protobuf_and_json_schema_rows_go_the_same_way(real_registry, tmp_path: Path, fmt: RegistryFormat) -> None:
    """The other registry formats, through the same decoder: rows set their key, tombstones (a JSON key)
    delete it, a record of another format goes to quarantine."""
    config = RegistryConfig(real_registry.url, egress=LOOPBACK_ALLOWED)
    subject = unique_subject("customers")
    if fmt == "protobuf":
        schema_id, message = register_protobuf(real_registry, subject, CUSTOMER_PROTO)

        def encode(row: dict) -> bytes:
            return confluent_frame(schema_id, message(**row).SerializeToString(), message_indexes=[0])
    else:
        schema_id = real_registry.register(subject, CUSTOMER_JSON, "JSON")

        def encode(row: dict) -> bytes:
            return confluent_frame(schema_id, json.dumps(row).encode())
    framed = Framed(config, resolve(config, "value", fmt, subject, "latest"), None)
    reader = ChangeReader(framed, ["id"], None, False, "UTC")
    assert reader.row_schema.names == ["id", "name", "tier"]
    table = Table(Store(), str(tmp_path / fmt))
    key = [json.dumps({"id": i}).encode() for i in range(4)]
    first = [_batch([(key[1], encode({"id": 1, "name": "a", "tier": 1})), (key[2], encode({"id": 2, "name": "b", "tier": 2})),
                     (key[3], confluent_frame(999_999, b"{}"))], 0, 0)]
    second = [_batch([(key[1], None), (key[2], encode({"id": 2, "name": "b2", "tier": 3}))], 0, 3)]

    quarantined = _apply(reader, table, [second, first])

    assert live_rows(table.uri) == [(2, "b2", 3)]
    assert quarantined.select(["offset", "_inlet_quarantine_reason"]).to_pylist() == [
        {"offset": 2, "_inlet_quarantine_reason": "value names schema id 999999, which the registry does not know"}]
