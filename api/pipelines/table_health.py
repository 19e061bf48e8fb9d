"""A Delta pipeline's table health as the pipeline's read embeds it (``status.table``): stored on the
pipeline's row by whoever last changed it (a run's commit, a maintenance task: ``api.maintenance``
calls ``api.pipelines.service.record_table_health``), so a read, and a list page of them, never opens
the Delta log. What is due is worked out at read time from the stored counters and the policy in
effect. ``GET /pipelines/{id}/maintenance`` has the rest (what each step did, the lease, totals).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from api.pipelines.maintenance_policy import MaintenancePolicy


class TableHealthRead(BaseModel):
    files: int = Field(description="Data files the table holds")
    small_files: int = Field(description="Of those, files under the policy's small-file size (a quarter of "
                                         "target_file_mb)")
    bytes: int = Field(description="Bytes of the live data files: what a full read reads")
    version: int | None = Field(description="The table's version as last seen; null: not written yet")
    observed_at: datetime | None = Field(description="When maintenance last read the table itself; the counts "
                                                     "since add what runs reported")
    files_since_compaction: int
    small_files_since_compaction: int
    commits_since_compaction: int


class TableHealthRecord(TableHealthRead):
    """What the pipeline's row keeps of its table (``pipelines.table_health``)."""

    last_compaction_at: datetime | None = Field(description="When the last compaction committed")
    last_compaction_outcome: str | None = Field(description="The last compaction's outcome: done, nothing, "
                                                            "conflict or failed; null: never tried")
    last_vacuum_at: datetime | None = Field(description="When the last vacuum ran to its end")
    last_vacuum_outcome: str | None = Field(description="The last vacuum's outcome: done, nothing, refused or "
                                                        "failed; null: never tried")
    tracked_since: datetime = Field(description="Since when Inlet maintains the table (the first vacuum is due an "
                                                "interval after)")
    recorded_at: datetime = Field(description="When a run's commit or a maintenance task last recorded this")


class TableHealthSnapshot(TableHealthRecord):
    """The pipeline's Delta table as Inlet last recorded it, and whether maintenance is due."""

    compaction_due: bool = Field(description="Runs added enough small files or commits since the last compaction "
                                             "(target.maintenance.compaction): a task is asked for or running")
    vacuum_due_at: datetime | None = Field(description="When Inlet vacuums the table on its own next; null: "
                                                       "maintenance or vacuum is off")
    due: bool = Field(description="A compaction is due, or the vacuum's time has come")


def snapshot_of(stored: dict[str, Any] | None, policy: MaintenancePolicy, now: datetime) -> TableHealthSnapshot | None:
    """The stored record with what is due now under ``policy``; None when nothing was recorded yet."""
    if stored is None:
        return None
    record = TableHealthRecord.model_validate(stored)
    compaction_due = policy.compaction_due(small_files=record.small_files_since_compaction,
                                           commits=record.commits_since_compaction)
    vacuum_due_at = policy.vacuum_due_at(record.last_vacuum_at, record.tracked_since)
    return TableHealthSnapshot(**record.model_dump(), compaction_due=compaction_due, vacuum_due_at=vacuum_due_at,
                               due=compaction_due or (vacuum_due_at is not None and vacuum_due_at <= now))
