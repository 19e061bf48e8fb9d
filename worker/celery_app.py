"""The Celery application: Redis as broker, no result backend (runs live in the database).

Tasks are acknowledged late and rejected when their worker dies, so Redis redelivers them; a
redelivered task is harmless because a run is claimed at most once.
"""

from __future__ import annotations

from celery import Celery

from api.core.config import Settings, get_settings


def make_celery(settings: Settings) -> Celery:
    app = Celery("inlet", broker=settings.redis_url, include=["worker.tasks"])
    app.conf.update(
        task_ignore_result=True,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_default_queue="inlet",
        broker_connection_retry_on_startup=True,
        # A redelivery of a still-running task finds its run claimed and returns at once.
        broker_transport_options={"visibility_timeout": int(settings.run_timeout_s) + 600},
        worker_hijack_root_logger=False,
        task_serializer="json",
        accept_content=["json"],
    )
    return app


app = make_celery(get_settings())
