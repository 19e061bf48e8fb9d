"""Usage after real runs: HTTP API → Redis → Celery worker → Spark → Delta, a run and a replace-mode
replay of its last records. The ledger holds exactly what the two runs report, the replay's records
counted as read again, and the bytes of the Delta files written."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime

import pytest

from api.core.db import make_engine, unit_of_work
from api.runs.models import Run
from tests.factories import create_sandbox_pipeline, make_tenant
from tests.fixtures.kafka import SandboxKafka, produce_keyed
from tests.fixtures.stack import Stack
from tests.runs.helpers import run_succeeded

pytestmark = pytest.mark.slow


def test_real_runs_and_a_replace_replay_are_metered_as_they_report(stack: Stack, sandbox_kafka: SandboxKafka, kafka_topic: Callable[..., str]) -> None:
    topic = kafka_topic(partitions=3)
    produced = produce_keyed(sandbox_kafka.bootstrap_servers, topic, 30)
    client = stack.client
    tenant = make_tenant(client)
    pipeline = create_sandbox_pipeline(client, tenant, sandbox_kafka.bootstrap_servers, [topic])
    stack.start_worker()

    first = run_succeeded(stack, tenant, pipeline)
    replaced = client.patch(f"/pipelines/{pipeline['id']}/offsets", headers=tenant.editor,
                            json={"shift_by": -3, "clamp": True, "replay_mode": "replace"})
    assert replaced.status_code == 200, replaced.text
    second = run_succeeded(stack, tenant, pipeline)
    replayed = sum(min(3, len(offsets)) for offsets in produced.values())
    assert (first["records_read"], second["records_read"]) == (30, replayed)

    engine = make_engine(stack.settings.resolved_database_url)
    with unit_of_work(engine) as session:
        runs = [session.get(Run, uuid.UUID(r["id"])) for r in (first, second)]
        assert all(r is not None and r.claimed_at and r.finished_at and r.result for r in runs)
        results = [r.result for r in runs]  # type: ignore[union-attr]
        wall_ms = sum(round((r.finished_at - r.claimed_at).total_seconds() * 1000) for r in runs)  # type: ignore[operator,union-attr]
    engine.dispose()

    def engine_ms(result: dict) -> int:  # type: ignore[type-arg]
        timings = result["timings"]
        took = datetime.fromisoformat(timings["finished_at"]) - datetime.fromisoformat(timings["started_at"])
        return round(took.total_seconds() * 1000)

    items = client.get("/usage", params={"pipeline_id": pipeline["id"]}, headers=tenant.viewer).json()["items"]
    summed = {name: sum(i[name] for i in items) for name in (
        "records_read", "rows_written", "rows_quarantined", "bytes_read", "bytes_written")}
    assert summed == {
        "records_read": 30 + replayed, "rows_written": 30 + replayed, "rows_quarantined": 0,
        "bytes_read": sum(r["bytes_read"] for r in results), "bytes_written": sum(r["bytes_written"] for r in results),
    }
    assert all(r["bytes_written"] > 0 for r in results)  # the Delta files' sizes, as committed
    assert round(sum(i["wall_seconds"] for i in items) * 1000) == wall_ms
    assert round(sum(i["engine_seconds"] for i in items) * 1000) == sum(engine_ms(r) for r in results)
    assert {o: sum(i["runs"][o] for i in items) for o in ("succeeded", "failed", "retried", "cancelled", "skipped")} \
        == {"succeeded": 2, "failed": 0, "retried": 0, "cancelled": 0, "skipped": 0}
