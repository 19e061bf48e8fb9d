"""The queries of the runs table that more than one caller needs, each written once."""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterable
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, and_, func, or_, update
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


def _due(now: datetime) -> ColumnElement[bool]:
    """A queued run whose retry wait (if any) is over."""
    return and_(col(Run.state) == "queued", or_(col(Run.not_before).is_(None), col(Run.not_before) <= now))


def waiting_tenants(session: Session, *, now: datetime, skip_runs: Collection[uuid.UUID] = (),
                    skip_tenants: Collection[uuid.UUID] = ()) -> dict[uuid.UUID, datetime]:
    """Tenants with a queued run due now, each with the creation time of its oldest."""
    stmt = select(Run.tenant_id, func.min(Run.created_at)).where(_due(now))
    if skip_runs:
        stmt = stmt.where(col(Run.id).not_in(skip_runs))
    if skip_tenants:
        stmt = stmt.where(col(Run.tenant_id).not_in(skip_tenants))
    return {tenant_id: oldest for tenant_id, oldest in session.exec(stmt.group_by(col(Run.tenant_id))).all()}


def running_by_tenant(session: Session, tenant_ids: Collection[uuid.UUID]) -> dict[uuid.UUID, int]:
    """How many runs each tenant has running (a dead worker's, until taken over, included)."""
    rows = session.exec(select(Run.tenant_id, func.count()).where(
        Run.state == "running", col(Run.tenant_id).in_(tenant_ids)).group_by(col(Run.tenant_id))).all()
    return dict(rows)


def last_claimed_by_tenant(session: Session, tenant_ids: Collection[uuid.UUID]) -> dict[uuid.UUID, datetime]:
    """When a worker last took a run of each tenant (a tenant never served has none)."""
    rows = session.exec(select(Run.tenant_id, func.max(Run.claimed_at)).where(
        col(Run.tenant_id).in_(tenant_ids), col(Run.claimed_at).is_not(None)).group_by(col(Run.tenant_id))).all()
    return {tenant_id: at for tenant_id, at in rows if at is not None}


def oldest_due(session: Session, tenant_id: uuid.UUID, *, now: datetime,
               skip_runs: Collection[uuid.UUID] = ()) -> uuid.UUID | None:
    """The tenant's oldest queued run due now."""
    stmt = select(Run.id).where(Run.tenant_id == tenant_id, _due(now))
    if skip_runs:
        stmt = stmt.where(col(Run.id).not_in(skip_runs))
    return session.exec(stmt.order_by(col(Run.created_at), col(Run.id)).limit(1)).first()


def any_due(session: Session) -> uuid.UUID | None:
    """Some queued run due now, if any waits."""
    return session.exec(select(Run.id).where(_due(utcnow())).order_by(col(Run.created_at)).limit(1)).first()


def running_count(session: Session, tenant_id: uuid.UUID) -> int:
    return session.exec(select(func.count()).select_from(Run).where(
        Run.tenant_id == tenant_id, Run.state == "running")).one()


def started_since(session: Session, tenant_id: uuid.UUID, since: datetime) -> tuple[int, datetime | None]:
    """How many runs the tenant started (created) since ``since``, and when the oldest of them was;
    a continuous pipeline's runs are not counted (``api.runs.execution.fire_schedule``)."""
    count, oldest = session.exec(select(func.count(), func.min(Run.created_at)).where(
        Run.tenant_id == tenant_id, col(Run.created_at) > since, Run.trigger != "continuous")).one()
    return count, oldest


def mark_dispatched(session: Session, run_ids: list[uuid.UUID]) -> None:
    if run_ids:
        session.execute(update(Run).where(col(Run.id).in_(run_ids)).values(dispatched_at=utcnow()))
