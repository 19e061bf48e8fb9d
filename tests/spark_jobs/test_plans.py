"""The driver's hand-offs to its tasks and back, without Spark: plan files (private, typed) and the
manifest of task reports the driver commits from."""

from __future__ import annotations

import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest

from spark_jobs.egress import EgressPolicy
from spark_jobs.kafka_source import Chunk, ReadPlan, consumer_config
from spark_jobs.plans import (
    DataFile,
    PartitionStats,
    TaskReport,
    collect_read_stats,
    read_plan,
    read_reports,
    write_plan,
    write_reports,
)
from spark_jobs.read_budget import ReadBudget
from spark_jobs.targets.kafka import KafkaSinkPlan


def test_a_plan_file_is_private_and_reads_back_as_the_same_typed_plan(tmp_path: Path) -> None:
    plan = ReadPlan(consumer_config({"bootstrap.servers": "b:9092", "sasl.password": "s3cr3t"}, "g", EgressPolicy()), (Chunk("t", 0, 5, 10),), ReadBudget(30.0))

    path = write_plan(str(tmp_path / "read-plan.pickle"), plan)

    assert stat.S_IMODE(Path(path).stat().st_mode) == 0o600
    assert read_plan(path, ReadPlan) == plan
    with pytest.raises(TypeError, match="holds a ReadPlan, not a KafkaSinkPlan"):
        read_plan(path, KafkaSinkPlan)


def test_the_manifest_hands_the_driver_every_task_report_and_skips_tasks_without_one(tmp_path: Path) -> None:
    manifest = str(tmp_path / "manifest.pickle")
    report = TaskReport(
        files=[DataFile("main", "part-x.parquet", 123, {}, 4, '{"numRecords": 4}')],
        partitions={("t", 0): PartitionStats(records=4, first_offset=5, last_offset=8, bytes=40)},
        quarantined=1,
    )

    write_reports(manifest, [report, None])

    assert read_reports(manifest) == [report]


def test_partition_stats_merge_batches_and_tasks() -> None:
    at = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
    stats = PartitionStats()
    stats.merge(3, 10, 12, 30, at)
    stats.merge(0, None, None, 0)  # an empty batch leaves the bounds alone
    stats.merge(2, 4, 5, 20, at - timedelta(minutes=5))  # older records: the newest stays

    assert stats == PartitionStats(records=5, first_offset=4, last_offset=12, bytes=50, newest=at)


def test_read_stats_of_a_batch_count_each_partition_and_its_newest_record() -> None:
    stamps = [datetime(2026, 12, 4, 12, 0, s, tzinfo=UTC) for s in (5, 9, 1)]
    batch = pa.RecordBatch.from_pydict({
        "key": pa.array([b"k", None, b"kk"], pa.binary()), "value": pa.array([b"vv", b"v", b"v"], pa.binary()),
        "topic": ["t", "t", "t"], "partition": pa.array([0, 0, 1], pa.int32()), "offset": pa.array([7, 8, 3]),
        "timestamp": pa.array(stamps, pa.timestamp("us", tz="UTC"))})
    into: dict[tuple[str, int], PartitionStats] = {}

    collect_read_stats(batch, into)

    assert into == {("t", 0): PartitionStats(records=2, first_offset=7, last_offset=8, bytes=4, newest=stamps[1]),
                    ("t", 1): PartitionStats(records=1, first_offset=3, last_offset=3, bytes=3, newest=stamps[2])}
