"""A Delta pipeline's table maintenance policy (``target.maintenance``): compaction when the table
needs it, vacuum after a retention, checkpoints and log cleanup. On by default: a Delta target that
leaves the policy out is maintained with the defaults below, written once here (docs/maintenance.md).

The vacuum retention has a floor the operator sets (``INLET_MAINTENANCE_MIN_RETENTION_HOURS``, a week
by default): a shorter one is refused when the pipeline is written, unless the operator allows it
(``INLET_MAINTENANCE_ALLOW_SHORT_RETENTION``), because a vacuum deletes files a long replay or a
reader of an older version may still need.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Annotated

from pydantic import ConfigDict, Field

from api.core.errors import ValidationFailed
from api.pipelines.as_written import AsWritten

if TYPE_CHECKING:
    from api.core.config import Settings

MIB = 1 << 20

# A continuous pipeline commits several times a second: where its policy leaves one of these fields out,
# it takes this default instead (docs/runs.md; measured with bench/freshness.py). Compacting after 10
# small files keeps a table's load near its compacted copy's between two compactions; a week of log
# is what the vacuum's default retention keeps files for, where a month is ~2.6 million entries.
CONTINUOUS_DEFAULTS: dict[str, dict[str, int]] = {
    "compaction": {"min_small_files": 10, "max_commits": 50},
    "checkpoints": {"log_retention_days": 7},
}
ZOrderColumn = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")]


class CompactionPolicy(AsWritten):
    """When and how small files are merged."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    target_file_mb: int = Field(default=128, ge=1, le=1024, description="Size of the files compaction writes, in "
                                "MiB; a file under a quarter of it counts as small")
    min_small_files: int = Field(default=50, ge=2, le=1_000_000, description="Compact once runs have added this many "
                                 "small files since the last compaction")
    max_commits: int = Field(default=100, ge=1, le=1_000_000, description="Or once this many commits have landed "
                             "since the last compaction (and at least two small files)")
    z_order_by: list[ZOrderColumn] = Field(
        default_factory=list, max_length=4,
        description="Columns compacted rows are clustered by (a Z-order curve), for readers that filter on them; "
                    "empty: by topic, partition and offset, which keeps a replay's rewrite small")

    @property
    def small_file_bytes(self) -> int:
        return self.target_file_mb * MIB // 4


class VacuumPolicy(AsWritten):
    """When files the table no longer uses are deleted from storage."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    retention_hours: int = Field(default=168, ge=0, le=87_600, description="Files removed from the table longer ago "
                                 "than this are deleted (delta.deletedFileRetentionDuration). Below the operator's "
                                 "minimum (a week by default) it is refused")
    interval_hours: int = Field(default=24, ge=1, le=8760, description="How often the table is vacuumed")


class CheckpointPolicy(AsWritten):
    """The table's log: checkpoints, and how long its entries are kept."""

    model_config = ConfigDict(extra="forbid")

    interval: int = Field(default=10, ge=1, le=10_000, description="delta.checkpointInterval: a checkpoint every this "
                          "many commits, so a reader replays at most as many log entries")
    log_retention_days: int = Field(default=30, ge=1, le=3650, description="delta.logRetentionDuration: log entries "
                                    "older than this (and older than the newest checkpoint) are deleted; a reader "
                                    "cannot go back to versions before them")


class MaintenancePolicy(AsWritten):
    """Table maintenance of a Delta target; every part on by default."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(default=True, description="false: Inlet never maintains the table on its own (POST "
                          "/pipelines/{id}/maintenance still does, with this policy's values)")
    compaction: CompactionPolicy = Field(default_factory=CompactionPolicy)
    vacuum: VacuumPolicy = Field(default_factory=VacuumPolicy)
    checkpoints: CheckpointPolicy = Field(default_factory=CheckpointPolicy)

    def for_continuous(self) -> MaintenancePolicy:
        """This policy as a continuous pipeline's: each field of ``CONTINUOUS_DEFAULTS`` it leaves out takes
        that default (what it writes stays)."""
        parts = {}
        for name, defaults in CONTINUOUS_DEFAULTS.items():
            part: AsWritten = getattr(self, name)
            parts[name] = part.model_copy(update={field: value for field, value in defaults.items()
                                                  if field not in part.model_fields_set})
        return self.model_copy(update=parts)

    def compaction_due(self, *, small_files: int, commits: int) -> bool:
        """Runs added enough small files, or enough commits with at least two small files, since the last
        compaction (the counters ``api.maintenance`` keeps)."""
        compaction = self.compaction
        if not (self.enabled and compaction.enabled):
            return False
        return small_files >= compaction.min_small_files or (commits >= compaction.max_commits and small_files >= 2)

    def vacuum_due_at(self, last_vacuum_at: datetime | None, tracked_since: datetime) -> datetime | None:
        """When Inlet vacuums the table on its own next: an interval after the last vacuum that ran to its
        end (after the table's maintenance was first tracked, before any); None when it never does."""
        if not (self.enabled and self.vacuum.enabled):
            return None
        return (last_vacuum_at or tracked_since) + timedelta(hours=self.vacuum.interval_hours)


@dataclass(frozen=True)
class RetentionFloor:
    """The shortest vacuum retention a pipeline may ask for, and whether the operator lifted it."""

    min_hours: float = 168.0
    allow_shorter: bool = False

    @classmethod
    def of(cls, settings: Settings) -> RetentionFloor:
        return cls(settings.maintenance_min_retention_hours, settings.maintenance_allow_short_retention)

    def allows(self, hours: float) -> bool:
        return self.allow_shorter or hours >= self.min_hours

    def check(self, policy: MaintenancePolicy) -> None:
        """A 422 naming the field when the policy's retention is under the floor."""
        hours = policy.vacuum.retention_hours
        if not self.allows(hours):
            raise ValidationFailed.field(
                "target.maintenance.vacuum.retention_hours",
                f"a vacuum retention of {hours} h is under this deployment's minimum of {self.min_hours:g} h: a "
                "vacuum would delete files a replay or a reader of an older version may still need")


NO_OPERATOR_FLOOR = RetentionFloor()  # the defaults, for callers with no settings at hand (scripts, tests)
