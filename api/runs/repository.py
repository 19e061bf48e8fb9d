"""The queries of the runs table that more than one caller needs, each written once."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import timedelta

from sqlalchemy import or_, update
from sqlmodel import Session, col, select

from api.core.db import utcnow
from api.runs.models import Run
from api.runs.states import ACTIVE_STATES


def active_run(session: Session, pipeline_id: uuid.UUID) -> Run | None:
    """The pipeline's queued or running run, if any (there is at most one: a unique index)."""
    return session.exec(select(Run).where(Run.pipeline_id == pipeline_id, col(Run.state).in_(ACTIVE_STATES))).first()


def runs_by_id(session: Session, tenant_id: uuid.UUID, run_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, Run]:
    ids = set(run_ids)
    if not ids:
        return {}
    rows = session.exec(select(Run).where(Run.tenant_id == tenant_id, col(Run.id).in_(ids))).all()
    return {run.id: run for run in rows}


def stale_queued(session: Session, *, older_than_s: float, limit: int) -> list[uuid.UUID]:
    """Queued runs whose dispatch may have been lost (e.g. Redis restarted): safe to send again,
    since a run is claimed at most once."""
    now = utcnow()
    cutoff = now - timedelta(seconds=older_than_s)
    rows = session.exec(
        select(Run.id).where(
            Run.state == "queued",
            or_(col(Run.not_before).is_(None), col(Run.not_before) <= now),
            or_(col(Run.dispatched_at).is_(None), col(Run.dispatched_at) < cutoff),
        ).limit(limit)
    ).all()
    return list(rows)


def expired_leases(session: Session, *, limit: int) -> list[uuid.UUID]:
    rows = session.exec(
        select(Run.id).where(Run.state == "running", col(Run.lease_expires_at) < utcnow()).limit(limit)
    ).all()
    return list(rows)


def mark_dispatched(session: Session, run_ids: list[uuid.UUID]) -> None:
    if run_ids:
        session.execute(update(Run).where(col(Run.id).in_(run_ids)).values(dispatched_at=utcnow()))

