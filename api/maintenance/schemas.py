"""``/pipelines/{id}/maintenance``: a Delta pipeline's table health and its maintenance, read and asked for."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from api.maintenance.tables import Step
from api.pipelines.table_health import TableHealthRead
from spark_jobs.public import OPERATIONS, TableFeatures


class MaintenanceStatus(BaseModel):
    """A Delta pipeline's table: its health, and what its last compaction, vacuum and checkpoint did."""

    pipeline_id: uuid.UUID
    policy: dict[str, Any] = Field(description="The policy in effect (target.maintenance), defaults filled in")
    table: TableHealthRead
    last_compaction: dict[str, Any] | None = Field(description="The last compaction's outcome (done, nothing, "
                                                   "conflict, failed) and figures")
    last_compaction_at: datetime | None = Field(description="When the last compaction committed")
    last_vacuum: dict[str, Any] | None
    last_vacuum_at: datetime | None = Field(description="When the last vacuum ran to its end")
    last_checkpoint: dict[str, Any] | None
    running: bool = Field(description="A maintenance task holds the table now")
    requested_at: datetime | None = Field(description="A task asked for and not yet started")
    due_at: datetime | None = Field(description="When the scheduler sends a task on its own (the next vacuum, a "
                                                "retry)")
    totals: dict[str, int] = Field(description="Compactions, vacuums, checkpoints, failures, files compacted and "
                                               "files vacuumed so far")
    protocol: TableProtocolRead | None = Field(default=None, description="The table's protocol and features as the "
                                               "last maintenance task read them; null: none read it yet")


class MaintenanceRequest(BaseModel):
    """Maintain the table now (on the maintenance queue), or, with ``dry_run``, say what that would do."""

    model_config = ConfigDict(extra="forbid")

    dry_run: bool = Field(default=False, description="Do nothing; answer what a task would do now")
    steps: list[Step] | None = Field(default=None, min_length=1, description="Which steps; all three when "
                                     "left out. compact merges small files whatever the trigger's counters say")

    @field_validator("steps")
    @classmethod
    def _distinct(cls, steps: list[Step] | None) -> list[Step] | None:
        if steps is not None and len(set(steps)) != len(steps):
            raise ValueError("each step at most once")
        return steps


class TableProtocolRead(BaseModel):
    """What the table asks of its writers (another engine may have turned any feature on), and which of
    Inlet's operations refuse it for that (docs/maintenance.md, "Tables other engines write")."""

    reader_version: int = Field(description="The table's minReaderVersion")
    writer_version: int = Field(description="The table's minWriterVersion")
    features: list[str] = Field(description="Its table features, explicit or implied by the versions, sorted")
    refused: dict[str, str] = Field(description="Each operation Inlet refuses on this table (append, replace, merge, "
                                                "history_merge, schema_change, compact, vacuum, checkpoint, "
                                                "properties), with why and what to do; empty: every one is allowed")
    by_delta_spark: list[str] = Field(default_factory=list, description="Of the operations allowed, those delta-spark "
                                      "does for Inlet (the run's Spark; maintenance on the Spark cluster)")

    @classmethod
    def of(cls, features: TableFeatures) -> TableProtocolRead:
        writers = {op: features.writer(op, spark=True)[0] for op in OPERATIONS}
        refused = {op: why for op, why in features.allowed().items() if why is not None and writers[op] is None}
        return cls(reader_version=features.reader_version, writer_version=features.writer_version,
                   features=sorted(features.features), refused=refused,
                   by_delta_spark=[op for op in OPERATIONS if writers[op] == "delta-spark"])


class MaintenancePreviewRead(BaseModel):
    files_to_compact: int
    bytes_to_compact: int
    files_to_write: int = Field(description="Files compaction would write, at least")
    files_to_vacuum: int
    files_to_vacuum_sample: list[str] = Field(description="The first of them (up to 100), relative to the table")
    properties_to_set: dict[str, str] = Field(description="Table properties (delta.*) the task would change")
    table: TableHealthRead | None = Field(description="The table read now; null: it has no version yet")
    protocol: TableProtocolRead | None = Field(default=None, description="The table's protocol and features, read "
                                                                         "now; null: it has no version yet")


class MaintenanceAccepted(BaseModel):
    pipeline_id: uuid.UUID
    dry_run: bool
    steps: list[Step]
    queued: bool = Field(description="A task was sent now; false when a dry run, or when one was asked for and "
                                     "not started yet (it does these steps too)")
    preview: MaintenancePreviewRead | None = Field(description="What a task would do now (dry runs only)")
