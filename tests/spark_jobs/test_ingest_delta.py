"""spark-submit runs of Kafka ranges into Delta: exact ranges, idempotent re-runs, json quarantine,
replace-mode replays and data loss. Real spark-submit, real sandbox Kafka; each run costs ~15-40 s.
The first two also run on the standalone cluster into S3 (``placement``), and two attempts of one
run race there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from deltalake import DeltaTable

from tests.spark_jobs.helpers import Placement, coordinates, make_spec, read_table, run_job

pytestmark = pytest.mark.slow


def test_subranges_land_exactly_once_and_a_rerun_adds_nothing(sandbox_kafka, kafka_topic, produce_keyed, placement: Placement,
                                                             tmp_path: Path) -> None:
    topic = kafka_topic(partitions=6)
    placed = produce_keyed(sandbox_kafka.bootstrap_servers, topic, 600, headers={"origin": b"test"})
    ranges = {topic: {str(p): (3, len(offsets) - 2) for p, offsets in placed.items()}}
    target = placement.target("events", partition_by=["partition"])
    uri = target["uri"]
    # Small tasks so that every partition is read in several chunks.
    spec = make_spec(sandbox_kafka.bootstrap_servers, ranges, target, max_records_per_task=30, include_headers=True)

    first = placement.run(spec, tmp_path / "work")

    assert first.status == "succeeded", first.error
    expected = sorted((p, o) for p, offsets in placed.items() for o in offsets[3:-2])
    table = placement.read(uri)
    assert coordinates(table) == expected
    assert set(table["topic"].to_pylist()) == {topic} and set(table["_inlet_run_id"].to_pylist()) == {spec.run_id}
    assert {h["key"]: h["value"] for h in table["headers"][0].as_py()} == {"origin": b"test"}
    assert placement.table(uri).metadata().partition_columns == ["partition"]
    assert (first.rows_written, first.rows_quarantined, first.delta_version, first.already_committed) == (len(expected), 0, 1, False)
    assert [(r.partition, r.records_read, r.first_offset, r.last_offset, r.gap) for r in first.partitions] == [
        (p, len(offsets) - 5, 3, len(offsets) - 3, None) for p, offsets in placed.items()
    ]
    assert first.bytes_read == sum(len(k or b"") + len(v or b"") for k, v in zip(table["key"].to_pylist(), table["value"].to_pylist(), strict=True))
    assert placement.table(uri).transaction_version(spec.txn.app_id) == spec.txn.version

    again = placement.run(spec, tmp_path / "work")

    assert again.status == "succeeded" and again.already_committed and again.rows_written == 0
    assert placement.table(uri).version() == 1 and placement.read(uri).num_rows == len(expected)


def test_json_quarantine_then_replace_mode_replay_leaves_no_duplicates(sandbox_kafka, kafka_topic, produce_keyed,
                                                                     placement: Placement, tmp_path: Path) -> None:
    topic = kafka_topic(partitions=2)
    # Every 10th value is not JSON, every 15th has a string where the schema wants an INT.
    value = lambda i: b"{not json" if i % 10 == 0 else (b'{"seq": "x"}' if i % 15 == 0 else json.dumps({"seq": i, "name": f"n{i}"}).encode())  # noqa: E731
    placed = produce_keyed(sandbox_kafka.bootstrap_servers, topic, 200, value=value, key=lambda i: f"k{i % 2}")
    ranges = {topic: {str(p): (0, len(offsets)) for p, offsets in placed.items()}}
    target = placement.target("orders", quarantine_uri=f"{placement.root}/orders__quarantine")
    uri, quarantine = target["uri"], target["quarantine_uri"]
    source = {"value_format": "json", "schema": "seq INT, name STRING"}
    spec = make_spec(sandbox_kafka.bootstrap_servers, ranges, target, **source)

    first = placement.run(spec, tmp_path / "work")

    assert first.status == "succeeded", first.error
    bad = sum(1 for i in range(200) if i % 10 == 0 or i % 15 == 0)
    assert (first.rows_written, first.rows_quarantined) == (200 - bad, bad)
    good = placement.read(uri)
    assert good.column_names == ["key", "seq", "name", "topic", "partition", "offset", "timestamp", "timestampType", "_inlet_run_id"]
    assert sorted(good["seq"].to_pylist()) == [i for i in range(200) if i % 10 and i % 15]
    rejected = placement.read(quarantine)
    assert sorted(rejected["value"].to_pylist()) == sorted(value(i) for i in range(200) if i % 10 == 0 or i % 15 == 0)
    assert set(rejected["_inlet_quarantine_reason"].to_pylist()) == {"value is not JSON of the pipeline's schema"}
    # Bytes written: the files the run committed, to the table and to its quarantine (usage is metered from it).
    sizes = lambda table_uri: sum(placement.table(table_uri).get_add_actions().column("size_bytes").to_pylist())  # noqa: E731
    assert first.bytes_written == sizes(uri) + sizes(quarantine) > 0

    # Replay the upper half of each partition: the files of the first run hold both halves, so
    # they are rewritten without the replayed rows in the commit that adds the replayed ones.
    half = {topic: {p: ((end + 1) // 2, end) for p, (_, end) in parts.items()} for topic, parts in ranges.items()}
    replay = make_spec(sandbox_kafka.bootstrap_servers, half, {**target, "replace_ranges": half},
                       version=2, pipeline_id=spec.pipeline_id, **source)

    second = placement.run(replay, tmp_path / "work")

    assert second.status == "succeeded", second.error
    assert second.delta_version == placement.table(uri).version()
    after = placement.read(uri)
    assert coordinates(after) == coordinates(good), "rows lost or duplicated by the replay"
    replayed = {(p, o) for p, o, r in zip(after["partition"].to_pylist(), after["offset"].to_pylist(), after["_inlet_run_id"].to_pylist(), strict=True) if r == replay.run_id}
    assert replayed == {(p, o) for p, o in coordinates(good) if o >= half[topic][str(p)][0]}
    assert sorted(zip(placement.read(quarantine)["partition"].to_pylist(), placement.read(quarantine)["offset"].to_pylist(), strict=True)) == coordinates(rejected)
    # One data commit: the replay's adds and removes are in the same log entry.
    last = placement.table(uri).history(1)[0]
    assert last["operation"] == "WRITE" and second.rows_written == sum(1 for p, o in replayed)


def test_data_loss_fails_or_is_skipped_with_the_gap_reported(sandbox_kafka, kafka_topic, produce_keyed, kafka_faults, tmp_path: Path) -> None:
    topic = kafka_topic(partitions=2)
    placed = produce_keyed(sandbox_kafka.bootstrap_servers, topic, 200)
    kafka_faults.delete_records(topic, 0, 10)  # retention took offsets 0..9 of partition 0
    ranges = {topic: {str(p): (0, len(offsets)) for p, offsets in placed.items()}}
    uri = str(tmp_path / "lossy")

    failed = run_job(make_spec(sandbox_kafka.bootstrap_servers, ranges, {"type": "delta", "uri": uri}), tmp_path / "work")

    assert failed.status == "failed" and failed.error is not None
    assert (failed.error.kind, failed.error.topic, failed.error.partition) == ("data_loss", topic, 0)
    assert "[0, 10)" in failed.error.message and not DeltaTable.is_deltatable(uri)

    skipped = run_job(make_spec(sandbox_kafka.bootstrap_servers, ranges, {"type": "delta", "uri": uri}, on_data_loss="skip"), tmp_path / "work")

    assert skipped.status == "succeeded", skipped.error
    assert [(r.partition, r.gap, r.records_read, r.first_offset) for r in skipped.partitions] == [
        (0, (0, 10), len(placed[0]) - 10, 10), (1, None, len(placed[1]), 0)
    ]
    assert coordinates(read_table(uri)) == sorted([(0, o) for o in placed[0][10:]] + [(1, o) for o in placed[1]])
