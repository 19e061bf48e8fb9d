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
from sqlmodel import Session, col

from api.core.config import Settings
from api.maintenance.models import TableMaintenance
from api.pipelines.definition import definition_of
from api.pipelines.maintenance_policy import MaintenancePolicy
from api.pipelines.models import Pipeline
from api.pipelines.schemas import DeltaTarget
from api.pipelines.storage import resolve_delta_uri
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


def delta_target(pipeline: Pipeline) -> DeltaTarget | None:
    target = definition_of(pipeline).target
    return target if isinstance(target, DeltaTarget) else None


def maintained_table(pipeline: Pipeline, settings: Settings) -> MaintainedTable | None:
    """The pipeline's table; None for a Kafka target."""
    target = delta_target(pipeline)
    if target is None:
        return None
    return MaintainedTable(pipeline.id, pipeline.tenant_id,
                           resolve_delta_uri(settings.resolved_storage_root, pipeline.tenant_id, target.path),
                           settings.resolved_storage_options, target.maintenance)


def steps_of(names: list[Step] | tuple[Step, ...]) -> MaintenanceSteps:
    return MaintenanceSteps(compact="compact" in names, vacuum="vacuum" in names, checkpoint="checkpoint" in names)


def compaction_due(row: TableMaintenance, policy: MaintenancePolicy) -> bool:
    """Runs added enough small files, or enough commits with at least two small files, since the last compaction."""
    compaction = policy.compaction
    if not (policy.enabled and compaction.enabled):
        return False
    small = row.small_files_since_compaction
    return small >= compaction.min_small_files or (row.commits_since_compaction >= compaction.max_commits and small >= 2)


def vacuum_due(row: TableMaintenance, policy: MaintenancePolicy, now: datetime) -> bool:
    if not (policy.enabled and policy.vacuum.enabled):
        return False
    return row.last_vacuum_at is None or row.last_vacuum_at + timedelta(hours=policy.vacuum.interval_hours) <= now


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
