"""A run's life after it is created: claimed by a worker, planned, leased, committed or failed.

Every state change goes through ``_transition``, which checks the run state table and applies the
change as a compare-and-set on the state the caller saw, so two workers can never both win.
Committing a run moves each partition's offset only if it still equals the planned start, records
the ranges it wrote (``run_ranges``) and consumes the replace-mode replay windows it covered.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, func, or_, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from api.core.db import utcnow
from api.core.errors import Conflict
from api.offsets.models import OffsetReplay, PartitionOffset, RunRange
from api.pipelines.models import Pipeline
from api.runs.models import Run, RunLogChunk
from api.runs.planning import Plan
from api.runs.states import RUN_STATES


class ActiveRunExists(Conflict):
    code, title = "active-run-exists", "The pipeline already has an active run"


class OffsetConflict(Exception):
    """A partition's committed offset moved since the run was planned."""

    def __init__(self, topic: str, partition: int, expected: int | None, found: int | None) -> None:
        super().__init__(f"{topic}[{partition}]: planned from {expected}, but the committed offset is now {found}")
        self.topic, self.partition = topic, partition


def _transition(session: Session, run: Run, to: str, *, also: Any = None, **values: Any) -> bool:
    """Move ``run`` to ``to`` if it is still in the state this caller saw; False if another won."""
    RUN_STATES.check(run.state, to)
    condition = and_(Run.id == run.id, Run.state == run.state)
    if also is not None:
        condition = and_(condition, also)
    changed = session.execute(update(Run).where(condition).values(state=to, **values)).rowcount
    if changed != 1:
        return False
    session.refresh(run)
    return True


def create_run(
    session: Session, pipeline: Pipeline, *, trigger: str, scheduled_for: datetime | None = None,
    plan: Plan | None = None,
) -> Run:
    """A queued run with the pipeline's next sequence number; 409 when one is already active."""
    active = session.exec(select(Run).where(Run.pipeline_id == pipeline.id, Run.state.in_(("queued", "running")))).first()  # type: ignore[attr-defined]
    if active is not None:
        raise ActiveRunExists(f"Pipeline {pipeline.id} already has run {active.id} {active.state}", run_id=str(active.id))
    pipeline.last_run_seq += 1
    session.add(pipeline)
    # Its creator sends (or executes) it right after the commit; the scheduler re-sends only if that got lost.
    run = Run(tenant_id=pipeline.tenant_id, pipeline_id=pipeline.id, seq=pipeline.last_run_seq, state="queued",
              trigger=trigger, scheduled_for=scheduled_for, plan=plan.to_json() if plan else None,
              dispatched_at=utcnow())
    session.add(run)
    try:
        with session.begin_nested():
            session.flush()
    except IntegrityError:
        raise ActiveRunExists(f"Pipeline {pipeline.id} already has an active run, or this slot already ran") from None
    return run


def claim(session: Session, run_id: uuid.UUID, *, worker: str, lease_s: float) -> Run | None:
    """Take a queued run (or a running one whose worker's lease expired); None if not claimable now."""
    run = session.get(Run, run_id)
    if run is None:
        return None
    now = utcnow()
    lease = now + timedelta(seconds=lease_s)
    if run.state == "queued":
        if run.not_before is not None and run.not_before > now:
            return None
        won = _transition(session, run, "running", worker=worker, lease_expires_at=lease,
                          started_at=func.coalesce(Run.started_at, now), attempt=Run.attempt + 1)
    elif run.state == "running" and run.lease_expires_at is not None and run.lease_expires_at < now:
        # The worker that held it died: requeue, then claim, both through the state table.
        won = _transition(session, run, "queued", also=Run.lease_expires_at < now) and _transition(
            session, run, "running", worker=worker, lease_expires_at=lease, attempt=Run.attempt + 1)
    else:
        return None
    return run if won else None


def store_plan(session: Session, run: Run, plan: Plan, *, source_version: int | None,
               target_version: int | None, replace_ranges: dict[str, Any] | None) -> None:
    run.plan = plan.to_json()
    run.source_credentials_version = source_version
    run.target_credentials_version = target_version
    run.replace_ranges = replace_ranges
    session.add(run)
    session.flush()


