"""A run's tally: what it read from each partition, the gaps it skipped, what its target committed
and how long each step took, turned into the spec's ``RunResult`` at the end (a failed one too).

The run (``spark_jobs.run``) keeps it; targets never touch it, they return what they committed.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from spark_jobs.errors import JobError
from spark_jobs.plans import PartitionKey, PartitionStats, TaskReport
from spark_jobs.spec import (
    ExpectationCount,
    JobFailure,
    OffsetRange,
    PartitionResult,
    ReprocessCount,
    RunResult,
    RunSpec,
    Timings,
    redact,
)

if TYPE_CHECKING:
    from spark_jobs.targets import Committed
    from spark_jobs.watermarks import Gap


class Tally:
    """Counters and timings of one run, and whether it was cancelled."""

    def __init__(self, cancelled: threading.Event | None = None):
        self.cancelled = cancelled or threading.Event()
        self.started_at = datetime.now(UTC)
        self.stats: dict[PartitionKey, PartitionStats] = {}
        self.gaps: dict[PartitionKey, OffsetRange] = {}
        self.rows_written = self.rows_quarantined = 0
        self.violations: dict[str, int] = {}  # per expectation, the decoded rows that violated it
        self.rows_violating = 0
        self.bytes_written: int | None = None
        self.delta_version: int | None = None
        self.files_written: int | None = None
        self.already_committed = False
        self.reprocessed: ReprocessCount | None = None
        self.session_start_s = self.process_s = self.commit_s = 0.0

    def check_cancelled(self, before: str) -> None:
        """Stop here if the run was cancelled: Spark cancels the jobs it runs, not the steps between them."""
        if self.cancelled.is_set():
            raise JobError("cancelled", f"the run was cancelled before {before}")

    def skipped(self, gaps: list[Gap]) -> None:
        """The offsets lost to retention that the run skips (on_data_loss=skip)."""
        self.gaps = {(g.topic, g.partition): (g.start, g.end) for g in gaps}

    def read(self, reports: list[TaskReport]) -> None:
        """The Kafka records the tasks read, per partition."""
        for report in reports:
            for key, stats in report.partitions.items():
                total = self.stats.setdefault(key, PartitionStats())
                total.merge(stats.records, stats.first_offset, stats.last_offset, stats.bytes, stats.newest)
            for name, count in report.expectations.items():
                self.violations[name] = self.violations.get(name, 0) + count
            self.rows_violating += report.rows_violating

    def committed(self, outcome: Committed) -> None:
        if outcome.already_committed:
            self.already_committed = True
            self.stats = {}  # an earlier attempt wrote these records: none of them counts for this one
            self.violations, self.rows_violating = {}, 0
            return
        self.rows_written, self.rows_quarantined = outcome.rows, outcome.quarantined
        self.bytes_written, self.delta_version, self.files_written = outcome.bytes, outcome.version, outcome.files
        self.reprocessed = outcome.reprocessed

    def result(self, spec: RunSpec, error: JobError | None = None) -> RunResult:
        """The result of ``spec``'s run: every partition it planned, read or not; the error redacted."""
        partitions = []
        for topic, ranges in sorted(spec.source.ranges.items()):
            for key, (start, end) in sorted(ranges.items(), key=lambda kv: int(kv[0])):
                stats = self.stats.get((topic, int(key)))
                partitions.append(
                    PartitionResult(
                        topic=topic,
                        partition=int(key),
                        start=start,
                        end=end,
                        records_read=stats.records if stats else 0,
                        first_offset=stats.first_offset if stats else None,
                        last_offset=stats.last_offset if stats else None,
                        newest_timestamp=stats.newest if stats else None,
                        gap=self.gaps.get((topic, int(key))),
                    )
                )
        secrets = spec.secret_values()
        return RunResult(
            run_id=spec.run_id,
            status="failed" if error else "succeeded",
            partitions=partitions,
            rows_written=self.rows_written,
            rows_quarantined=self.rows_quarantined,
            bytes_read=sum(s.bytes for s in self.stats.values()),
            bytes_written=self.bytes_written,
            delta_version=self.delta_version,
            files_written=self.files_written,
            already_committed=self.already_committed,
            expectations=[ExpectationCount(name=e.name, action=e.action, rows_violating=self.violations.get(e.name, 0))
                          for e in spec.contract.expectations],
            rows_violating=self.rows_violating,
            reprocessed=self.reprocessed,
            timings=Timings(
                started_at=self.started_at,
                finished_at=datetime.now(UTC),
                session_start_s=round(self.session_start_s, 3),
                process_s=round(self.process_s, 3),
                commit_s=round(self.commit_s, 3),
            ),
            error=JobFailure(kind=error.kind, message=redact(error.message, secrets), topic=error.topic, partition=error.partition)
            if error
            else None,
        )
