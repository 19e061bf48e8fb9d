"""Continuous pipelines on a real worker, Redis, scheduler, warm Spark engine and the sandbox Kafka: runs
back to back (each capped, so a backlog drains in several commits), no run rows while the topic is idle,
paused, replayed in replace mode and resumed with every record exactly once; a worker killed mid-run
loses and duplicates nothing; and another tenant's run waits at most one of the continuous pipeline's
runs."""

from __future__ import annotations

import os
import signal
import time
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.factories import Tenant, create_sandbox_pipeline, make_tenant
from tests.fixtures.kafka import produce_keyed
from tests.fixtures.stack import Stack
from tests.runs.helpers import committed_offsets, delta_coordinates, spark_job_pgids, wait_for_run

pytestmark = pytest.mark.slow

CONTINUOUS = {"continuous": True, "idle_wait_ms": 200, "max_offsets_per_run": 40}


def _runs(stack: Stack, tenant: Tenant, pipeline: dict[str, Any]) -> list[dict[str, Any]]:
    listed = stack.client.get(f"/pipelines/{pipeline['id']}/runs?limit=200", headers=tenant.viewer)
    assert listed.status_code == 200, listed.text
    return listed.json()["items"]


def _once(topic: str, ends: dict[int, int]) -> list[tuple[str, int, int]]:
    return sorted((topic, p, o) for p, end in ends.items() for o in range(end))


def _add(ends: dict[int, int], produced: dict[int, list[int]]) -> dict[int, int]:
    return {p: ends.get(p, 0) + len(produced.get(p, [])) for p in set(ends) | set(produced)}


def _wait_for_table(stack: Stack, uri: str, wanted: list[tuple[str, int, int]], what: str) -> None:
    def landed() -> bool:
        try:
            return delta_coordinates(uri) == wanted
        except Exception:  # noqa: BLE001 (no table yet)
            return False
    stack.wait_for(landed, timeout_s=120, every_s=0.2, what=what)


def _set_state(stack: Stack, tenant: Tenant, pipeline: dict[str, Any], action: str) -> None:
    done = stack.client.post(f"/pipelines/{pipeline['id']}/{action}", headers=tenant.editor)
    assert done.status_code == 200, done.text


def test_runs_back_to_back_idle_without_runs_pause_replay_and_resume(stack, sandbox_kafka, kafka_topic) -> None:
    topic = kafka_topic(partitions=2)
    ends = _add({}, produce_keyed(sandbox_kafka.bootstrap_servers, topic, 100))
    tenant = make_tenant(stack.client)
    pipeline = create_sandbox_pipeline(stack.client, tenant, sandbox_kafka.bootstrap_servers, [topic],
                                       schedule=CONTINUOUS, target={"type": "delta", "path": "bronze/continuous"})
    uri = pipeline["status"]["target_uri"]
    stack.start_worker()
    stack.start_scheduler()
    _set_state(stack, tenant, pipeline, "resume")

    _wait_for_table(stack, uri, _once(topic, ends), "the backlog to land")
    runs = stack.wait_for(lambda: (listed := _runs(stack, tenant, pipeline)) and all(
        r["state"] not in ("queued", "running") for r in listed) and listed, what="the last run's offsets commit")
    assert {r["trigger"] for r in runs} == {"continuous"} and {r["state"] for r in runs} == {"succeeded"}
    assert len(runs) >= 3 and max(r["records_read"] for r in runs) <= 40, "100 records drain in runs of 40 at most"

    # Freshness: each partition's newest committed record time (the producer's, seconds ago), the worst too.
    offsets = stack.client.get(f"/pipelines/{pipeline['id']}/offsets", headers=tenant.viewer).json()["partitions"]
    now = datetime.now(UTC)
    ages = [(now - datetime.fromisoformat(p["newest_record_at"])).total_seconds() for p in offsets if p["newest_record_at"]]
    assert len(ages) == 2 and all(0 <= age < 120 for age in ages), offsets
    freshness = stack.client.get(f"/pipelines/{pipeline['id']}", headers=tenant.viewer).json()["status"]["freshness"]
    assert freshness["newest_record_at"] == min(p["newest_record_at"] for p in offsets), (freshness, offsets)

    # Idle: the pipeline keeps looking (its slot moves on) but records no run.
    before = len(runs)
    slots = set()
    for _ in range(10):
        time.sleep(0.3)
        slots.add(stack.client.get(f"/pipelines/{pipeline['id']}", headers=tenant.viewer).json()["status"]["next_run_at"])
    assert len(_runs(stack, tenant, pipeline)) == before and len(slots) >= 3, slots

    # New records land without anyone triggering a run.
    ends = _add(ends, produce_keyed(sandbox_kafka.bootstrap_servers, topic, 30))
    _wait_for_table(stack, uri, _once(topic, ends), "new records to land on their own")

    # Paused: records wait. Replayed from the start in replace mode, then resumed: every record once.
    _set_state(stack, tenant, pipeline, "pause")
    stack.wait_for(lambda: all(r["state"] not in ("queued", "running") for r in _runs(stack, tenant, pipeline)),
                   what="the last run to end")
    paused_runs = len(_runs(stack, tenant, pipeline))
    ends = _add(ends, produce_keyed(sandbox_kafka.bootstrap_servers, topic, 20))
    time.sleep(1.5)
    assert len(_runs(stack, tenant, pipeline)) == paused_runs
    replay = stack.client.patch(f"/pipelines/{pipeline['id']}/offsets", headers=tenant.editor,
                                json={"reset": "earliest", "replay_mode": "replace"})
    assert replay.status_code == 200, replay.text
    _set_state(stack, tenant, pipeline, "resume")
    _wait_for_table(stack, uri, _once(topic, ends), "the replay and the new records, each once")
    stack.wait_for(lambda: committed_offsets(stack.settings.resolved_database_url, pipeline["id"]) ==
                   {(topic, p): end for p, end in ends.items()}, what="the offsets at the ends")


