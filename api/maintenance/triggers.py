"""When a table's maintenance task is sent: after the runs that made it due, when someone asks, and
by the scheduler's sweep (vacuums on their interval, retries of failed steps, requests whose message
was lost).

A request is a compare-and-set on the row's ``requested_at``: of a burst of runs that each make the
table due, the first sends the task and the others see it asked for; the task, once it holds the
table, clears it. A task that finds the table held by another leaves the request for that one to
send again when it lets go. Every send happens after the commit that made it (``api.core.enqueue``).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import or_, update
from sqlmodel import Session, col, select

from api.core.db import rows_changed, utcnow
from api.core.enqueue import enqueue_table_maintenance
from api.maintenance.models import TableMaintenance
from api.maintenance.tables import (
    SYSTEM_ACTOR,
    Step,
    add_to,
    compaction_due,
    ensure_row,
    lock_pipeline,
    policy_of,
    record_health,
)
from api.pipelines.models import Pipeline

# A request not taken this long after it was sent is sent again by the sweep (its message may be lost).
RESEND_AFTER = timedelta(minutes=10)


def record_commit(session: Session, pipeline: Pipeline, result: Mapping[str, Any] | None) -> bool:
    """A run committed into the pipeline's table (``result``: the job's, or None when only its offsets
    were recovered): count its files and commit, and send a task if that makes compaction due. Whether
    a task was asked for."""
    policy = policy_of(pipeline)
    if policy is None:
        return False
    now = utcnow()
    result = result or {}
    files, size = int(result.get("files_written") or 0), result.get("bytes_written")
    # A keyed table's MERGE also removes the files it rewrote: those are not taken off here, so its
    # counts run high until the next maintenance task reads the table's own.
    small = files if files and size is not None and int(size) // files < policy.compaction.small_file_bytes else 0
    lock_pipeline(session, pipeline.id)
    ensure_row(session, pipeline, policy, now)
    add_to(session, pipeline.id, files_since_compaction=files, small_files_since_compaction=small,
           commits_since_compaction=1, files=files, small_files=small, bytes=int(size or 0))
    if result.get("delta_version") is not None:
        session.execute(update(TableMaintenance).where(col(TableMaintenance.pipeline_id) == pipeline.id)
                        .values(version=result["delta_version"], updated_at=now))
    row = session.get(TableMaintenance, pipeline.id, populate_existing=True)
    assert row is not None  # ensured above
    record_health(session, pipeline, row, now)
    if not compaction_due(row, policy):
        return False
    return request(session, pipeline.id, trigger="runs", actor=SYSTEM_ACTOR, now=now)


def request(session: Session, pipeline_id: uuid.UUID, *, trigger: str, actor: str, now: datetime,
            actor_key_id: uuid.UUID | None = None, steps: list[Step] | None = None) -> bool:
    """Ask for a task (``steps``: these, else what is due when it starts); False when one was asked
    for already and not taken yet: it will do this too (an explicit request's steps are added to it)."""
    asked = {"trigger": trigger, "actor": actor, "actor_key_id": str(actor_key_id) if actor_key_id else None,
             "steps": steps, "at": now.isoformat()}
    won = rows_changed(session, update(TableMaintenance).where(
        col(TableMaintenance.pipeline_id) == pipeline_id, col(TableMaintenance.requested_at).is_(None),
    ).values(requested_at=now, request=asked, due_at=now + RESEND_AFTER, updated_at=now))
    if won:
        enqueue_table_maintenance(session, pipeline_id)
        return True
    if steps is not None:  # someone asked for these explicitly: the pending task does them, as asked by them
        row = session.get(TableMaintenance, pipeline_id, with_for_update=True, populate_existing=True)
        if row is not None:
            pending = (row.request or {}).get("steps")
            asked["steps"] = sorted(set(steps) | set(pending or []))
            row.request = asked
            session.add(row)
    return False


def send_due(session: Session, *, now: datetime, limit: int) -> int:
    """The sweep: every table whose ``due_at`` passed and that no task holds gets a task (deleted
    pipelines' rows stop being due); how many were sent."""
    free = or_(col(TableMaintenance.lease_owner).is_(None), col(TableMaintenance.lease_expires_at) < now)
    rows = session.exec(select(TableMaintenance.pipeline_id, Pipeline.id).outerjoin(
        Pipeline, col(Pipeline.id) == col(TableMaintenance.pipeline_id)).where(
        col(TableMaintenance.due_at) <= now, free).order_by(col(TableMaintenance.due_at)).limit(limit)).all()
    sent = 0
    for pipeline_id, existing in rows:
        if existing is None:
            session.execute(update(TableMaintenance).where(col(TableMaintenance.pipeline_id) == pipeline_id)
                            .values(due_at=None, requested_at=None, request=None))
            continue
        # A request already pending whose message may be lost is sent again, as it was asked.
        won = rows_changed(session, update(TableMaintenance).where(
            col(TableMaintenance.pipeline_id) == pipeline_id, col(TableMaintenance.due_at) <= now,
        ).values(requested_at=now, due_at=now + RESEND_AFTER, updated_at=now,
                 request=_pending_or(session, pipeline_id, now)))
        if won:
            enqueue_table_maintenance(session, pipeline_id)
            sent += 1
    return sent


def _pending_or(session: Session, pipeline_id: uuid.UUID, now: datetime) -> dict[str, Any]:
    row = session.get(TableMaintenance, pipeline_id)
    pending = row.request if row is not None else None
    return pending or {"trigger": "schedule", "actor": SYSTEM_ACTOR, "actor_key_id": None, "steps": None,
                       "at": now.isoformat()}

