"""Celery tasks: each loads by id and hands over to ``RunExecutor`` (runs), ``WebhookSender``
(webhook deliveries, on their own queue) or ``TableMaintainer`` (Delta table maintenance, on its own
queue too); safe to run twice."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from api.core.dispatch import WEBHOOK_QUEUE
from api.runs.execution import Outcome
from worker.celery_app import app
from worker.context import executor, table_maintainer, webhook_sender

# A failed consumer-group copy is tried again after 1, 2, 4 … base periods, at most an hour apart:
# with the default base of 10 s, 30 tries span about a day.
GROUP_RETRIES = 30


def _follow_up(outcome: Outcome) -> None:
    if outcome.retry_in_s is not None and outcome.run_id is not None:
        execute_run.apply_async((str(outcome.run_id),), countdown=outcome.retry_in_s)
    if outcome.mirror_group_of is not None:
        mirror_group_offsets.delay(str(outcome.mirror_group_of))


def _backoff(retries: int) -> float:
    return min(executor().settings.group_mirror_retry_s * 2 ** retries, 3600.0)


@app.task(name="inlet.execute_run")
def execute_run(run_id: str) -> str:
    # A token for one run: the fairest claimable at this moment, which may not be the one it names
    # (docs/runs.md, "Fairness").
    outcome = executor().execute(uuid.UUID(run_id))
    _follow_up(outcome)
    return outcome.verdict


@app.task(name="inlet.fire_schedule")
def fire_schedule(pipeline_id: str, slot: str) -> str:
    outcome = executor().fire_schedule(uuid.UUID(pipeline_id), datetime.fromisoformat(slot))
    _follow_up(outcome)
    return outcome.verdict


@app.task(name="inlet.continue_pipeline")
def continue_pipeline(pipeline_id: str, slot: str) -> str:
    # A continuous pipeline's next look: fires only if its slot is still the one named (api.runs.continuous).
    outcome = executor().fire_schedule(uuid.UUID(pipeline_id), datetime.fromisoformat(slot), claim=True)
    _follow_up(outcome)
    return outcome.verdict


@app.task(name="inlet.mirror_group_offsets", bind=True, max_retries=GROUP_RETRIES)
def mirror_group_offsets(self: Any, pipeline_id: str) -> str:
    state = executor().mirror_group(uuid.UUID(pipeline_id))
    if state == "failed":
        raise self.retry(countdown=_backoff(self.request.retries))
    return state


@app.task(name="inlet.delete_group", bind=True, max_retries=GROUP_RETRIES)
def delete_group(self: Any, connection_id: str, group: str) -> bool:
    if not executor().delete_group(uuid.UUID(connection_id), group):
        raise self.retry(countdown=_backoff(self.request.retries))
    return True


@app.task(name="inlet.deliver_webhook")
def deliver_webhook(delivery_id: str) -> str:
    outcome = webhook_sender().deliver(uuid.UUID(delivery_id))
    if outcome.retry_in_s is not None:
        deliver_webhook.apply_async((delivery_id,), countdown=outcome.retry_in_s, queue=WEBHOOK_QUEUE)
    return outcome.state


@app.task(name="inlet.maintain_table")
def maintain_table(pipeline_id: str) -> str:
    return table_maintainer().maintain(uuid.UUID(pipeline_id))
