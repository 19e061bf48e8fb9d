"""Runs as tenants see and drive them: trigger, list, read, log, cancel."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from sqlalchemy import and_
from sqlmodel import Session, col, select

from api.audit.service import record_by
from api.core.enqueue import enqueue_run
from api.core.errors import InvalidTransition
from api.core.pagination import PageParams, paginate
from api.core.scoping import get_scoped, scoped_select
from api.core.security import TenantContext
from api.pipelines.models import Pipeline
from api.pipelines.service import get_pipeline
from api.runs import lifecycle
from api.runs.models import Run, RunLogChunk
from api.runs.quotas import check_run_rate
from api.runs.retry import RunFailure
from api.runs.schemas import ReprocessRead, RunPartition, RunRead
from api.runs.states import TERMINAL_STATES
from api.tenancy.quotas import QuotaLimits

LOG_TAIL_LINES = 50


def trigger_run(
    *, session: Session, ctx: TenantContext, pipeline_id: uuid.UUID, quotas: QuotaLimits,
) -> Run:
    """Queue a run now (planned by the worker); 409 while the pipeline has an active run, 429 over the
    tenant's runs_per_hour quota."""
    pipeline = get_pipeline(session=session, ctx=ctx, pipeline_id=pipeline_id, lock=True)
    check_run_rate(session, ctx.tenant_id, quotas=quotas)
    run = lifecycle.create_run(session, pipeline, trigger="manual")
    record_by(session, ctx, resource_type="run", resource_id=run.id, action="trigger",
              after={"pipeline_id": str(pipeline.id), "seq": run.seq})
    enqueue_run(session, run.id)
    return run


def get_run(*, session: Session, ctx: TenantContext, run_id: uuid.UUID, lock: bool = False) -> Run:
    return get_scoped(session, Run, ctx.tenant_id, run_id, resource="Run", lock=lock)


def list_runs(
    *, session: Session, ctx: TenantContext, pipeline_id: uuid.UUID, page: PageParams, state: str | None = None
) -> tuple[list[Run], int]:
    get_pipeline(session=session, ctx=ctx, pipeline_id=pipeline_id)
    stmt = scoped_select(Run, ctx.tenant_id).where(Run.pipeline_id == pipeline_id)
    if state:
        stmt = stmt.where(Run.state == state)
    return paginate(session, stmt, page, Run)


def newest_runs(*, session: Session, ctx: TenantContext, pipelines: Sequence[Pipeline]) -> dict[uuid.UUID, Run]:
    """The newest run of each of ``pipelines`` by pipeline id, in one query however many there are; a
    pipeline never run has none.

    A pipeline numbers its runs in the order they are created (``last_run_seq`` is the newest's
    number, taken under the pipeline's row lock), so its newest run is the one with that number."""
    ids = [p.id for p in pipelines if p.last_run_seq]
    if not ids:
        return {}
    newest = and_(col(Pipeline.id) == col(Run.pipeline_id), col(Pipeline.last_run_seq) == col(Run.seq))
    stmt = scoped_select(Run, ctx.tenant_id).join(Pipeline, newest).where(col(Run.pipeline_id).in_(ids))
    return {run.pipeline_id: run for run in session.exec(stmt).all()}


def cancel_run(*, session: Session, ctx: TenantContext, run_id: uuid.UUID) -> Run:
    """A queued run is cancelled at once; a running one is asked to stop (its worker kills the job
    and leaves the offsets untouched)."""
    run = get_run(session=session, ctx=ctx, run_id=run_id, lock=True)
    if run.state in TERMINAL_STATES:
        raise InvalidTransition(f"Run {run.id} is already {run.state}", current_state=run.state,
                                requested_state="cancelled")
    if run.state == "queued":
        lifecycle.finish(session, run, "cancelled", error=RunFailure("cancelled", "cancelled before it started"))
    else:
        run.cancel_requested = True
        session.add(run)
        session.flush()
    record_by(session, ctx, resource_type="run", resource_id=run.id, action="cancel", after={"state": run.state})
    return run


def log_text(session: Session, run_id: uuid.UUID) -> str:
    chunks = session.exec(select(RunLogChunk.text).where(RunLogChunk.run_id == run_id)
                          .order_by(col(RunLogChunk.chunk))).all()
    return "".join(chunks)


def to_read(run: Run, *, log: str | None = None) -> RunRead:
    result = run.result or {}
    by_partition = {(p["topic"], p["partition"]): p for p in result.get("partitions", [])}
    partitions = None
    if run.plan is not None:
        partitions = [
            RunPartition(**{k: v for k, v in p.items() if k != "committed"},
                         **{k: by_partition.get((p["topic"], p["partition"]), {}).get(k)
                            for k in ("records_read", "first_offset", "last_offset", "gap")})
            for p in run.plan["partitions"]
        ]
    duration = (run.finished_at - run.started_at).total_seconds() if run.finished_at and run.started_at else None
    return RunRead(
        id=run.id, pipeline_id=run.pipeline_id, seq=run.seq, state=run.state, trigger=run.trigger,
        scheduled_for=run.scheduled_for, attempt=run.attempt, cancel_requested=run.cancel_requested,
        partitions=partitions, replace_ranges=run.replace_ranges, records_read=run.records_read,
        rows_written=run.rows_written, rows_quarantined=run.rows_quarantined, bytes_read=run.bytes_read,
        delta_version=run.delta_version, already_committed=result.get("already_committed"),
        expectations=result.get("expectations") or None, rows_violating=result.get("rows_violating"),
        reprocess=ReprocessRead(**{**run.reprocess, **(result.get("reprocessed") or {})}) if run.reprocess else None,
        error=run.error, created_at=run.created_at, started_at=run.started_at, finished_at=run.finished_at,
        duration_s=duration, log_tail=log.splitlines()[-LOG_TAIL_LINES:] if log is not None else None,
    )
