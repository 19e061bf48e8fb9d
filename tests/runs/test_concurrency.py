"""Races decided by the database, not by luck: simultaneous triggers, two schedulers, two workers
claiming one run. Real database and Redis; the messages the API and schedulers send are read back
from Redis itself. And runs of two pipelines at once on one worker, each on its own warm engine."""

from __future__ import annotations

import ast
import json
import threading
import uuid
from collections.abc import Callable
from datetime import timedelta

import pytest
import redis
from fastapi.testclient import TestClient
from sqlalchemy import update
from sqlmodel import Session

from api.core.config import Settings
from api.core.db import unit_of_work, utcnow
from api.core.dispatch import QUEUE, CeleryDispatcher
from api.pipelines.models import Pipeline
from api.runs import lifecycle
from api.runs.models import Run
from tests.factories import Tenant, create_pipeline, make_tenant
from tests.faults.helpers import assert_exact, sandbox_pipeline, trigger
from tests.fixtures.kafka import produce_keyed
from tests.runs.helpers import spark_job_pgids, wait_for_run
from worker.scheduler import tick


def _sent(redis_url: str) -> list[tuple[str, list[str]]]:
    """Every task message waiting in Inlet's queue: (task name, args)."""
    messages = redis.Redis.from_url(redis_url).lrange(QUEUE, 0, -1)
    out = []
    for raw in messages:
        headers = json.loads(raw)["headers"]
        out.append((headers["task"], ast.literal_eval(headers["argsrepr"])))
    return out


def _run_concurrently(n: int, target: Callable[[], object]) -> list:
    barrier = threading.Barrier(n)
    results: list = [None] * n

    def worker(i: int) -> None:
        barrier.wait()
        results[i] = target()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return results


def test_two_simultaneous_triggers_make_one_run(stack) -> None:
    tenant = make_tenant(stack.client)
    pipeline = create_pipeline(stack.client, tenant, state="paused")

    responses = _run_concurrently(2, lambda: stack.client.post(f"/pipelines/{pipeline['id']}/runs", headers=tenant.editor))

    assert sorted(r.status_code for r in responses) == [202, 409]
    created = next(r for r in responses if r.status_code == 202).json()
    refused = next(r for r in responses if r.status_code == 409).json()
    assert refused["type"].endswith("/active-run-exists") and refused["run_id"] == created["id"]
    runs = stack.client.get(f"/pipelines/{pipeline['id']}/runs", headers=tenant.viewer).json()
    assert [r["id"] for r in runs["items"]] == [created["id"]] and created["seq"] == 1
    assert _sent(stack.settings.redis_url) == [("inlet.execute_run", [created["id"]])]


def test_two_schedulers_fire_each_due_slot_once_and_catch_up_once(stack) -> None:
    tenant = make_tenant(stack.client)
    ids = [create_pipeline(stack.client, tenant, schedule={"interval_seconds": 60})["id"] for _ in range(12)]
    engine = stack.client.app.state.engine
    long_ago = utcnow() - timedelta(hours=6)  # 360 missed slots each
    with unit_of_work(engine) as session:
        session.execute(update(Pipeline).values(next_run_at=long_ago))

    dispatcher = CeleryDispatcher(stack.settings.redis_url)
    reports = _run_concurrently(2, lambda: tick(engine, dispatcher, stack.settings))

    assert sum(r.fired for r in reports) == 12
    fired = [args[0] for task, args in _sent(stack.settings.redis_url) if task == "inlet.fire_schedule"]
    assert sorted(fired) == sorted(ids)
    with Session(engine) as session:
        nexts = [session.get(Pipeline, uuid.UUID(i)).next_run_at for i in ids]
    assert all(n > utcnow() for n in nexts), "after downtime the next slot is in the future: no flood"
    assert tick(engine, dispatcher, stack.settings).fired == 0


def test_a_run_is_claimed_by_one_worker_only(client: TestClient, tenant: Tenant, settings: Settings) -> None:
    pipeline_id = uuid.UUID(create_pipeline(client, tenant, state="paused")["id"])
    engine = client.app.state.engine
    with unit_of_work(engine) as session:
        run_id = lifecycle.create_run(session, session.get(Pipeline, pipeline_id), trigger="manual").id

    def claim_as(name: str) -> str | None:
        with unit_of_work(engine) as session:
            run = lifecycle.claim(session, run_id, worker=name, lease_s=30)
            return run.worker if run else None

    winners = [w for w in _run_concurrently(4, lambda: claim_as(threading.current_thread().name)) if w]
    assert len(winners) == 1
    with Session(engine) as session:
        run = session.get(Run, run_id)
        assert (run.state, run.worker, run.attempt) == ("running", winners[0], 1)


def test_a_pipeline_with_an_active_run_cannot_be_deleted(client: TestClient, tenant: Tenant) -> None:
    pipeline = create_pipeline(client, tenant, state="paused")
    with unit_of_work(client.app.state.engine) as session:
        run_id = lifecycle.create_run(session, session.get(Pipeline, uuid.UUID(pipeline["id"])), trigger="manual").id

    refused = client.delete(f"/pipelines/{pipeline['id']}", headers=tenant.editor)

    assert refused.status_code == 409 and refused.json()["run_id"] == str(run_id)
    assert client.get(f"/pipelines/{pipeline['id']}", headers=tenant.viewer).status_code == 200


@pytest.mark.slow
def test_one_worker_runs_two_pipelines_at_once_each_on_its_own_engine(stack, sandbox_kafka, kafka_faults,
                                                                      kafka_topic) -> None:
    topics = [kafka_topic(partitions=2) for _ in range(2)]
    produced = [produce_keyed(sandbox_kafka.bootstrap_servers, topic, 40) for topic in topics]
    pipelines = [sandbox_pipeline(stack, sandbox_kafka.bootstrap_servers, topic, f"parallel/{i}")
                 for i, topic in enumerate(topics)]
    stack.start_worker(concurrency=2)
    kafka_faults.hold_fetches()  # each run stays in its Spark job until both are seen running
    run_ids = [trigger(stack, tenant, pipeline) for tenant, pipeline in pipelines]

    stack.wait_for(lambda: all(spark_job_pgids(r) for r in run_ids), timeout_s=180, every_s=0.1,
                   what="both runs in their Spark jobs at once")
    first, second = (spark_job_pgids(r) for r in run_ids)
    assert first and second and first.isdisjoint(second), "two runs at once, on two engines"
    kafka_faults.reset()
    for run_id, (tenant, pipeline), topic, placed in zip(run_ids, pipelines, topics, produced, strict=True):
        run = wait_for_run(stack, run_id, tenant.viewer)
        assert run["state"] == "succeeded", (run, stack.log_text())
        assert_exact(stack, pipeline, topic, placed, 2)
