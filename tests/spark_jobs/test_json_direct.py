"""A json run into Delta writes directly: its tasks decode the values on Arrow (``formats.json_values``)
and write the files themselves on a bare SparkContext (the driver here has no SQL session to give, so
a run that went through Spark SQL's ``from_json`` would fail), in the session's time zone, and the
records that do not decode go to the quarantine table with their reasons. The job in this process
(``spark_jobs.job.execute``) in a process of its own, so that its SparkContext is started with the
test's time zone (a process has one, and another test's may be running here), local Spark, the sandbox
Kafka; ~20 s."""

from __future__ import annotations

import datetime as dt
import json
import multiprocessing
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, cast

import pytest

from spark_jobs.formats.json_values import NOT_SCHEMA, NULL_VALUE
from spark_jobs.job import execute
from spark_jobs.spec import RunResult, RunSpec
from tests.spark_jobs.helpers import coordinates, make_spec, read_table

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.slow


class ContextOnly:
    """A ``spark_jobs.job.Driver`` with a local SparkContext in ``time_zone``, and no SQL session."""

    def __init__(self, time_zone: str) -> None:
        self.time_zone = time_zone

    @contextmanager
    def context(self, name: str) -> Iterator[SparkContext]:
        from pyspark import SparkConf, SparkContext

        conf = (SparkConf().setMaster("local[2]").setAppName(name).set("spark.ui.enabled", "false")
                .set("spark.sql.session.timeZone", self.time_zone))
        with SparkContext.getOrCreate(conf) as context:  # stopped on the way out
            yield context

    @contextmanager
    def session(self, name: str) -> Iterator[SparkSession]:
        raise AssertionError(f"{name} asked for a SQL session")
        yield  # a generator, as the protocol's context manager


def _execute_alone(spec: RunSpec, time_zone: str) -> RunResult:
    """``execute`` on a ``ContextOnly`` driver, called in a fresh process."""
    return execute(spec, ContextOnly(time_zone))


def _value(i: int) -> bytes | None:
    if i % 10 == 5:
        return None  # a tombstone
    if i % 10 == 0:
        return b"{not json"
    if i % 7 == 0:
        return b'{"n": "seven"}'  # a string where the schema wants an INT
    return json.dumps({"n": i, "at": "2026-11-26 10:00:00", "tags": [f"t{i}"]}).encode()


def test_a_json_run_decodes_in_its_tasks_and_quarantines_with_reasons(sandbox_kafka, kafka_topic, produce_keyed,
                                                                      tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)  # the tasks' Python: this one, with pyarrow
    topic = kafka_topic(partitions=2)
    placed = produce_keyed(sandbox_kafka.bootstrap_servers, topic, 80, value=lambda i: cast(bytes, _value(i)),
                           key=lambda i: f"k{i}")
    ranges = {topic: {str(p): (0, len(offsets)) for p, offsets in placed.items()}}
    uri, quarantine = str(tmp_path / "orders"), str(tmp_path / "orders__quarantine")
    spec = make_spec(sandbox_kafka.bootstrap_servers, ranges, {"type": "delta", "uri": uri, "quarantine_uri": quarantine},
                     value_format="json", schema="n INT, at TIMESTAMP, tags ARRAY<STRING>")
    assert spec.writes_directly

    with multiprocessing.get_context("spawn").Pool(1) as alone:
        result = alone.apply(_execute_alone, (spec, "America/New_York"))

    assert result.status == "succeeded", result.error
    bad = {i for i in range(80) if _value(i) is None or i % 10 == 0 or i % 7 == 0}
    assert (result.rows_written, result.rows_quarantined) == (80 - len(bad), len(bad))
    good = read_table(uri)
    assert good.column_names == ["key", "n", "at", "tags", "topic", "partition", "offset", "timestamp", "timestampType",
                                 "_inlet_run_id"]
    rows = sorted(good.select(["key", "n", "at", "tags"]).to_pylist(), key=lambda r: r["n"])
    # A time without a zone is read in the session's (New York, UTC-5 in November), as from_json reads it.
    at = dt.datetime(2026, 11, 26, 15, 0, tzinfo=dt.UTC)
    assert rows == [{"key": f"k{i}", "n": i, "at": at, "tags": [f"t{i}"]} for i in range(80) if i not in bad]
    rejected = read_table(quarantine)
    assert rejected.column_names == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType",
                                     "_inlet_quarantine_reason", "_inlet_run_id"]
    by_key = {r["key"]: (r["value"], r["_inlet_quarantine_reason"]) for r in rejected.to_pylist()}
    assert by_key == {f"k{i}".encode(): (_value(i), NULL_VALUE if _value(i) is None else NOT_SCHEMA) for i in bad}
    assert set(rejected["_inlet_run_id"].to_pylist()) == set(good["_inlet_run_id"].to_pylist()) == {spec.run_id}
    assert sorted(coordinates(good) + coordinates(rejected)) == sorted((p, o) for p, offsets in placed.items() for o in offsets)
