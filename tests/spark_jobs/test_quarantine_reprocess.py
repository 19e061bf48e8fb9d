"""Reprocessing the quarantine (``targets.reprocess``): records an expectation set aside land in the table
once the rule is gone, each once, and leave the quarantine; those that still fail stay as they were; a
dry run only counts; a chosen range or Kafka-time window lands only its records; a reprocess that crashed between its two
commits lands nothing twice when it is tried again. Read back with DuckDB (not Inlet's writer). Local
Spark (the warm engine), the sandbox Kafka; ~40 s."""

from __future__ import annotations

import datetime as dt
import json
import multiprocessing
import sys
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from spark_jobs.spec import RunResult, RunSpec
from tests.fixtures.kafka import produce_keyed
from tests.spark_jobs.helpers import duckdb_connection, make_spec, read_table, run_job

pytestmark = pytest.mark.slow

BASE = dt.datetime(2026, 12, 7, 9, 0, tzinfo=dt.UTC)


def _value(i: int) -> bytes:
    return b"{not json" if i % 10 == 0 else json.dumps({"n": i}).encode()


def _coordinates(uri: str) -> list[tuple[int, int]]:
    rows = duckdb_connection().execute(f'SELECT "partition", "offset" FROM delta_scan(\'{uri}\')').fetchall()
    return sorted((int(p), int(o)) for p, o in rows)


class _Pipeline:
    """One json pipeline's specs: its first run, under ``n < 40`` as a quarantine rule, and reprocesses."""

    def __init__(self, bootstrap: str, topic: str, root: Path) -> None:
        self.bootstrap, self.topic = bootstrap, topic
        self.uri, self.quarantine = str(root / "orders"), str(root / "orders__quarantine")
        self.version = 0

    def spec(self, ranges: dict[str, Any], **extra: Any) -> RunSpec:
        self.version += 1
        target = {"type": "delta", "uri": self.uri, "quarantine_uri": self.quarantine}
        spec = make_spec(self.bootstrap, ranges, target, version=self.version, pipeline_id="reprocessed",
                         value_format="json", schema="n INT")
        return RunSpec.model_validate({**spec.model_dump(by_alias=True), **extra})

    def reprocess(self, **order: Any) -> RunSpec:
        return self.spec({}, reprocess=order)


def _first_run(pipeline: _Pipeline, placed: dict[int, list[int]], tmp_path: Path) -> None:
    """The pipeline's first run, of every record ``placed`` ({partition: offsets}): 24 go to quarantine."""
    ranges = {pipeline.topic: {str(p): (0, len(offsets)) for p, offsets in placed.items()}}
    rule = {"name": "small", "predicate": "n < 40", "action": "quarantine"}
    result = run_job(pipeline.spec(ranges, contract={"expectations": [rule]}), tmp_path)
    assert result.status == "succeeded", result.error
    assert (result.rows_written, result.rows_quarantined) == (36, 24)


