"""A run's life after it is created: claimed by a worker, planned, leased, committed or failed.

Every state change goes through ``_transition``, which checks the run state table and applies the
change as a compare-and-set on the state the caller saw, so two workers can never both win.
Committing a run hands its plan to the offsets ledger (``api.ledger.service.commit_run``), which
moves each partition's offset only if it still equals the planned start. A change that ends an
attempt (failed, retried, succeeded) raises its webhook events in the same transaction
(``api.runs.notifications``), and every attempt that ends is counted in the usage ledger
(``api.usage.service.meter``), in that same transaction too. A run that committed into a Delta table
counts toward its maintenance (``api.maintenance.triggers.record_commit``: compaction when due).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, Literal

from sqlalchemy import and_, func, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from api.connections.service import referenced_connection
from api.core.db import rows_changed, utcnow
from api.core.errors import Conflict
from api.ledger import service as ledger
from api.maintenance.triggers import record_commit
from api.pipelines.models import Pipeline
from api.pipelines.service import record_observed_lag
from api.runs import notifications, repository
from api.runs.models import Run, RunLogChunk
from api.runs.planning import Plan
from api.runs.retry import RunFailure
from api.runs.states import RUN_STATES, RunTrigger
from api.usage import service as usage


class ActiveRunExists(Conflict):
    code, title = "active-run-exists", "The pipeline already has an active run"


def _transition(session: Session, run: Run, to: str, *, also: Any = None, **values: Any) -> bool:
    """Move ``run`` to ``to`` if it is still in the state this caller saw; False if another won."""
    RUN_STATES.check(run.state, to)
    condition = and_(col(Run.id) == run.id, col(Run.state) == run.state)
    if also is not None:
        condition = and_(condition, also)
    if rows_changed(session, update(Run).where(condition).values(state=to, **values)) != 1:
        return False
    session.refresh(run)
    return True


def create_run(
    session: Session, pipeline: Pipeline, *, trigger: RunTrigger, scheduled_for: datetime | None = None,
    plan: Plan | None = None,
) -> Run:
    """A queued run with the pipeline's next sequence number; 409 when one is already active."""
    active = repository.active_run(session, pipeline.id)
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
        return claim_queued(session, run, worker=worker, lease_s=lease_s)
    if run.state == "running" and lease_expired(run, now):
        # The worker that held it died: requeue, then claim, both through the state table.
        expired_at = run.lease_expires_at
        if not _transition(session, run, "queued", also=col(Run.lease_expires_at) < now):
            return None
        # The dead worker's attempt counts as retried, its wall time up to the lease it let expire.
        _meter(session, run, "retried", {}, ran_until=expired_at)
        won = _transition(session, run, "running", worker=worker, lease_expires_at=lease, attempt=Run.attempt + 1,
                          claimed_at=now)
        return run if won else None
    return None


def lease_expired(run: Run, now: datetime) -> bool:
    return run.state == "running" and run.lease_expires_at is not None and run.lease_expires_at < now


def claim_queued(session: Session, run: Run, *, worker: str, lease_s: float) -> Run | None:
    """Take ``run`` if it is still queued and due (compare-and-set); None if another worker won it or it
    is waiting for a retry."""
    now = utcnow()
    if run.state != "queued" or (run.not_before is not None and run.not_before > now):
        return None
    won = _transition(session, run, "running", worker=worker, lease_expires_at=now + timedelta(seconds=lease_s),
                      started_at=func.coalesce(Run.started_at, now), attempt=Run.attempt + 1, claimed_at=now)
    return run if won else None


def store_plan(session: Session, run: Run, pipeline: Pipeline, plan: Plan) -> None:
    """The plan, with what a retry of it must reuse: the credentials versions it was planned with
    and the replace-mode ranges it covers."""
    run.plan = plan.to_json()
    run.source_credentials_version = referenced_connection(session, pipeline.connection_id).credentials_version
    run.target_credentials_version = (referenced_connection(session, pipeline.target_connection_id).credentials_version
                                      if pipeline.target_connection_id else None)
    run.replace_ranges = ledger.replace_ranges_for(session, pipeline, plan.partitions)
    session.add(run)
    session.flush()


def heartbeat(session: Session, run_id: uuid.UUID, *, worker: str, lease_s: float) -> bool | None:
    """Extend the lease; returns whether a cancel was requested, or None if the lease was lost."""
    changed = rows_changed(session, update(Run).where(
        col(Run.id) == run_id, col(Run.state) == "running", col(Run.worker) == worker,
    ).values(lease_expires_at=utcnow() + timedelta(seconds=lease_s)))
    if changed != 1:
        return None
    return bool(session.exec(select(Run.cancel_requested).where(Run.id == run_id)).one())


def _observe_lag(session: Session, run: Run, plan: Plan) -> None:
    """The lag the committed plan leaves, and the pipeline's freshness now that its offsets moved."""
    pipeline = session.get(Pipeline, run.pipeline_id)
    if pipeline is not None:
        record_observed_lag(session, pipeline, sum(max(p.latest - p.end, 0) for p in plan.partitions))
        pipeline.newest_record_at = ledger.newest_committed(session, pipeline.id)


