"""A maintenance task's steps, as the maintenance worker calls them, each in a unit of work of its own:
take the table (a lease on its row: one task per table at a time), keep it while the job runs
(``renew``), and record what the job did (``finish``), in the audit log too.

The job itself (``spark_jobs.public.maintain_table``) runs between ``claim`` and ``finish`` with no
transaction open. Nothing here waits for a run, or makes a run wait: runs and maintenance meet only in
the Delta log, where a run's append and a compaction both land, and a rewrite that loses a race is
refused and tried again (docs/maintenance.md).
"""

from __future__ import annotations

import uuid
from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import or_, update
from sqlmodel import Session, col

from api.audit.service import record
from api.core.config import Settings
from api.core.db import rows_changed, utcnow
from api.core.enqueue import enqueue_table_maintenance
from api.maintenance.models import TableMaintenance
from api.maintenance.schemas import TableProtocolRead
from api.maintenance.tables import (
    SYSTEM_ACTOR,
    MaintainedTable,
    Step,
    add_to,
    compaction_due,
    due_steps,
    lock_pipeline,
    maintained_table,
    record_health,
)
from api.maintenance.triggers import request
from api.pipelines.maintenance_policy import RetentionFloor
from api.pipelines.models import Pipeline
from spark_jobs.public import MaintenanceReport

# A failed or refused step is tried again by the sweep after this long.
RETRY_AFTER = {"conflict": timedelta(seconds=30), "failed": timedelta(minutes=15)}


@dataclass(frozen=True)
class Claimed:
    """A table a worker holds, and what it is to do."""

    table: MaintainedTable
    steps: tuple[Step, ...]
    request: dict[str, Any]  # who or what asked (trigger, actor)
    seen: dict[str, int]  # the counters when taken: a compaction subtracts these, not what came after
    refused: str | None = None  # a step the deployment refuses now (a retention under the floor)


def claim(*, session: Session, pipeline_id: uuid.UUID, worker: str, settings: Settings) -> Claimed | str:
    """Take the table for ``worker``; else why not: ``gone``, ``busy`` (another task holds it: it sends
    this request again when it lets go) or ``nothing-due``."""
    now = utcnow()
    row = session.get(TableMaintenance, pipeline_id)
    pipeline = session.get(Pipeline, pipeline_id)
    table = maintained_table(pipeline, settings) if pipeline is not None else None
    if row is None or table is None:
        if row is not None:
            row.requested_at, row.request, row.due_at = None, None, None
            session.add(row)
        return "gone"
    free = or_(col(TableMaintenance.lease_owner).is_(None), col(TableMaintenance.lease_expires_at) < now)
    if rows_changed(session, update(TableMaintenance).where(col(TableMaintenance.pipeline_id) == pipeline_id, free)
                    .values(lease_owner=worker, lease_expires_at=now + timedelta(seconds=settings.maintenance_lease_s))) != 1:
        if row.request is not None:  # the holder sends it again when it lets go
            row.request = {**row.request, "bounced": True}
            session.add(row)
        return "busy"
    session.refresh(row)
    asked = row.request or {"trigger": "schedule", "actor": SYSTEM_ACTOR, "steps": None}
    steps: list[Step] = list(asked.get("steps") or due_steps(row, table.policy, now))
    refused = None
    if "vacuum" in steps and not RetentionFloor.of(settings).allows(table.policy.vacuum.retention_hours):
        steps.remove("vacuum")
        refused = (f"vacuum refused: a retention of {table.policy.vacuum.retention_hours} h is under this deployment's "
                   f"minimum of {settings.maintenance_min_retention_hours:g} h")
    row.requested_at, row.request = None, None
    if not steps and refused is None:
        row.lease_owner = row.lease_expires_at = None
        row.due_at = now + timedelta(hours=table.policy.vacuum.interval_hours)
        session.add(row)
        return "nothing-due"
    session.add(row)
    seen = {"files": row.files_since_compaction, "small": row.small_files_since_compaction,
            "commits": row.commits_since_compaction}
    return Claimed(table, tuple(steps), asked, seen, refused)


def renew(*, session: Session, pipeline_id: uuid.UUID, worker: str, settings: Settings) -> bool:
    """Extend the worker's hold on the table; False when it lost it (expired and taken over)."""
    return rows_changed(session, update(TableMaintenance).where(
        col(TableMaintenance.pipeline_id) == pipeline_id, col(TableMaintenance.lease_owner) == worker,
    ).values(lease_expires_at=utcnow() + timedelta(seconds=settings.maintenance_lease_s))) == 1


