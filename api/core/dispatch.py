"""Handing work to the Celery workers.

The API and the scheduler only send task names and ids (``send_task``), so neither imports the
worker's code; a send that fails leaves the run queued, and the scheduler sends it again later.
A scheduler tick's schedule slots go out as one pipelined batch on one connection (kombu's
``Producer.batch``): ~0.25 ms a message instead of ~1 ms (bench/scheduler_dispatch.py).

Webhook deliveries go to a queue of their own, consumed by ``inlet webhook-worker``: a receiver that
never answers holds up deliveries only, never runs. Table maintenance has its own too (``inlet
maintenance-worker``): a compaction never waits for a run's slot, nor a run for a compaction's. Services never call a dispatcher: they enqueue
work in their unit of work (``api.core.enqueue``), which sends it once the transaction has committed.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from celery import Celery

log = logging.getLogger(__name__)

EXECUTE_RUN = "inlet.execute_run"
FIRE_SCHEDULE = "inlet.fire_schedule"
CONTINUE_PIPELINE = "inlet.continue_pipeline"
MIRROR_GROUP = "inlet.mirror_group_offsets"
DELETE_GROUP = "inlet.delete_group"
DELIVER_WEBHOOK = "inlet.deliver_webhook"
MAINTAIN_TABLE = "inlet.maintain_table"
QUEUE = "inlet"
WEBHOOK_QUEUE = "inlet.webhooks"
MAINTENANCE_QUEUE = "inlet.maintenance"
_BATCH = 500  # Redis commands per pipelined round trip


class Dispatcher(Protocol):
    """``False`` from a send: the broker did not take it (the run stays due for a resend)."""

    def send_run(self, run_id: uuid.UUID) -> bool | None: ...

    def send_schedules(self, slots: Sequence[tuple[uuid.UUID, datetime]]) -> int | None:
        """Send ``fire_schedule`` for each (pipeline, slot); how many the broker took."""

    def send_continuation(self, pipeline_id: uuid.UUID, slot: datetime, delay_s: float) -> bool | None:
        """A continuous pipeline's next look, due ``delay_s`` from now."""

    def send_group_mirror(self, pipeline_id: uuid.UUID) -> bool | None: ...

    def send_group_delete(self, connection_id: uuid.UUID, group: str) -> bool | None: ...

    def send_webhook_deliveries(self, delivery_ids: Sequence[uuid.UUID]) -> int | None:
        """Send ``deliver_webhook`` for each delivery (to the webhooks' queue); how many the broker took."""

    def send_table_maintenance(self, pipeline_id: uuid.UUID) -> bool | None:
        """Send ``maintain_table`` for the pipeline's table (to the maintenance queue)."""


class CeleryDispatcher:
    def __init__(self, redis_url: str) -> None:
        self._celery = Celery("inlet-dispatch", broker=redis_url)
        self._celery.conf.update(broker_connection_retry=False, broker_connection_max_retries=0,
                                 broker_transport_options={"max_retries": 1})

    def _send(self, name: str, args: list[str], queue: str = QUEUE, delay_s: float | None = None) -> bool:
        try:
            self._celery.send_task(name, args=args, queue=queue, countdown=delay_s or None)
        except Exception as exc:  # noqa: BLE001 (the broker being down must not fail the request; redispatch covers it)
            log.warning("could not send %s%s to the broker (%s); it will be sent again", name, args, type(exc).__name__)
            return False
        return True

    def send_run(self, run_id: uuid.UUID) -> bool:
        return self._send(EXECUTE_RUN, [str(run_id)])

    def _send_batch(self, name: str, args: Sequence[list[str]], queue: str) -> int:
        if not args:
            return 0
        try:
            with self._celery.producer_or_acquire() as producer, producer.batch(max_size=_BATCH):
                for one in args:
                    self._celery.send_task(name, args=one, queue=queue, producer=producer)
        except Exception as exc:  # noqa: BLE001 (the broker being down must not stop the caller; the scheduler sends again)
            log.warning("could not send %d %s message(s) to the broker (%s)", len(args), name, type(exc).__name__)
            return 0
        return len(args)

    def send_schedules(self, slots: Sequence[tuple[uuid.UUID, datetime]]) -> int:
        return self._send_batch(FIRE_SCHEDULE, [[str(pipeline_id), slot.isoformat()] for pipeline_id, slot in slots],
                                QUEUE)

    def send_continuation(self, pipeline_id: uuid.UUID, slot: datetime, delay_s: float) -> bool:
        return self._send(CONTINUE_PIPELINE, [str(pipeline_id), slot.isoformat()], QUEUE, delay_s)

    def send_group_mirror(self, pipeline_id: uuid.UUID) -> bool:
        return self._send(MIRROR_GROUP, [str(pipeline_id)])

    def send_group_delete(self, connection_id: uuid.UUID, group: str) -> bool:
        return self._send(DELETE_GROUP, [str(connection_id), group])

    def send_webhook_deliveries(self, delivery_ids: Sequence[uuid.UUID]) -> int:
        return self._send_batch(DELIVER_WEBHOOK, [[str(delivery_id)] for delivery_id in delivery_ids], WEBHOOK_QUEUE)

    def send_table_maintenance(self, pipeline_id: uuid.UUID) -> bool:
        return self._send(MAINTAIN_TABLE, [str(pipeline_id)], MAINTENANCE_QUEUE)
