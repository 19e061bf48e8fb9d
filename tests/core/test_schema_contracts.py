"""The committed contracts match the code: ``openapi.yaml`` equals what the app serves, and the
Alembic migrations build exactly the schema the models describe."""

from __future__ import annotations

from pathlib import Path

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine

from api.models import metadata
from api.openapi import render_openapi

ROOT = Path(__file__).resolve().parents[2]


def test_openapi_yaml_is_what_the_app_serves() -> None:
    committed = (ROOT / "openapi.yaml").read_text()
    assert committed == render_openapi(), (
        "openapi.yaml is stale: refresh it with `.venv/bin/inlet openapi --write openapi.yaml`"
    )


def test_operation_ids_are_unique_and_present() -> None:
    import yaml

    doc = yaml.safe_load(render_openapi())
    ids = [op["operationId"] for path in doc["paths"].values() for op in path.values()]
    assert len(ids) == len(set(ids))
    assert all(ids)


def test_migrations_match_the_models(database_url: str) -> None:
    engine = create_engine(database_url)
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), metadata)
    engine.dispose()
    assert diff == [], f"models and migrations disagree; add an Alembic revision: {diff}"
