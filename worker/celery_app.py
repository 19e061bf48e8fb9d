"""The Celery application: Redis as broker, no result backend (runs live in the database).

Tasks are acknowledged late and rejected when their worker dies, so Redis redelivers them; a
redelivered task is harmless because a run (and a delivery's attempt) is claimed at most once.
Webhook deliveries have a queue of their own (``inlet webhook-worker``), and table maintenance too
(``inlet maintenance-worker``).
"""

from __future__ import annotations

from celery import Celery

from api.core.config import Settings, get_settings
from api.core.dispatch import DELIVER_WEBHOOK, MAINTAIN_TABLE, MAINTENANCE_QUEUE, WEBHOOK_QUEUE


def make_celery(settings: Settings) -> Celery:
    app = Celery("inlet", broker=settings.redis_url, include=["worker.tasks"])
    app.conf.update(
        task_ignore_result=True,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_default_queue="inlet",
        task_routes={DELIVER_WEBHOOK: {"queue": WEBHOOK_QUEUE}, MAINTAIN_TABLE: {"queue": MAINTENANCE_QUEUE}},
        broker_connection_retry_on_startup=True,
        # A redelivery of a still-running task finds its run claimed and returns at once. A webhook retry
        # waiting for its countdown must not be handed out again either.
        broker_transport_options={
            "visibility_timeout": int(max(settings.run_timeout_s, settings.webhook_retry_max_s)) + 600},
        worker_hijack_root_logger=False,
        task_serializer="json",
        accept_content=["json"],
    )
    return app


app = make_celery(get_settings())
