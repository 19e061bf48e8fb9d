"""A pipeline doing its job for real: HTTP API → Redis → Celery worker → spark-submit → Delta,
then the scheduler firing the next run. Sandbox Kafka over TCP, no stand-ins."""

from __future__ import annotations

import pytest

from tests.factories import create_pipeline, make_tenant, plaintext_connection_body
from tests.fixtures.kafka import produce_keyed
from tests.runs.helpers import committed_offsets, delta_coordinates, wait_for_run

pytestmark = pytest.mark.slow


def test_manual_run_then_scheduled_run_ingest_every_record_once(stack, sandbox_kafka, kafka_topic) -> None:
    topic = kafka_topic(partitions=3)
    first = produce_keyed(sandbox_kafka.bootstrap_servers, topic, 30)
    client = stack.client
    tenant = make_tenant(client)
    conn = client.post("/connections", json=plaintext_connection_body(sandbox_kafka.bootstrap_servers),
                       headers=tenant.editor).json()
    pipeline = create_pipeline(
        client, tenant, conn["id"], source={"connection_id": conn["id"], "topics": [topic], "value_format": "string"},
        target={"type": "delta", "path": "bronze/e2e"}, schedule={"interval_seconds": 10}, state="paused",
    )
    stack.start_worker()

    triggered = client.post(f"/pipelines/{pipeline['id']}/runs", headers=tenant.editor)
    assert triggered.status_code == 202, triggered.text
    assert client.post(f"/pipelines/{pipeline['id']}/runs", headers=tenant.editor).status_code == 409
    run = wait_for_run(stack, triggered.json()["id"], tenant.viewer)

    assert run["state"] == "succeeded", (run, stack.log_text())
    assert run["records_read"] == 30 and run["rows_written"] == 30 and run["seq"] == 1
    assert {(p["topic"], p["partition"]): (p["start"], p["end"]) for p in run["partitions"]} == {
        (topic, p): (0, len(first.get(p, []))) for p in range(3)
    }
    uri = pipeline["status"]["target_uri"]
    expected = sorted((topic, p, o) for p, offsets in first.items() for o in offsets)
    assert delta_coordinates(uri) == expected
    assert committed_offsets(stack.settings.resolved_database_url, pipeline["id"]) == {
        (topic, p): len(first.get(p, [])) for p in range(3)
    }

    more = produce_keyed(sandbox_kafka.bootstrap_servers, topic, 12, key=lambda i: f"later-{i}")
    client.post(f"/pipelines/{pipeline['id']}/resume", headers=tenant.editor)
    stack.start_scheduler()

    def scheduled_run_done() -> dict | None:
        runs = client.get(f"/pipelines/{pipeline['id']}/runs", headers=tenant.viewer).json()["items"]
        failed = [r for r in runs if r["state"] == "failed"]
        assert not failed, (failed, stack.log_text())
        return next((r for r in runs if r["trigger"] == "schedule" and r["state"] == "succeeded"), None)

    scheduled = stack.wait_for(scheduled_run_done, timeout_s=240, what="a scheduled run to succeed")
    assert scheduled["records_read"] == 12 and scheduled["seq"] == 2
    for p, offsets in more.items():
        expected += [(topic, p, o) for o in offsets]
    assert delta_coordinates(uri) == sorted(expected)
    latest = {(topic, p): len(first.get(p, [])) + len(more.get(p, [])) for p in range(3)}
    assert committed_offsets(stack.settings.resolved_database_url, pipeline["id"]) == latest
    log = client.get(f"/runs/{run['id']}/log", headers=tenant.viewer)
    assert log.status_code == 200 and log.headers["content-type"].startswith("text/plain")
