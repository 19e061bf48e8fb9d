"""Shared fixtures: a real database built with ``alembic upgrade head``, the app, and an HTTP client.

The database is PostgreSQL when ``INLET_TEST_DATABASE_URL`` names one (``make test`` starts a
private server and sets it), SQLite otherwise. Each test starts from empty tables.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

# Every service of the suite (Kafka, registries, receivers, token servers) is on loopback, which the
# egress policy denies by default: opened for every Settings the suite builds, worker subprocesses
# included, before any is built. Names (the factories' example.com brokers) are not looked up when a
# connection is written, so no test waits on, or sends to, a name server for it; addresses are still
# checked, and every name at its connection. tests/hostile builds its own Settings with loopback
# denied and lookups on.
os.environ.setdefault("INLET_EGRESS_ALLOW", "127.0.0.0/8,::1/128")
os.environ.setdefault("INLET_EGRESS_LOOKUP_S", "0")

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text

from api.core.config import Settings
from api.core.migrate import upgrade_to_head
from api.main import create_app
from tests.factories import ADMIN_TOKEN, Tenant
from tests.fixtures.database import truncate_all

pytest_plugins = ["tests.fixtures.kafka", "tests.fixtures.object_storage", "tests.fixtures.azure_storage",
                  "tests.fixtures.gcs_storage", "tests.fixtures.oidc", "tests.fixtures.schema_registry",
                  "tests.fixtures.spark_cluster", "tests.fixtures.stack", "tests.fixtures.terraform", "tests.fixtures.vault",
                  "tests.fixtures.delta_spark", "tests.fixtures.egress"]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "database_url" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.db)


def _worker_suffix() -> str:
    return os.environ.get("PYTEST_XDIST_WORKER", "main")


@pytest.fixture(scope="session")
def database_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A fresh database at Alembic head for this test session (one per xdist worker)."""
    server = os.environ.get("INLET_TEST_DATABASE_URL")
    if not server:
        url = f"sqlite:///{tmp_path_factory.mktemp('db') / 'inlet.db'}"
        upgrade_to_head(url)
        yield url
        return
    name = f"inlet_test_{_worker_suffix()}_{uuid.uuid4().hex[:6]}"
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = server.rsplit("/", 1)[0] + f"/{name}"
    upgrade_to_head(url)
    yield url
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture
def settings(database_url: str, tmp_path: Path) -> Settings:
    return Settings(
        database_url=database_url, data_dir=tmp_path / "data", storage_root=str(tmp_path / "storage"),
        admin_token=ADMIN_TOKEN, redis_url="redis://127.0.0.1:1/0",
    )


@pytest.fixture
def app(settings: Settings) -> Iterator[object]:
    application = create_app(settings)
    yield application
    truncate_all(application.state.engine)
    application.state.engine.dispose()


@pytest.fixture
def client(app: object) -> Iterator[TestClient]:
    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client


@pytest.fixture
def tenant(client: TestClient) -> Tenant:
    from tests.factories import make_tenant

    return make_tenant(client)


@pytest.fixture
def other_tenant(client: TestClient) -> Tenant:
    from tests.factories import make_tenant

    return make_tenant(client)