def test_a_worker_killed_mid_run_loses_and_duplicates_nothing(stack, sandbox_kafka, kafka_topic, kafka_faults) -> None:
    topic = kafka_topic(partitions=2)
    ends = _add({}, produce_keyed(sandbox_kafka.bootstrap_servers, topic, 60))
    tenant = make_tenant(stack.client)
    pipeline = create_sandbox_pipeline(stack.client, tenant, sandbox_kafka.bootstrap_servers, [topic],
                                       schedule=CONTINUOUS, target={"type": "delta", "path": "bronze/killed"})
    stack.start_worker()
    kafka_faults.hold_fetches()  # the first run waits on Kafka
    _set_state(stack, tenant, pipeline, "resume")
    running = stack.wait_for(lambda: [r for r in _runs(stack, tenant, pipeline) if r["state"] == "running"],
                             timeout_s=120, every_s=0.1, what="a run to start")
    run_id = running[0]["id"]
    stack.wait_for(lambda: spark_job_pgids(run_id), timeout_s=120, every_s=0.1, what="its Spark job")
    stack.kill("worker")
    for group in spark_job_pgids(run_id):
        os.killpg(group, signal.SIGKILL)
    kafka_faults.reset()
    ends = _add(ends, produce_keyed(sandbox_kafka.bootstrap_servers, topic, 30))

    stack.start_worker("worker-2")
    stack.start_scheduler()  # sends the dead worker's run again once its lease expires
    assert wait_for_run(stack, run_id, tenant.viewer)["state"] == "succeeded"
    _wait_for_table(stack, pipeline["status"]["target_uri"], _once(topic, ends), "every record, once")
    stack.wait_for(lambda: committed_offsets(stack.settings.resolved_database_url, pipeline["id"]) ==
                   {(topic, p): end for p, end in ends.items()}, what="the offsets at the ends")


def _seconds(run: dict[str, Any], start: str, end: str) -> float:
    return (datetime.fromisoformat(run[end]) - datetime.fromisoformat(run[start])).total_seconds()


def test_another_tenants_run_waits_at_most_one_continuous_run(stack, sandbox_kafka, kafka_topic) -> None:
    busy_topic, other_topic = kafka_topic(partitions=4), kafka_topic(partitions=1)
    produce_keyed(sandbox_kafka.bootstrap_servers, busy_topic, 4000)  # a backlog of 400 runs of 10: it outlasts the test
    produce_keyed(sandbox_kafka.bootstrap_servers, other_topic, 5)
    busy, other = make_tenant(stack.client), make_tenant(stack.client)
    streaming = create_sandbox_pipeline(stack.client, busy, sandbox_kafka.bootstrap_servers, [busy_topic],
                                        schedule={**CONTINUOUS, "max_offsets_per_run": 10},
                                        target={"type": "delta", "path": "bronze/busy"})
    scheduled = create_sandbox_pipeline(stack.client, other, sandbox_kafka.bootstrap_servers, [other_topic],
                                        schedule={"interval_seconds": 10}, target={"type": "delta", "path": "bronze/o"})
    stack.start_worker()  # one worker of concurrency 1: the two tenants share it
    stack.start_scheduler()
    _set_state(stack, busy, streaming, "resume")
    stack.wait_for(lambda: len(_runs(stack, busy, streaming)) >= 3, timeout_s=120, what="the stream to be running")
    _set_state(stack, other, scheduled, "resume")

    theirs = stack.wait_for(lambda: [r for r in _runs(stack, other, scheduled) if r["state"] == "succeeded"],
                            timeout_s=60, what="the other tenant's scheduled run")[0]
    streamed = [r for r in _runs(stack, busy, streaming) if r["state"] == "succeeded"]
    longest = max(_seconds(r, "started_at", "finished_at") for r in streamed)
    # From its slot: the scheduler's tick (1 s here), then at most one of the stream's runs, then its own plan.
    waited = _seconds(theirs, "scheduled_for", "started_at")
    assert waited <= stack.settings.scheduler_interval_s + longest + 1.0, (waited, longest)
    assert any(r["started_at"] > theirs["finished_at"] for r in _runs(stack, busy, streaming)), \
        "the stream went on after it"
