"""Runs ended through the real lifecycle at a time the test chooses (the run lifecycle's clock), with the
offset ranges the test gives, so the ledger holds what a worker would have left; and a policy with
the settings' policy with the retentions a test chooses."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Engine, func, update
from sqlmodel import Session, col, select

from api.core.config import Settings
from api.core.db import unit_of_work, utcnow
from api.ledger.models import PartitionOffset, RunRange
from api.pipelines.models import Pipeline
from api.retention.service import RetentionPolicy
from api.runs import lifecycle
from api.runs.models import Run, RunLogChunk
from api.runs.planning import PartitionPlan, Plan
from api.runs.retry import RetryPolicy
from api.runs.states import RunTrigger
from spark_jobs.spec import JobFailure, PartitionResult, RunResult, Timings
from tests.usage.helpers import Clock, claim, record

Ranges = dict[tuple[str, int], tuple[int, int]]
NO_RETRY = RetryPolicy(max_attempts=1, backoff_s=0.0)
DAY = timedelta(days=1)


def policy(settings: Settings, *, batch_size: int = 1000, budget_s: float = 30.0, **days: float) -> RetentionPolicy:
    """The settings' policy with these retentions (``runs=90`` sets ``retention_runs_days``; 0: forever)."""
    return RetentionPolicy.of(settings.model_copy(update={
        "retention_batch_size": batch_size, "retention_budget_s": budget_s,
        **{f"retention_{name}_days": value for name, value in days.items()}}))


def _result(run_id: uuid.UUID, ranges: Ranges, error: str | None) -> RunResult:
    at = utcnow()
    return RunResult(
        run_id=str(run_id), status="failed" if error else "succeeded",
        partitions=[PartitionResult(topic=t, partition=p, start=s, end=e, records_read=e - s)
                    for (t, p), (s, e) in ranges.items()],
        rows_written=sum(e - s for s, e in ranges.values()), rows_quarantined=0, bytes_read=0,
        timings=Timings(started_at=at, finished_at=at),
        error=JobFailure(kind=error, message="boom") if error else None)


def ended_run(engine: Engine, clock: Clock, pipeline_id: str | uuid.UUID, *, at: datetime,
              ranges: Ranges | None = None, error: str | None = None, log: str | None = None,
              trigger: RunTrigger = "manual") -> uuid.UUID:
    """A run planned over ``ranges`` (from the committed offsets), claimed and ended at ``at``:
    succeeded (its ranges committed) or, with ``error``, failed for good."""
    ranges = ranges or {}
    clock.now = at
    with unit_of_work(engine) as session:
        pipeline = session.get(Pipeline, uuid.UUID(str(pipeline_id)))
        assert pipeline is not None
        stored = {(r.topic, r.partition): r.committed for r in session.exec(
            select(PartitionOffset).where(PartitionOffset.pipeline_id == pipeline.id)).all()}
        plan = Plan(partitions=[PartitionPlan(topic=t, partition=p, start=s, end=e, earliest=0, latest=e,
                                              committed=stored.get((t, p))) for (t, p), (s, e) in ranges.items()])
        run_id = lifecycle.create_run(session, pipeline, trigger=trigger, plan=plan).id
    claim(engine, run_id)
    if log is not None:
        with unit_of_work(engine) as session:
            lifecycle.append_log(session, run_id, log)
            session.execute(update(RunLogChunk).where(col(RunLogChunk.run_id) == run_id).values(created_at=at))
    assert record(engine, run_id, _result(run_id, ranges, error), retry=NO_RETRY) == ("failed" if error
                                                                                        else "succeeded")
    return run_id


def run_ids(engine: Engine, pipeline_id: str | uuid.UUID | None = None) -> set[uuid.UUID]:
    with Session(engine) as session:
        stmt: Any = select(Run.id)
        if pipeline_id is not None:
            stmt = stmt.where(Run.pipeline_id == uuid.UUID(str(pipeline_id)))
        return set(session.exec(stmt).all())


def count(engine: Engine, model: Any, *where: Any) -> int:
    with Session(engine) as session:
        return int(session.exec(select(func.count()).select_from(model).where(*where)).one())


def ranges_of(engine: Engine, run_id: uuid.UUID) -> int:
    return count(engine, RunRange, RunRange.run_id == run_id)


def log_chunks_of(engine: Engine, run_id: uuid.UUID) -> int:
    return count(engine, RunLogChunk, RunLogChunk.run_id == run_id)
