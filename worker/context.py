"""The worker process's long-lived parts: settings, database engine, secret store, executor."""

from __future__ import annotations

from functools import lru_cache

import api.models  # noqa: F401  (every table registered: foreign keys resolve across domains)
from api.core.config import get_settings
from api.core.db import make_engine
from api.secrets.backends import build_secret_store
from worker.runner import RunExecutor


@lru_cache
def executor() -> RunExecutor:
    settings = get_settings()
    return RunExecutor(settings, make_engine(settings.resolved_database_url), build_secret_store(settings))
