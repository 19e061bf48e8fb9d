"""When a pipeline's schedule fires next (cron in a timezone, a fixed interval, or continuously),
and which pipelines are due now.

A continuous pipeline's runs follow one another through its worker (``api.runs.continuous``), which
sets ``next_run_at`` to the moment it means to look again; its slot also stays in ``next_run_at`` for
the scheduler, which fires it only when the worker's message is overdue (a worker died, Redis lost
the message). Whoever moves the slot on first, by compare-and-set, fires it.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from croniter import croniter
from sqlalchemy import bindparam
from sqlmodel import Session, SQLModel, col, select

from api.core.db import utcnow
from api.core.enqueue import enqueue_continuation
from api.pipelines.definition import schedule_of
from api.pipelines.models import Pipeline
from api.pipelines.schedules import ContinuousSchedule, IntervalSchedule, Schedule

# How long a continuous pipeline's slot is held while its worker looks or runs: past it, the
# scheduler takes the slot over (a worker died between two runs; a run longer than this finds its
# pipeline busy, harmlessly).
CONTINUOUS_HOLD_S = 30.0


def next_fire(schedule: Schedule | None, after: datetime) -> datetime | None:
    """The first firing strictly after ``after`` (UTC), or None for an unscheduled pipeline; a
    continuous pipeline is due at ``after`` itself."""
    if schedule is None:
        return None
    if isinstance(schedule, ContinuousSchedule):
        return after  # due at once: it runs back to back
    if isinstance(schedule, IntervalSchedule):
        return after + timedelta(seconds=schedule.interval_seconds)
    zone = ZoneInfo(schedule.timezone)
    fire = croniter(schedule.cron, after.astimezone(zone)).get_next(datetime)
    return fire.astimezone(UTC)


def claim_due(session: Session, *, now: datetime, limit: int) -> list[tuple[uuid.UUID, datetime]]:
    """Pipelines whose slot has come, each moved on to its next slot. After downtime a pipeline
    fires once, not once per missed slot.

    Two schedulers never fire the same slot: the due rows are locked as they are selected
    (``FOR UPDATE SKIP LOCKED`` on PostgreSQL, which hands each scheduler different rows; SQLite
    transactions take the write lock when they begin), and the update is also a compare-and-set
    on the slot that was read.
    """
    stmt = (
        select(col(Pipeline.id), col(Pipeline.next_run_at), col(Pipeline.schedule_as_written))
        .where(Pipeline.state == "active", col(Pipeline.next_run_at) <= now)
        .order_by(col(Pipeline.next_run_at)).limit(limit)
    )
    if session.get_bind().dialect.name == "postgresql":
        stmt = stmt.with_for_update(skip_locked=True)
    due = [(pipeline_id, slot, _moved_on(schedule_of(schedule), now))
           for pipeline_id, slot, schedule in session.exec(stmt).all() if slot is not None]  # due: a slot <= now
    if due:
        table = SQLModel.metadata.tables[Pipeline.__tablename__]  # a Core executemany: one round trip for the batch
        session.execute(
            table.update().where(table.c.id == bindparam("b_id"), table.c.next_run_at == bindparam("b_slot"))
            .values(next_run_at=bindparam("b_next")),
            [{"b_id": pid, "b_slot": slot, "b_next": nxt} for pid, slot, nxt in due],
        )
    return [(pipeline_id, slot) for pipeline_id, slot, _ in due]


def claim_slot(pipeline: Pipeline, slot: datetime, *, now: datetime) -> bool:
    """Take a continuous pipeline's slot for its worker's message (``pipeline`` locked by the caller):
    False when the scheduler, or a newer message, took or moved it meanwhile."""
    if pipeline.next_run_at is None or pipeline.next_run_at != slot:
        return False
    pipeline.next_run_at = _moved_on(schedule_of(pipeline.schedule_as_written), now)
    return True


def look_again(session: Session, pipeline: Pipeline, *, delay_s: float = 0.0) -> None:
    """A continuous pipeline's next look ``delay_s`` from now: its slot set, and its worker's message
    sent with that delay once this commits."""
    pipeline.next_run_at = utcnow() + timedelta(seconds=delay_s)
    enqueue_continuation(session, pipeline.id, pipeline.next_run_at, delay_s)


def _moved_on(schedule: Schedule | None, now: datetime) -> datetime | None:
    """Where a fired slot moves: the schedule's next firing; a continuous pipeline's is held for
    ``CONTINUOUS_HOLD_S`` (its worker sets the next one)."""
    if isinstance(schedule, ContinuousSchedule):
        return now + timedelta(seconds=CONTINUOUS_HOLD_S)
    return next_fire(schedule, now)
