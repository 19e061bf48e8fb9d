"""Attempts ended through the real run lifecycle and result recording, at a clock the test sets:
the usage ledger is fed exactly as a worker feeds it, without Spark."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine

from api.core.db import unit_of_work
from api.pipelines.models import Pipeline
from api.runs import execution, lifecycle
from api.runs.models import Run
from api.runs.planning import Plan
from api.runs.retry import RetryPolicy
from spark_jobs.spec import JobFailure, PartitionResult, RunResult, Timings

T0 = datetime(2026, 11, 20, 10, 15, tzinfo=UTC)
RETRY_ONCE = RetryPolicy(max_attempts=2, backoff_s=0.0)


@dataclass
class Clock:
    now: datetime = T0


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """The run lifecycle's idea of now, which the test moves."""
    clock = Clock()
    monkeypatch.setattr(lifecycle, "utcnow", lambda: clock.now)
    return clock


def job_result(run_id: uuid.UUID, *, records: int, written: int, quarantined: int = 0, violating: int = 0,
               bytes_read: int = 0, bytes_written: int | None = None, engine_s: float = 20.0,
               error: str | None = None) -> RunResult:
    started = T0
    return RunResult(
        run_id=str(run_id), status="failed" if error else "succeeded",
        partitions=[PartitionResult(topic="t", partition=0, start=0, end=records, records_read=records)],
        rows_written=written, rows_quarantined=quarantined, rows_violating=violating, bytes_read=bytes_read, bytes_written=bytes_written,
        timings=Timings(started_at=started, finished_at=started + timedelta(seconds=engine_s)),
        error=JobFailure(kind=error, message="boom") if error else None)  # type: ignore[arg-type]


def start_run(engine: Engine, clock: Clock, pipeline_id: str | uuid.UUID) -> uuid.UUID:
    """A manual run with a plan, claimed by worker ``w`` at the clock's now."""
    with unit_of_work(engine) as session:
        pipeline = session.get(Pipeline, uuid.UUID(str(pipeline_id)))
        assert pipeline is not None
        run = lifecycle.create_run(session, pipeline, trigger="manual", plan=Plan(partitions=[]))
        run_id = run.id
    claim(engine, run_id)
    return run_id


def claim(engine: Engine, run_id: uuid.UUID) -> None:
    with unit_of_work(engine) as session:
        assert lifecycle.claim(session, run_id, worker="w", lease_s=30) is not None


def record(engine: Engine, run_id: uuid.UUID, result: RunResult, retry: RetryPolicy = RETRY_ONCE) -> str:
    """The job's result as the worker records it; the run's state after."""
    with unit_of_work(engine) as session:
        return execution.record_result(session=session, run_id=run_id, worker="w", result=result,
                                       retry=retry).verdict


def run_once(engine: Engine, clock: Clock, pipeline_id: str | uuid.UUID, *, took_s: float = 30.0,
             **figures: Any) -> uuid.UUID:
    """One run of one attempt, claimed ``took_s`` before the clock's now and ended by its result."""
    end = clock.now
    clock.now = end - timedelta(seconds=took_s)
    run_id = start_run(engine, clock, pipeline_id)
    clock.now = end
    record(engine, run_id, job_result(run_id, **figures))
    return run_id


def state_of(engine: Engine, run_id: uuid.UUID) -> str:
    with unit_of_work(engine) as session:
        run = session.get(Run, run_id)
        assert run is not None
        return run.state