def heartbeat(session: Session, run_id: uuid.UUID, *, worker: str, lease_s: float) -> bool | None:
    """Extend the lease; returns whether a cancel was requested, or None if the lease was lost."""
    changed = session.execute(
        update(Run).where(Run.id == run_id, Run.state == "running", Run.worker == worker)
        .values(lease_expires_at=utcnow() + timedelta(seconds=lease_s))
    ).rowcount
    if changed != 1:
        return None
    return bool(session.exec(select(Run.cancel_requested).where(Run.id == run_id)).one())


def _move_offsets(session: Session, run: Run, plan: Plan) -> None:
    now = utcnow()
    for p in plan.partitions:
        if p.committed is None:
            exists = session.get(PartitionOffset, (run.pipeline_id, p.topic, p.partition))
            if exists is not None:
                raise OffsetConflict(p.topic, p.partition, None, exists.committed)
            session.add(PartitionOffset(pipeline_id=run.pipeline_id, topic=p.topic, partition=p.partition,
                                        tenant_id=run.tenant_id, committed=p.end, last_run_id=run.id, updated_at=now))
            continue
        changed = session.execute(
            update(PartitionOffset).where(
                PartitionOffset.pipeline_id == run.pipeline_id, PartitionOffset.topic == p.topic,
                PartitionOffset.partition == p.partition, PartitionOffset.committed == p.committed,
            ).values(committed=p.end, last_run_id=run.id, updated_at=now)
        ).rowcount
        if changed != 1:
            found = session.get(PartitionOffset, (run.pipeline_id, p.topic, p.partition))
            raise OffsetConflict(p.topic, p.partition, p.committed, found.committed if found else None)
    try:
        session.flush()
    except IntegrityError:
        raise OffsetConflict("?", -1, None, None) from None


def _observe_lag(session: Session, run: Run, plan: Plan) -> None:
    pipeline = session.get(Pipeline, run.pipeline_id)
    if pipeline is not None:
        pipeline.observed_lag = sum(max(p.latest - p.end, 0) for p in plan.partitions)
        pipeline.observed_at = utcnow()
        session.add(pipeline)


def commit_succeeded(session: Session, run: Run, *, summary: dict[str, Any]) -> bool:
    """Advance the offsets (compare-and-set on the planned starts) and mark the run succeeded,
    in the caller's one transaction. False with the run failed when an offset moved meanwhile."""
    plan = Plan.from_json(run.plan or {"partitions": []})
    try:
        with session.begin_nested():
            _move_offsets(session, run, plan)
    except OffsetConflict as exc:
        finish(session, run, "failed", error={"kind": "offset_conflict", "message": str(exc),
                                              "topic": exc.topic, "partition": exc.partition})
        return False
    _record_ranges(session, run, plan)
    _consume_replays(session, run)
    _observe_lag(session, run, plan)
    return _transition(session, run, "succeeded", finished_at=utcnow(), lease_expires_at=None, **summary)


def initialize_positions(session: Session, pipeline: Pipeline, plan: Plan) -> None:
    """Record where never-read partitions start, so that a pipeline starting at 'latest' keeps the
    position it was first planned at instead of a later 'latest' (records in between would be lost)."""
    now = utcnow()
    for p in plan.partitions:
        if p.committed is None:
            session.add(PartitionOffset(pipeline_id=pipeline.id, topic=p.topic, partition=p.partition,
                                        tenant_id=pipeline.tenant_id, committed=p.start, updated_at=now))
    pipeline.observed_lag = plan.lag
    pipeline.observed_at = now
    session.add(pipeline)
    session.flush()


def skip(session: Session, run: Run, plan: Plan, reason: str) -> bool:
    """Nothing to read: keep the start positions and end the run skipped."""
    pipeline = session.get(Pipeline, run.pipeline_id)
    assert pipeline is not None
    initialize_positions(session, pipeline, plan)
    run.plan = plan.to_json()
    session.add(run)
    return _transition(session, run, "skipped", finished_at=utcnow(), lease_expires_at=None,
                       error={"kind": "nothing_to_read", "message": reason})


