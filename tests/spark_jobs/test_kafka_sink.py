"""The Kafka target's task writer below Spark (``targets.kafka._ProduceWriter``), on the sandbox: its
producer is served while the run's read holds the task, so deliveries (and, over OAUTHBEARER, token
refreshes: tests/runs/test_oauth_runs.py proves those on a real broker) do not wait for the next batch."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from spark_jobs import kafka_errors
from spark_jobs.read_budget import ReadBudget
from spark_jobs.targets.kafka import KafkaSinkPlan, _ProduceWriter

_HOLD_S = 10.0  # how long the read may hold the task: far longer than a delivery to the sandbox takes


class _Recording(kafka_errors.Refusals):
    """Refusals that tell when the producer's first delivery was acknowledged."""

    acknowledged = threading.Event()

    def progressed(self) -> None:
        super().progressed()
        self.acknowledged.set()


def _batch(topic: str, offsets: range) -> pa.RecordBatch:
    return pa.record_batch({
        "key": pa.array([f"k{o}".encode() for o in offsets], pa.binary()),
        "value": pa.array([f"v{o}".encode() for o in offsets], pa.binary()),
        "topic": pa.array([topic] * len(offsets), pa.string()),
        "partition": pa.array([0] * len(offsets), pa.int32()),
        "offset": pa.array(list(offsets), pa.int64()),
        "timestamp": pa.array([1_796_400_000_000 + o for o in offsets], pa.timestamp("ms", tz="UTC")),
    })


def test_deliveries_are_acknowledged_while_the_read_holds_the_task(
    sandbox_kafka, kafka_topic, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = kafka_topic(partitions=1)
    monkeypatch.setattr(kafka_errors, "Refusals", _Recording)
    _Recording.acknowledged = threading.Event()
    plan = KafkaSinkPlan({"bootstrap.servers": sandbox_kafka.bootstrap_servers}, target, "run-1",
                         str(tmp_path / "manifest.pickle"), ReadBudget())
    seen_while_held: list[bool] = []

    def read() -> Iterator[pa.RecordBatch]:
        yield _batch("source", range(50))
        # The next batch is slow to come (a paced or stalled broker upstream): nobody polls here.
        seen_while_held.append(_Recording.acknowledged.wait(_HOLD_S))
        yield _batch("source", range(50, 100))

    report = _ProduceWriter(plan).write(read())

    assert seen_while_held == [True]
    assert report.partitions[("source", 0)].records == 100