def finish(*, session: Session, claimed: Claimed, worker: str, report: MaintenanceReport) -> dict[str, Any]:
    """Record what the task did, let go of the table, and send the next task where one is due already
    (runs landed meanwhile, or someone asked). Returns the audit entry's ``after``."""
    now = utcnow()
    pipeline_id = claimed.table.pipeline_id
    lock_pipeline(session, pipeline_id)
    row = session.get(TableMaintenance, pipeline_id, with_for_update=True, populate_existing=True)
    if row is None:  # the tenant is gone
        return {}
    policy, retry_at = claimed.table.policy, None
    done = _what_it_did(claimed, report)
    if report.compaction is not None:
        row.last_compaction = {**done["compaction"], "at": now.isoformat()}
        if report.compaction.outcome == "done":
            row.last_compaction_at = now
            row.compactions += 1
            row.files_compacted += report.compaction.files_removed
            session.add(row)
            session.flush()
            add_to(session, pipeline_id, files_since_compaction=-claimed.seen["files"],
                   small_files_since_compaction=-claimed.seen["small"], commits_since_compaction=-claimed.seen["commits"])
            session.refresh(row)
        elif report.compaction.outcome in RETRY_AFTER:
            row.failures += 1
            retry_at = now + RETRY_AFTER[report.compaction.outcome]
    if report.vacuum is not None or claimed.refused:
        row.last_vacuum = {**done.get("vacuum", {}), "at": now.isoformat()}
        if report.vacuum is not None and report.vacuum.outcome in ("done", "nothing"):
            row.last_vacuum_at = now
            row.vacuums += 1
            row.files_vacuumed += report.vacuum.files_deleted
        else:
            row.failures += 1
            retry_at = min(retry_at or now + RETRY_AFTER["failed"], now + RETRY_AFTER["failed"])
    if report.checkpoint is not None:
        row.last_checkpoint = {**done["checkpoint"], "at": now.isoformat()}
        row.checkpoints += report.checkpoint.outcome == "done"
    if report.health is not None:
        health = report.health
        row.files, row.small_files, row.bytes, row.version = health.files, health.small_files, health.bytes, health.version
        row.observed_at = now
        row.protocol = None if health.features is None else TableProtocolRead.of(health.features).model_dump()
    vacuum_next = (row.last_vacuum_at or row.created_at) + timedelta(hours=policy.vacuum.interval_hours)
    row.due_at = min(vacuum_next, retry_at) if retry_at else vacuum_next
    if row.lease_owner == worker:
        row.lease_owner = row.lease_expires_at = None
    row.updated_at = now
    session.add(row)
    session.flush()
    pipeline = session.get(Pipeline, pipeline_id)
    if pipeline is not None:
        record_health(session, pipeline, row, now)
    asked = claimed.request
    key = asked.get("actor_key_id")
    record(session, tenant_id=claimed.table.tenant_id, actor=str(asked.get("actor") or SYSTEM_ACTOR)[:64],
           actor_key_id=uuid.UUID(key) if key else None, resource_type="pipeline", resource_id=pipeline_id,
           action="maintain", after=done)
    if row.requested_at is not None and (row.request or {}).get("bounced"):  # its message found this task holding the table
        enqueue_table_maintenance(session, pipeline_id)
    elif row.requested_at is None and retry_at is None and compaction_due(row, policy):  # runs added enough meanwhile
        request(session, pipeline_id, trigger="runs", actor=SYSTEM_ACTOR, now=now)
    return done


def _what_it_did(claimed: Claimed, report: MaintenanceReport) -> dict[str, Any]:
    """The task as the audit log and the table's record keep it: who or what asked, and each step's result."""
    done: dict[str, Any] = {"trigger": claimed.request.get("trigger"), "steps": list(claimed.steps)}
    for step in ("compaction", "vacuum", "checkpoint"):
        result = getattr(report, step)
        if result is not None:
            done[step] = asdict(result)
    if claimed.refused:
        done["vacuum"] = {"outcome": "refused", "error": claimed.refused}
    if report.properties_set or report.properties_error:
        done["properties"] = {"set": report.properties_set, "error": report.properties_error}
    return done