def replace_ranges_for(session: Session, pipeline: Pipeline, plan: Plan) -> dict[str, Any] | None:
    """Ranges of this plan whose earlier rows a replace-mode replay asked to overwrite:
    ``{topic: {"partition": [start, end]}}``, the plan's ranges cut to the replay windows; None if none."""
    windows = {(w.topic, w.partition): w for w in session.exec(
        select(OffsetReplay).where(OffsetReplay.pipeline_id == pipeline.id)).all()}
    out: dict[str, dict[str, list[int]]] = {}
    for p in plan.partitions:
        window = windows.get((p.topic, p.partition))
        if window is None:
            continue
        start, end = max(p.start, window.start), min(p.end, window.end)
        if start < end:
            out.setdefault(p.topic, {})[str(p.partition)] = [start, end]
    return out or None


def _record_ranges(session: Session, run: Run, plan: Plan) -> None:
    """What this run wrote, indexed so that "which run wrote offset X of partition P" is one lookup."""
    for p in plan.partitions:
        if p.size > 0:
            session.add(RunRange(run_id=run.id, pipeline_id=run.pipeline_id, tenant_id=run.tenant_id,
                                 topic=p.topic, partition=p.partition, start=p.start, end=p.end))
    session.flush()


def _consume_replays(session: Session, run: Run) -> None:
    """The replayed rows this run replaced are done: trim each window past the run's range, or drop it.

    Windows start at or above the committed offset (offsets changes trim them so) and a run reads from
    the committed offset, so what is left of a window is always the part above the run's end."""
    for topic, partitions in (run.replace_ranges or {}).items():
        for partition, (_, end) in partitions.items():
            window = session.get(OffsetReplay, (run.pipeline_id, topic, int(partition)))
            if window is None:
                continue
            if end >= window.end:
                session.delete(window)
            else:
                window.start = max(window.start, end)
                session.add(window)
    session.flush()


def finish(session: Session, run: Run, state: str, *, error: dict[str, Any] | None = None, **values: Any) -> bool:
    return _transition(session, run, state, finished_at=utcnow(), lease_expires_at=None, error=error, **values)


def requeue(session: Session, run: Run, *, error: dict[str, Any], delay_s: float) -> bool:
    """Retry the same plan later (a transient failure)."""
    return _transition(session, run, "queued", worker=None, lease_expires_at=None, error=error,
                       not_before=utcnow() + timedelta(seconds=delay_s))


def stale_queued(session: Session, *, older_than_s: float, limit: int) -> list[uuid.UUID]:
    """Queued runs whose dispatch may have been lost (e.g. Redis restarted): safe to send again,
    since a run is claimed at most once."""
    now = utcnow()
    cutoff = now - timedelta(seconds=older_than_s)
    rows = session.exec(
        select(Run.id).where(
            Run.state == "queued",
            or_(Run.not_before.is_(None), Run.not_before <= now),  # type: ignore[union-attr]
            or_(Run.dispatched_at.is_(None), Run.dispatched_at < cutoff),  # type: ignore[union-attr]
        ).limit(limit)
    ).all()
    return list(rows)


def expired_leases(session: Session, *, limit: int) -> list[uuid.UUID]:
    rows = session.exec(
        select(Run.id).where(Run.state == "running", Run.lease_expires_at < utcnow()).limit(limit)  # type: ignore[operator]
    ).all()
    return list(rows)


def mark_dispatched(session: Session, run_ids: list[uuid.UUID]) -> None:
    if run_ids:
        session.execute(update(Run).where(Run.id.in_(run_ids)).values(dispatched_at=utcnow()))  # type: ignore[attr-defined]


def append_log(session: Session, run_id: uuid.UUID, text: str) -> None:
    last = session.exec(select(func.max(RunLogChunk.chunk)).where(RunLogChunk.run_id == run_id)).one()
    session.add(RunLogChunk(run_id=run_id, chunk=(last or 0) + 1, text=text))
    session.flush()