def _meter(session: Session, run: Run, outcome: usage.AttemptOutcome, values: Mapping[str, Any], *,
           ran_until: datetime | None = None, ran: bool = True) -> None:
    """Count the attempt that just ended (``values``: what it is ended with, the job's result among
    them) in the usage ledger. Its wall time runs from the worker's claim; a run that never ran has none
    (its ``claimed_at`` may be an earlier attempt's, already metered)."""
    pipeline = session.get(Pipeline, run.pipeline_id)
    at = run.finished_at or utcnow()
    until = ran_until or at
    wall_s = (until - run.claimed_at).total_seconds() if ran and run.claimed_at is not None else 0.0
    usage.meter(session, tenant_id=run.tenant_id, pipeline_id=run.pipeline_id,
                pipeline_name=pipeline.name if pipeline is not None else "", outcome=outcome,
                figures=usage.Figures.of(values), wall_s=wall_s, at=at)


def commit_succeeded(session: Session, run: Run, *, summary: dict[str, Any]) -> bool:
    """Advance the offsets (compare-and-set on the planned starts) and mark the run succeeded,
    in the caller's one transaction. False with the run failed when an offset moved meanwhile."""
    plan = Plan.from_json(run.plan or {"partitions": []})
    try:
        ledger.commit_run(session, run_id=run.id, pipeline_id=run.pipeline_id, tenant_id=run.tenant_id,
                          planned=plan.partitions, replaced=run.replace_ranges, newest=_newest_read(summary))
    except ledger.OffsetConflict as exc:
        finish(session, run, "failed", error=RunFailure("offset_conflict", str(exc), exc.topic, exc.partition),
               figures_of=summary)
        return False
    if run.trigger != "reprocess":  # a reprocess reads no Kafka: the lag is as the last run saw it
        _observe_lag(session, run, plan)
    after_failed_attempt = run.error is not None  # an earlier attempt failed and was retried
    if not _transition(session, run, "succeeded", finished_at=utcnow(), lease_expires_at=None, **summary):
        return False
    _meter(session, run, "succeeded", summary)
    pipeline = session.get(Pipeline, run.pipeline_id)
    if pipeline is not None:
        record_commit(session, pipeline, summary.get("result"))
    notifications.run_succeeded(session, run, after_failed_attempt=after_failed_attempt)
    return True


def _newest_read(summary: dict[str, Any]) -> dict[tuple[str, int], datetime]:
    """The Kafka timestamp of the newest record the run read, per partition (its result's)."""
    partitions = (summary.get("result") or {}).get("partitions") or []
    return {(p["topic"], p["partition"]): datetime.fromisoformat(p["newest_timestamp"])
            for p in partitions if p.get("newest_timestamp")}


def initialize_positions(session: Session, pipeline: Pipeline, plan: Plan) -> None:
    """Keep where never-read partitions start (``ledger.record_starts``) and the lag the plan saw."""
    ledger.record_starts(session, pipeline, plan.partitions)
    record_observed_lag(session, pipeline, plan.lag)
    session.flush()


def skip(session: Session, run: Run, plan: Plan, reason: str) -> bool:
    """Nothing to read: keep the start positions and end the run skipped."""
    pipeline = session.get(Pipeline, run.pipeline_id)
    assert pipeline is not None
    initialize_positions(session, pipeline, plan)
    run.plan = plan.to_json()
    session.add(run)
    if not _transition(session, run, "skipped", finished_at=utcnow(), lease_expires_at=None,
                       error=RunFailure("nothing_to_read", reason).to_json()):
        return False
    _meter(session, run, "skipped", {})
    return True


def finish(session: Session, run: Run, state: Literal["failed", "cancelled"], *, error: RunFailure,
           figures_of: Mapping[str, Any] | None = None, **values: Any) -> bool:
    """End the run ``state``, metered with ``figures_of`` (default: ``values``)."""
    ran = run.state == "running"  # a queued run cancelled (or failed) before its claim ran no time
    if not _transition(session, run, state, finished_at=utcnow(), lease_expires_at=None, error=error.to_json(),
                       **values):
        return False
    _meter(session, run, "cancelled" if state == "cancelled" else "failed",
           figures_of if figures_of is not None else values, ran=ran)
    if state == "failed":
        notifications.run_failed(session, run, error, retry_at=None)
    return True


def requeue(session: Session, run: Run, *, error: RunFailure, delay_s: float,
            figures_of: Mapping[str, Any] | None = None) -> bool:
    """Retry the same plan later (a transient failure); the failed attempt is metered as retried."""
    retry_at = utcnow() + timedelta(seconds=delay_s)
    if not _transition(session, run, "queued", worker=None, lease_expires_at=None, error=error.to_json(),
                       not_before=retry_at):
        return False
    _meter(session, run, "retried", figures_of or {})
    notifications.run_failed(session, run, error, retry_at=retry_at)
    return True


def append_log(session: Session, run_id: uuid.UUID, text: str) -> None:
    last = session.exec(select(func.max(RunLogChunk.chunk)).where(RunLogChunk.run_id == run_id)).one()
    session.add(RunLogChunk(run_id=run_id, chunk=(last or 0) + 1, text=text))
    session.flush()