def _produce(bootstrap: str, topic: str, n: int) -> None:
    """Record i to partition i % 2 (at offset i // 2), its Kafka time BASE + i seconds."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(n):
        producer.produce(topic, key=f"k{i}", value=_value(i), partition=i % 2,
                         timestamp=int((BASE + dt.timedelta(seconds=i)).timestamp() * 1000))
    assert producer.flush(60) == 0


def _at(*numbers: int) -> list[tuple[int, int]]:
    """The coordinates of records ``numbers`` as ``_produce`` placed them."""
    return sorted((i % 2, i // 2) for i in numbers)


def test_reprocess_lands_what_now_decodes_once_and_leaves_the_rest(sandbox_kafka, kafka_topic, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    topic = kafka_topic(partitions=2)
    _produce(sandbox_kafka.bootstrap_servers, topic, 60)
    pipeline = _Pipeline(sandbox_kafka.bootstrap_servers, topic, tmp_path)
    _first_run(pipeline, {0: list(range(30)), 1: list(range(30))}, tmp_path)
    not_json, big = [i for i in range(60) if i % 10 == 0], [i for i in range(40, 60) if i % 10]
    small = [i for i in range(40) if i % 10]
    assert _coordinates(pipeline.uri) == _at(*small)
    assert _coordinates(pipeline.quarantine) == _at(*not_json, *big)

    dry = run_job(pipeline.reprocess(dry_run=True), tmp_path)

    assert dry.status == "succeeded", dry.error
    assert dry.reprocessed is not None and dry.reprocessed.model_dump() == {
        "dry_run": True, "selected": 24, "decoded": 18, "still_quarantined": 6}
    assert dry.rows_written == 0
    assert _coordinates(pipeline.uri) == _at(*small)
    assert _coordinates(pipeline.quarantine) == _at(*not_json, *big)

    # The rule is gone: a window of Kafka time first (records 45 to 54), then partition 0's, then the rest.
    window = run_job(pipeline.reprocess(since=BASE + dt.timedelta(seconds=45), until=BASE + dt.timedelta(seconds=55)),
                     tmp_path)
    in_window = [i for i in range(45, 55) if i % 10]
    assert window.status == "succeeded", window.error
    assert window.reprocessed is not None and window.reprocessed.model_dump() == {
        "dry_run": False, "selected": 10, "decoded": 9, "still_quarantined": 1}
    assert window.rows_written == 9
    assert _coordinates(pipeline.uri) == _at(*small, *in_window)

    even = run_job(pipeline.reprocess(ranges={topic: {"0": (0, 1_000)}}), tmp_path)
    in_0 = [i for i in big if i % 2 == 0 and i not in in_window]
    assert even.status == "succeeded", even.error
    assert even.reprocessed is not None and (even.reprocessed.decoded, even.rows_written) == (len(in_0), len(in_0))
    assert _coordinates(pipeline.uri) == _at(*small, *in_window, *in_0)

    rest = run_job(pipeline.reprocess(), tmp_path)
    again = run_job(pipeline.reprocess(), tmp_path)

    assert rest.status == again.status == "succeeded", (rest.error, again.error)
    assert rest.reprocessed is not None and again.reprocessed is not None
    assert (rest.reprocessed.decoded, rest.reprocessed.still_quarantined) == (len(big) - len(in_window) - len(in_0), 6)
    assert (again.reprocessed.selected, again.reprocessed.decoded, again.rows_written) == (6, 0, 0)
    assert _coordinates(pipeline.uri) == _at(*small, *big)  # each record once
    assert _coordinates(pipeline.quarantine) == _at(*not_json)
    assert read_table(pipeline.uri).num_rows == len(small) + len(big)


def _crash_after_the_main_commit(spec: RunSpec) -> RunResult:
    """The reprocess in this fresh process, stopped between its main and its quarantine commit."""
    from spark_jobs.job import execute
    from spark_jobs.targets.reprocess import QuarantineReprocess
    from tests.spark_jobs.test_json_direct import ContextOnly

    def crash(*_: object) -> None:
        raise OSError("the worker died between the commits")

    QuarantineReprocess._rewrite_quarantine = crash  # type: ignore[method-assign]  # the crash under test
    return execute(spec, ContextOnly("UTC"))


def _crashed(bootstrap: str, topic: str, tmp_path: Path) -> tuple[_Pipeline, RunSpec, RunResult]:
    """A pipeline of one partition (record i at offset i) after its first run, and a reprocess of it
    that crashed between its two commits."""
    placed = produce_keyed(bootstrap, topic, 60, value=_value, key=lambda i: f"k{i}")
    pipeline = _Pipeline(bootstrap, topic, tmp_path)
    _first_run(pipeline, placed, tmp_path)
    spec = pipeline.reprocess()
    with multiprocessing.get_context("spawn").Pool(1) as alone:
        return pipeline, spec, alone.apply(_crash_after_the_main_commit, (spec,))


def test_a_reprocess_tried_again_after_its_main_commit_lands_nothing_twice(
        sandbox_kafka, kafka_topic, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)

    pipeline, spec, crashed = _crashed(sandbox_kafka.bootstrap_servers, kafka_topic(partitions=1), tmp_path)

    assert crashed.status == "failed" and crashed.error is not None and "died" in crashed.error.message
    landed = [(0, i) for i in range(40, 60) if i % 10]  # one partition: record i at offset i
    assert _coordinates(pipeline.uri) == sorted([(0, i) for i in range(40) if i % 10] + landed)
    assert len(_coordinates(pipeline.quarantine)) == 24  # the quarantine's commit never came

    retried = run_job(spec, tmp_path)

    assert retried.status == "succeeded", retried.error
    assert retried.reprocessed is not None
    assert (retried.reprocessed.selected, retried.reprocessed.decoded) == (24, 18)
    assert _coordinates(pipeline.uri) == sorted([(0, i) for i in range(40) if i % 10] + landed)  # not twice
    assert _coordinates(pipeline.quarantine) == [(0, i) for i in range(0, 60, 10)]


def test_a_reprocess_whose_retries_ran_out_after_its_main_commit_is_finished_by_the_next(
        sandbox_kafka, kafka_topic, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    pipeline, abandoned, crashed = _crashed(sandbox_kafka.bootstrap_servers, kafka_topic(partitions=1), tmp_path)
    assert crashed.status == "failed"
    written = sorted([(0, i) for i in range(60) if i % 10])

    following = run_job(pipeline.reprocess(), tmp_path)  # the abandoned one is never tried again

    assert following.status == "succeeded", following.error
    assert following.reprocessed is not None
    assert (following.reprocessed.selected, following.reprocessed.decoded, following.rows_written) == (6, 0, 0)
    assert _coordinates(pipeline.uri) == written  # each record once
    assert _coordinates(pipeline.quarantine) == [(0, i) for i in range(0, 60, 10)]
    late = run_job(abandoned, tmp_path)  # and if it were, it would find its work done
    assert late.status == "succeeded" and late.already_committed, late.error
    assert _coordinates(pipeline.uri) == written


def test_a_quarantine_another_engine_deleted_rows_from_is_not_reprocessed(
        sandbox_kafka, kafka_topic, produce_keyed, delta_spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its files still hold the deleted rows (a deletion vector marks them): read whole, they would land."""
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    topic = kafka_topic(partitions=1)
    placed = produce_keyed(sandbox_kafka.bootstrap_servers, topic, 60, value=_value, key=lambda i: f"k{i}")
    pipeline = _Pipeline(sandbox_kafka.bootstrap_servers, topic, tmp_path)
    _first_run(pipeline, placed, tmp_path)
    table = f"delta.`{pipeline.quarantine}`"
    delta_spark.spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    delta_spark.spark.sql(f"DELETE FROM {table} WHERE `offset` = 41")
    before = _coordinates(pipeline.uri)

    refused = run_job(pipeline.reprocess(), tmp_path)

    assert refused.status == "failed" and refused.error is not None and refused.error.kind == "table_unsupported"
    assert "deletion vectors" in refused.error.message
    assert _coordinates(pipeline.uri) == before
