"""What the driver and its Spark tasks hand each other: a typed plan in, a typed report out.

A data source's plan travels as a file the driver writes (0600) and names in the source's options:
the Kafka client configs in some plans hold secrets, and options show in the query plan and logs.
Each plan class lives beside the data source that reads it; this module only writes and reads them.

Every writing task returns a ``TaskReport`` (the files it wrote, the Kafka records it read); the
data source's ``commit`` runs on the driver host and leaves the reports in a manifest file, from
which the driver program commits the files.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import WriterCommitMessage

if TYPE_CHECKING:
    from spark_jobs.contract.rows import RowContract

PartitionKey = tuple[str, int]  # (topic, partition)
TableRole = Literal["main", "quarantine"]
# librdkafka properties: strings, but also booleans, numbers and callbacks (its own stubs say Any).
ClientConfig = dict[str, Any]

_Plan = TypeVar("_Plan")


@dataclass(frozen=True)
class DataFile:
    """A Parquet file a task wrote into a table folder, as its Delta add action will name it."""

    table: TableRole
    path: str  # relative to the table root, as in a Delta add action
    size: int
    partition_values: dict[str, str | None]
    num_records: int
    stats: str  # Delta's JSON file statistics


@dataclass
class PartitionStats:
    """The records of one Kafka partition read so far (merged across batches, then tasks)."""

    records: int = 0
    first_offset: int | None = None
    last_offset: int | None = None
    bytes: int = 0
    newest: datetime | None = None  # the latest Kafka timestamp read (a pipeline's freshness)

    def merge(self, records: int, first_offset: int | None, last_offset: int | None, size: int,
              newest: datetime | None = None) -> None:
        # Offsets are None only where no record was read; those leave the bounds alone.
        if records and first_offset is not None and last_offset is not None:
            self.first_offset = first_offset if self.first_offset is None else min(self.first_offset, first_offset)
            self.last_offset = last_offset if self.last_offset is None else max(self.last_offset, last_offset)
        if newest is not None:
            self.newest = newest if self.newest is None else max(self.newest, newest)
        self.records += records
        self.bytes += size


@dataclass
class TaskReport(WriterCommitMessage):
    """One task's outcome, built up while it runs; the driver commits the files and counts the rest."""

    files: list[DataFile] = field(default_factory=list)
    partitions: dict[PartitionKey, PartitionStats] = field(default_factory=dict)
    quarantined: int = 0  # records of this run (not rewritten ones) sent to quarantine
    selected: int = 0  # a reprocess of the quarantine: the quarantined records the task decoded again
    # A keyed table's (``targets.delta_upsert``): the task's latest change per key (Arrow IPC), and the
    # records that are no change (debezium's tombstones).
    changes: bytes | None = None
    skipped: int = 0
    # The pipeline's expectations: per rule, the decoded rows that violated it; and the rows that violated any.
    expectations: dict[str, int] = field(default_factory=dict)
    rows_violating: int = 0

    def expected(self, contract: RowContract | None) -> None:
        """The task's counts of the expectations' violations (none without expectations)."""
        if contract is not None and contract.verdicts is not None:
            self.expectations, self.rows_violating = dict(contract.verdicts.counts), contract.verdicts.rows_violating


def collect_read_stats(batch: pa.RecordBatch, into: dict[PartitionKey, PartitionStats]) -> None:
    """Add the batch's Kafka records (in the columns of Spark's Kafka source) to per-partition counts."""
    if batch.num_rows == 0:
        return
    sizes = pc.add(
        pc.fill_null(pc.binary_length(batch.column("key")), 0),
        pc.fill_null(pc.binary_length(batch.column("value")), 0),
    )
    table = pa.table({"topic": batch.column("topic"), "partition": batch.column("partition"),
                      "offset": batch.column("offset"), "bytes": sizes, "timestamp": batch.column("timestamp")})
    grouped = table.group_by(["topic", "partition"]).aggregate(
        [("offset", "count"), ("offset", "min"), ("offset", "max"), ("bytes", "sum"), ("timestamp", "max")]
    )
    for row in grouped.to_pylist():
        stats = into.setdefault((row["topic"], row["partition"]), PartitionStats())
        stats.merge(row["offset_count"], row["offset_min"], row["offset_max"], row["bytes_sum"], row["timestamp_max"])


def write_plan(path: str, plan: object) -> str:
    """``plan`` in a new file only this user can read; returns ``path`` for the source's options."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        pickle.dump(plan, f)
    return path


def read_plan(path: str, kind: type[_Plan]) -> _Plan:
    # Only ever a file this job's driver wrote into its private scratch folder.
    with open(path, "rb") as f:
        plan = pickle.load(f)
    if not isinstance(plan, kind):
        raise TypeError(f"{path} holds a {type(plan).__name__}, not a {kind.__name__}")
    return plan


def write_reports(path: str, messages: Sequence[WriterCommitMessage | None]) -> None:
    """A data source writer's ``commit`` (on the driver host): the tasks' reports, for the driver program."""
    with open(path, "wb") as f:
        pickle.dump(list(messages), f)


def read_reports(path: str) -> list[TaskReport]:
    """The reports ``write_reports`` left; a task that sent none (no rows) is left out."""
    with open(path, "rb") as f:
        messages = pickle.load(f)
    reports = []
    for message in messages:
        if message is None:
            continue
        if not isinstance(message, TaskReport):
            raise TypeError(f"{path} holds a {type(message).__name__}, not a TaskReport")
        reports.append(message)
    return reports


def task_reports(messages: Sequence[WriterCommitMessage | None]) -> list[TaskReport]:
    """The ``TaskReport``s among a writer's commit messages (Spark types them as their base class)."""
    return [m for m in messages if isinstance(m, TaskReport)]
