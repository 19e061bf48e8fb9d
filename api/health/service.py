"""Readiness checks of each dependency, bounded in time, never raising."""

from __future__ import annotations

from typing import Any

import redis
from sqlalchemy import Engine, text

from api.core.config import Settings
from api.secrets.store import SecretStore


def _database(engine: Engine) -> dict[str, Any]:
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        return {"status": "ok", "dialect": engine.dialect.name}
    except Exception as exc:  # noqa: BLE001 (a readiness probe reports every failure, whatever its kind)
        return {"status": "unavailable", "detail": type(exc).__name__}


def _redis(url: str) -> dict[str, Any]:
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=1)
        client.ping()
        return {"status": "ok"}
    except Exception as exc:  # noqa: BLE001 (a readiness probe reports every failure, whatever its kind)
        return {"status": "unavailable", "detail": type(exc).__name__}


def readiness(engine: Engine, secrets: SecretStore, settings: Settings) -> dict[str, Any]:
    checks = {"database": _database(engine), "redis": _redis(settings.redis_url), "secrets": secrets.health()}
    overall = "ok" if all(c["status"] == "ok" for c in checks.values()) else "unavailable"
    return {"status": overall, "checks": checks}
