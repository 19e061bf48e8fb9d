"""A Delta table's shape stays while it holds data: an edit that would change what its rows are (mode,
scd_type, key, key_from, partition_by, the Delta features it was created with) on the same path is
refused naming the field, before any run fails on the table; on a new path, or before anything was
written, any shape goes."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.core.db import unit_of_work
from api.maintenance.triggers import record_commit
from api.pipelines.models import Pipeline
from tests.factories import assert_problem, create_connection, create_pipeline, pipeline_body
from tests.fixtures.dispatch import RecordingDispatcher, app, dispatcher  # noqa: F401  (the fixtures)

MERGE_PATCH = {"Content-Type": "application/merge-patch+json"}
SOURCE = {"value_format": "json", "schema": "id BIGINT, name STRING"}
KEYED = {"type": "delta", "path": "silver/customers", "mode": "upsert", "key": ["id"]}


def _create(client: TestClient, tenant: Any, target: dict[str, Any]) -> dict[str, Any]:
    conn = create_connection(client, tenant)["id"]
    return create_pipeline(client, tenant, conn, source={**pipeline_body(conn)["source"], **SOURCE}, target=target,
                           state="paused")


def _written(client: TestClient, pipeline_id: str) -> None:
    """As a run's commit records it: the table at the pipeline's path now holds data."""
    with unit_of_work(client.app.state.engine) as session:
        record_commit(session, session.get(Pipeline, uuid.UUID(pipeline_id)),
                      {"files_written": 1, "bytes_written": 1000, "delta_version": 1})


def _patch(client: TestClient, tenant: Any, pipeline_id: str, target: dict[str, Any]) -> Any:
    return client.patch(f"/pipelines/{pipeline_id}", json={"target": target}, headers={**tenant.editor, **MERGE_PATCH})


@pytest.mark.parametrize(("change", "field"), [
    ({"scd_type": 2}, "target.scd_type"),
    ({"key": ["name"]}, "target.key"),
    ({"mode": "append", "key": None}, "target.mode"),
    ({"partition_by": ["id"]}, "target.partition_by"),
    ({"table_features": {"deletion_vectors": True}}, "target.table_features"),
])
def test_a_keyed_table_with_data_keeps_its_shape_on_its_path(client: TestClient, tenant: Any,
                                                          dispatcher: RecordingDispatcher,  # noqa: F811
                                                          change: dict[str, Any], field: str) -> None:
    pipeline = _create(client, tenant, KEYED)
    assert _patch(client, tenant, pipeline["id"], change).status_code == 200  # nothing written yet: any shape
    assert _patch(client, tenant, pipeline["id"], {k: KEYED.get(k) for k in change}).status_code == 200
    _written(client, pipeline["id"])
    etag = client.get(f"/pipelines/{pipeline['id']}", headers=tenant.viewer).headers["etag"]

    problem = assert_problem(_patch(client, tenant, pipeline["id"], change), 422)
    assert [e["field"] for e in problem["errors"]] == [field]
    assert "write another to a new path" in problem["errors"][0]["message"]
    assert client.get(f"/pipelines/{pipeline['id']}", headers=tenant.viewer).headers["etag"] == etag  # unchanged

    moved = _patch(client, tenant, pipeline["id"], {**change, "path": "silver/customers-v2"})
    assert moved.status_code == 200, moved.text
    assert moved.json()["status"]["table"] is None  # another table: nothing recorded of it yet


def test_an_append_table_with_data_does_not_become_keyed_on_its_path(client: TestClient, tenant: Any,
                                                                   dispatcher: RecordingDispatcher) -> None:  # noqa: F811
    pipeline = _create(client, tenant, {"type": "delta", "path": "bronze/c"})
    _written(client, pipeline["id"])
    problem = assert_problem(_patch(client, tenant, pipeline["id"], {"mode": "upsert", "key": ["id"]}), 422)
    assert [e["field"] for e in problem["errors"]] == ["target.mode"]
    # What leaves the rows as they are still goes: the maintenance policy, the partitioning of a new path.
    assert _patch(client, tenant, pipeline["id"], {"maintenance": {"enabled": False}}).status_code == 200
