"""What every fault test needs: a pipeline on the sandbox, a trigger, and the exact-state check
(the Delta table holds every produced record exactly once, the offsets equal what was committed)."""

from __future__ import annotations

import os
import signal
from typing import Any

from tests.factories import (
    Tenant,
    create_pipeline,
    make_tenant,
    plaintext_connection_body,
)
from tests.fixtures.stack import Stack
from tests.runs.helpers import committed_offsets, delta_coordinates, spark_job_pgids


def sandbox_pipeline(stack: Stack, bootstrap_servers: str, topic: str, path: str,
                     **source: Any) -> tuple[Tenant, dict[str, Any]]:
    """A paused, unscheduled pipeline reading ``topic`` raw into the Delta table at ``path``."""
    tenant = make_tenant(stack.client)
    conn = stack.client.post("/connections", json=plaintext_connection_body(bootstrap_servers), headers=tenant.editor)
    assert conn.status_code == 201, conn.text
    pipeline = create_pipeline(stack.client, tenant, conn.json()["id"],
                               source={"connection_id": conn.json()["id"], "topics": [topic], "value_format": "raw",
                                       **source},
                               target={"type": "delta", "path": path}, schedule=None, state="paused")
    return tenant, pipeline


def trigger(stack: Stack, tenant: Tenant, pipeline: dict[str, Any]) -> str:
    response = stack.client.post(f"/pipelines/{pipeline['id']}/runs", headers=tenant.editor)
    assert response.status_code == 202, response.text
    return response.json()["id"]


def coordinates(topic: str, produced: dict[int, list[int]]) -> list[tuple[str, int, int]]:
    return sorted((topic, p, o) for p, offsets in produced.items() for o in offsets)


def assert_exact(stack: Stack, pipeline: dict[str, Any], topic: str, produced: dict[int, list[int]],
                 partitions: int, *, ends: dict[int, int] | None = None) -> None:
    """Delta holds each produced record once and nothing else; each offset is the partition's end."""
    assert delta_coordinates(pipeline["status"]["target_uri"]) == coordinates(topic, produced), stack.log_text()
    ends = ends if ends is not None else {p: len(produced.get(p, [])) for p in range(partitions)}
    assert committed_offsets(stack.settings.resolved_database_url, pipeline["id"]) == {
        (topic, p): end for p, end in ends.items()
    }


def runs_of(stack: Stack, tenant: Tenant, pipeline: dict[str, Any]) -> list[dict[str, Any]]:
    body = stack.client.get(f"/pipelines/{pipeline['id']}/runs", headers=tenant.viewer, params={"limit": 100}).json()
    return body["items"]


def kill_spark(run_id: str) -> int:
    """SIGKILL every process group of the run's spark-submit; how many there were."""
    groups = spark_job_pgids(run_id)
    for group in groups:
        try:
            os.killpg(group, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return len(groups)
