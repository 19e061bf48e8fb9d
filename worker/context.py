"""The worker process's long-lived parts: settings, database, secret store, the run executor
(``inlet worker``), the webhook sender (``inlet webhook-worker``) and the table maintainer
(``inlet maintenance-worker``)."""

from __future__ import annotations

from functools import lru_cache

import api.models  # noqa: F401  (every table registered: foreign keys resolve across domains)
from api.core.config import get_settings
from api.core.db import make_engine
from api.core.dispatch import CeleryDispatcher
from api.core.enqueue import bind
from api.secrets.backends import build_secret_store
from worker.maintenance import TableMaintainer
from worker.runner import RunExecutor
from worker.webhooks import WebhookSender


@lru_cache
def executor() -> RunExecutor:
    settings = get_settings()
    db = make_engine(settings.resolved_database_url)
    bind(db, CeleryDispatcher(settings.redis_url))  # a run's outcome hands its webhook deliveries over
    return RunExecutor(settings, db, build_secret_store(settings))


@lru_cache
def webhook_sender() -> WebhookSender:
    settings = get_settings()
    return WebhookSender(settings, make_engine(settings.resolved_database_url), build_secret_store(settings))


@lru_cache
def table_maintainer() -> TableMaintainer:
    settings = get_settings()
    db = make_engine(settings.resolved_database_url)
    bind(db, CeleryDispatcher(settings.redis_url))  # a finished task sends the next one it finds due
    return TableMaintainer(settings, db)
