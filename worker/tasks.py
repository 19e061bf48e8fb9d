"""Celery tasks: each loads by id and hands over to ``RunExecutor``; safe to run twice."""

from __future__ import annotations

import uuid
from datetime import datetime

from worker.celery_app import app
from worker.context import executor


@app.task(name="inlet.execute_run")
def execute_run(run_id: str) -> str:
    outcome = executor().execute(uuid.UUID(run_id))
    if outcome.retry_in_s is not None:
        execute_run.apply_async((run_id,), countdown=outcome.retry_in_s)
    return outcome.state


@app.task(name="inlet.fire_schedule")
def fire_schedule(pipeline_id: str, slot: str) -> str:
    outcome = executor().fire_schedule(uuid.UUID(pipeline_id), datetime.fromisoformat(slot))
    if outcome.retry_in_s is not None and outcome.run_id is not None:
        execute_run.apply_async((str(outcome.run_id),), countdown=outcome.retry_in_s)
    return outcome.state
