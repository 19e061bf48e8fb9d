"""When a pipeline's schedule fires next (cron in a timezone, or a fixed interval), and which
pipelines are due now."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from croniter import croniter
from sqlalchemy import bindparam
from sqlmodel import Session, SQLModel, col, select

from api.pipelines.definition import schedule_of
from api.pipelines.models import Pipeline
from api.pipelines.schemas import IntervalSchedule, Schedule


def next_fire(schedule: Schedule | None, after: datetime) -> datetime | None:
    """The first firing strictly after ``after`` (UTC), or None for an unscheduled pipeline."""
    if schedule is None:
        return None
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
    due = [(pipeline_id, slot, next_fire(schedule_of(schedule), now))
           for pipeline_id, slot, schedule in session.exec(stmt).all() if slot is not None]  # due: a slot <= now
    if due:
        table = SQLModel.metadata.tables[Pipeline.__tablename__]  # a Core executemany: one round trip for the batch
        session.execute(
            table.update().where(table.c.id == bindparam("b_id"), table.c.next_run_at == bindparam("b_slot"))
            .values(next_run_at=bindparam("b_next")),
            [{"b_id": pid, "b_slot": slot, "b_next": nxt} for pid, slot, nxt in due],
        )
    return [(pipeline_id, slot) for pipeline_id, slot, _ in due]
