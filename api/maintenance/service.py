"""What the API asks of table maintenance: a Delta pipeline's table health and last maintenance, and a
task now (or, as a dry run, what one would do). Called alike by the API and the portal.

A task is asked for like the runs ask for one (``api.maintenance.triggers.request``) and done by the
maintenance worker, which records it in the audit log (``maintain``); the request is recorded too
(``maintenance_requested``), with who asked.
"""

from __future__ import annotations

import logging
import uuid

from sqlmodel import Session

from api.audit.service import record_by
from api.core.config import Settings
from api.core.db import utcnow
from api.core.errors import Conflict, ServiceUnavailable, ValidationFailed
from api.core.security import TenantContext
from api.maintenance.models import TableMaintenance
from api.maintenance.schemas import (
    MaintenanceAccepted,
    MaintenancePreviewRead,
    MaintenanceRequest,
    MaintenanceStatus,
    TableHealthRead,
    TableProtocolRead,
)
from api.maintenance.tables import STEPS, MaintainedTable, Step, ensure_row, health_of, maintained_table, steps_of
from api.maintenance.triggers import request
from api.pipelines.as_written import in_full
from api.pipelines.maintenance_policy import RetentionFloor
from api.pipelines.service import get_pipeline
from spark_jobs.public import MaintenancePreview, preview_maintenance

log = logging.getLogger(__name__)
SAMPLE = 100


class NotADeltaPipeline(Conflict):
    code, title = "not-a-delta-pipeline", "The pipeline has no Delta table"


def _table(session: Session, ctx: TenantContext, pipeline_id: uuid.UUID, settings: Settings) -> MaintainedTable:
    pipeline = get_pipeline(session=session, ctx=ctx, pipeline_id=pipeline_id)
    table = maintained_table(pipeline, settings)
    if table is None:
        raise NotADeltaPipeline(f"pipeline {pipeline_id} writes to Kafka: only Delta tables are maintained")
    ensure_row(session, pipeline, table.policy, utcnow())
    return table


def get_status(*, session: Session, ctx: TenantContext, pipeline_id: uuid.UUID, settings: Settings) -> MaintenanceStatus:
    table = _table(session, ctx, pipeline_id, settings)
    row = session.get(TableMaintenance, pipeline_id, populate_existing=True)
    assert row is not None  # ensured above
    now = utcnow()
    return MaintenanceStatus(
        pipeline_id=pipeline_id, policy=in_full(table.policy), table=health_of(row),
        last_compaction=row.last_compaction, last_compaction_at=row.last_compaction_at, last_vacuum=row.last_vacuum,
        last_vacuum_at=row.last_vacuum_at, last_checkpoint=row.last_checkpoint,
        running=row.lease_owner is not None and row.lease_expires_at is not None and row.lease_expires_at > now,
        requested_at=row.requested_at, due_at=row.due_at,
        totals={name: getattr(row, name) for name in ("compactions", "vacuums", "checkpoints", "failures",
                                                      "files_compacted", "files_vacuumed")},
        protocol=None if row.protocol is None else TableProtocolRead.model_validate(row.protocol),
    )


def request_maintenance(*, session: Session, ctx: TenantContext, pipeline_id: uuid.UUID, body: MaintenanceRequest,
                        settings: Settings) -> MaintenanceAccepted:
    table = _table(session, ctx, pipeline_id, settings)
    steps = list(body.steps or STEPS)
    hours = table.policy.vacuum.retention_hours
    if "vacuum" in steps and not RetentionFloor.of(settings).allows(hours):
        raise ValidationFailed.field(
            "steps", f"vacuum refused: the pipeline's retention of {hours} h (target.maintenance.vacuum."
                     f"retention_hours) is under this deployment's minimum of "
                     f"{settings.maintenance_min_retention_hours:g} h")
    if body.dry_run:
        return MaintenanceAccepted(pipeline_id=pipeline_id, dry_run=True, steps=steps, queued=False,
                                   preview=_preview(table, steps))
    queued = request(session, pipeline_id, trigger="api", actor=ctx.actor, now=utcnow(), actor_key_id=ctx.key_id,
                     steps=steps)
    record_by(session, ctx, resource_type="pipeline", resource_id=pipeline_id, action="maintenance_requested",
              after={"steps": steps, "queued": queued})
    return MaintenanceAccepted(pipeline_id=pipeline_id, dry_run=False, steps=steps, queued=queued, preview=None)


def _preview(table: MaintainedTable, steps: list[Step]) -> MaintenancePreviewRead:
    try:
        found: MaintenancePreview = preview_maintenance(table.store, table.uri, table.job_policy, steps_of(steps))
    except Exception as exc:  # noqa: BLE001 (storage down or refusing: the caller can try again)
        log.warning("dry run of pipeline %s's maintenance could not read its table (%s)", table.pipeline_id,
                    type(exc).__name__)
        raise ServiceUnavailable(f"the pipeline's table could not be read ({type(exc).__name__}); try again") from None
    health = found.health
    return MaintenancePreviewRead(
        files_to_compact=found.files_to_compact, bytes_to_compact=found.bytes_to_compact, files_to_write=found.bins,
        files_to_vacuum=len(found.files_to_vacuum), files_to_vacuum_sample=found.files_to_vacuum[:SAMPLE],
        properties_to_set=found.properties_to_set,
        table=None if health is None else TableHealthRead(
            files=health.files, small_files=health.small_files, bytes=health.bytes, version=health.version,
            observed_at=utcnow(), files_since_compaction=0, small_files_since_compaction=0,
            commits_since_compaction=0),
        protocol=None if found.features is None else TableProtocolRead.of(found.features),
    )
