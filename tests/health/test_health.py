"""``/healthz`` and ``/readyz``: liveness without dependencies, readiness naming each dependency."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from api.core.config import Settings
from api.core.db import make_engine
from tests.factories import assert_problem


def test_healthz(client: TestClient) -> None:
    response = client.get("/healthz")
    assert (response.status_code, response.json()) == (200, {"status": "ok"})


def test_readyz_reports_each_dependency(client: TestClient, settings: Settings) -> None:
    # The test settings point Redis at a closed port: the database and secrets answer, Redis does not.
    response = client.get("/readyz")
    assert response.status_code == 503
    dialect = "postgresql" if settings.resolved_database_url.startswith("postgresql") else "sqlite"
    assert response.json() == {"status": "unavailable", "checks": {
        "database": {"status": "ok", "dialect": dialect},
        "redis": {"status": "unavailable", "detail": "ConnectionError"},
        "secrets": {"backend": "local", "status": "ok"},
    }}


def test_readyz_reports_a_dead_database(client: TestClient, tmp_path: Path) -> None:
    live, dead = client.app.state.engine, make_engine(f"sqlite:///{tmp_path}/missing/dir/inlet.db")
    client.app.state.engine = dead
    try:
        response = client.get("/readyz")
    finally:
        client.app.state.engine = live
        dead.dispose()
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable"
    assert body["checks"]["database"]["status"] == "unavailable"


def test_health_needs_no_key_and_takes_no_writes(client: TestClient) -> None:
    assert client.get("/healthz", headers={"Authorization": "Bearer nonsense"}).status_code == 200
    assert_problem(client.post("/healthz"), 405)
    assert_problem(client.delete("/readyz"), 405)
