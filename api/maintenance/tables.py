"""What the maintenance domain shares: a pipeline's table as maintenance reaches it (where it lives,
its policy in the job's terms), its ``table_maintenance`` row, and when each step is due.

Compaction is due by what runs added since the last one (small files, commits), never by a clock;
a vacuum by its interval since the last that ran; a checkpoint with each vacuum (every writer's
commit also writes one at ``delta.checkpointInterval``).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from sqlalchemy import Table, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlmodel import Session, col, select

from api.core.config import Settings
from api.maintenance.models import TableMaintenance
from api.pipelines.definition import definition_of
from api.pipelines.maintenance_policy import MaintenancePolicy
from api.pipelines.models import Pipeline
from api.pipelines.schemas import DeltaTarget
from api.pipelines.service import record_table_health
from api.pipelines.storage import resolve_delta_uri
from api.pipelines.table_health import TableHealthRead, TableHealthRecord
from spark_jobs.public import MaintenanceSteps, Store, TablePolicy

Step = Literal["compact", "vacuum", "checkpoint"]
STEPS: tuple[Step, ...] = ("compact", "vacuum", "checkpoint")
SYSTEM_ACTOR = "inlet:maintenance"  # the audit log's actor of tasks Inlet started on its own


@dataclass(frozen=True)
class MaintainedTable:
    """A Delta pipeline's table, and the policy it is maintained by."""

    pipeline_id: uuid.UUID
    tenant_id: uuid.UUID
    uri: str
    storage_options: dict[str, str]
    policy: MaintenancePolicy

    @property
    def store(self) -> Store:
        return Store(self.storage_options)

    @property
    def job_policy(self) -> TablePolicy:
        compaction, checkpoints = self.policy.compaction, self.policy.checkpoints
        return TablePolicy(target_file_bytes=compaction.target_file_mb << 20,
                           small_file_bytes=compaction.small_file_bytes, z_order_by=tuple(compaction.z_order_by),
                           vacuum_retention_hours=self.policy.vacuum.retention_hours,
                           checkpoint_interval=checkpoints.interval, log_retention_days=checkpoints.log_retention_days)


def policy_of(pipeline: Pipeline) -> MaintenancePolicy | None:
    """The maintenance policy in effect on the pipeline's table; None for a Kafka target."""
    return definition_of(pipeline).maintenance


def maintained_table(pipeline: Pipeline, settings: Settings) -> MaintainedTable | None:
    """The pipeline's table; None for a Kafka target."""
    definition = definition_of(pipeline)
    target, policy = definition.target, definition.maintenance
    if not isinstance(target, DeltaTarget) or policy is None:
        return None
    return MaintainedTable(pipeline.id, pipeline.tenant_id,
                           resolve_delta_uri(settings.resolved_storage_root, pipeline.tenant_id, target.path),
                           settings.resolved_storage_options, policy)


def steps_of(names: list[Step] | tuple[Step, ...]) -> MaintenanceSteps:
    return MaintenanceSteps(compact="compact" in names, vacuum="vacuum" in names, checkpoint="checkpoint" in names)


def compaction_due(row: TableMaintenance, policy: MaintenancePolicy) -> bool:
    return policy.compaction_due(small_files=row.small_files_since_compaction, commits=row.commits_since_compaction)


def vacuum_due(row: TableMaintenance, policy: MaintenancePolicy, now: datetime) -> bool:
    due_at = policy.vacuum_due_at(row.last_vacuum_at, row.created_at)
    return due_at is not None and (row.last_vacuum_at is None or due_at <= now)


def due_steps(row: TableMaintenance, policy: MaintenancePolicy, now: datetime) -> list[Step]:
    steps: list[Step] = ["compact"] if compaction_due(row, policy) else []
    return steps + (["vacuum", "checkpoint"] if vacuum_due(row, policy, now) else [])


def ensure_row(session: Session, pipeline: Pipeline, policy: MaintenancePolicy, now: datetime) -> None:
    """The pipeline's row, created if it has none (by whichever of two concurrent callers comes first)."""
    table: Table = TableMaintenance.__table__  # type: ignore[attr-defined]  # every table=True model has one
    fresh = TableMaintenance(pipeline_id=pipeline.id, tenant_id=pipeline.tenant_id, created_at=now, updated_at=now,
                             due_at=now + timedelta(hours=policy.vacuum.interval_hours))
    values = {c.name: getattr(fresh, c.name) for c in table.columns}
    insert = postgresql.insert if session.get_bind().dialect.name == "postgresql" else sqlite.insert
    session.execute(insert(table).values(**values).on_conflict_do_nothing(index_elements=["pipeline_id"]))


def add_to(session: Session, pipeline_id: uuid.UUID, **amounts: Any) -> None:
    """Add to the row's counters in one statement (concurrent writers never lose an addition)."""
    columns = {name: getattr(TableMaintenance, name) + amount for name, amount in amounts.items()}
    session.execute(update(TableMaintenance).where(col(TableMaintenance.pipeline_id) == pipeline_id)
                    .values(**columns))


def health_of(row: TableMaintenance) -> TableHealthRead:
    return TableHealthRead(files=row.files, small_files=row.small_files, bytes=row.bytes, version=row.version,
                           observed_at=row.observed_at, files_since_compaction=row.files_since_compaction,
                           small_files_since_compaction=row.small_files_since_compaction,
                           commits_since_compaction=row.commits_since_compaction)


def lock_pipeline(session: Session, pipeline_id: uuid.UUID) -> None:
    """Take the pipeline's row before its ``table_maintenance`` row: a run's commit and a task's end each
    write both, and one order keeps them from deadlocking (PostgreSQL; SQLite serialises writers)."""
    session.execute(select(col(Pipeline.id)).where(col(Pipeline.id) == pipeline_id).with_for_update())


def record_health(session: Session, pipeline: Pipeline, row: TableMaintenance, now: datetime) -> None:
    """Keep the row's view of the table on the pipeline's row too: what ``GET /pipelines/{id}`` and its
    list show, without reading this table or the Delta log per pipeline."""
    record_table_health(session, pipeline, TableHealthRecord(
        **health_of(row).model_dump(), last_compaction_at=row.last_compaction_at,
        last_compaction_outcome=(row.last_compaction or {}).get("outcome"), last_vacuum_at=row.last_vacuum_at,
        last_vacuum_outcome=(row.last_vacuum or {}).get("outcome"), tracked_since=row.created_at, recorded_at=now))
