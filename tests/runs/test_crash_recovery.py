"""Crashes at the worst moments leave every record in Delta exactly once and the offsets equal to
what was committed: the job's Spark processes killed mid-run (the warm engine, or spark-submit), and
the worker killed between the Delta commit and the offsets commit. Real worker, Redis, Spark and
sandbox Kafka."""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import pytest
from sqlalchemy import create_engine, make_url, text

from tests.factories import Tenant, create_pipeline, make_tenant, plaintext_connection_body
from tests.fixtures.kafka import SandboxKafka, produce_keyed
from tests.fixtures.stack import Stack
from tests.runs.helpers import (
    committed_offsets,
    delta_coordinates,
    delta_txn_version,
    spark_job_pgids,
    wait_for_run,
)

pytestmark = pytest.mark.slow


def _pipeline(stack: Stack, sandbox_kafka: SandboxKafka, topic: str, path: str) -> tuple[Tenant, dict[str, Any]]:
    tenant = make_tenant(stack.client)
    conn = stack.client.post("/connections", json=plaintext_connection_body(sandbox_kafka.bootstrap_servers),
                             headers=tenant.editor).json()
    pipeline = create_pipeline(stack.client, tenant, conn["id"],
                               source={"connection_id": conn["id"], "topics": [topic], "value_format": "raw"},
                               target={"type": "delta", "path": path}, schedule=None, state="paused")
    return tenant, pipeline


def _expected(topic: str, produced: dict[int, list[int]]) -> list[tuple[str, int, int]]:
    return sorted((topic, p, o) for p, offsets in produced.items() for o in offsets)


@pytest.mark.parametrize("engine", ["warm", "submit"])
def test_killed_spark_job_is_retried_with_the_same_plan(stack, sandbox_kafka, kafka_faults, kafka_topic, engine: str) -> None:
    topic = kafka_topic(partitions=4)
    produced = produce_keyed(sandbox_kafka.bootstrap_servers, topic, 400)
    tenant, pipeline = _pipeline(stack, sandbox_kafka, topic, "crash/spark-killed")
    stack.env["INLET_RUN_ENGINE"] = engine
    stack.start_worker()
    kafka_faults.hold_fetches()  # the job waits on Kafka: no commit yet
    run_id = stack.client.post(f"/pipelines/{pipeline['id']}/runs", headers=tenant.editor).json()["id"]

    groups = stack.wait_for(lambda: spark_job_pgids(run_id), timeout_s=120, every_s=0.1, what="the Spark job to start")
    time.sleep(1)
    for group in groups:
        os.killpg(group, signal.SIGKILL)
    kafka_faults.reset()

    run = wait_for_run(stack, run_id, tenant.viewer)
    assert run["state"] == "succeeded", (run, stack.log_text())
    assert run["attempt"] == 2, "the killed attempt was retried once, with the same plan"
    assert sum(p["end"] - p["start"] for p in run["partitions"]) == 400
    assert delta_coordinates(pipeline["status"]["target_uri"]) == _expected(topic, produced)
    assert committed_offsets(stack.settings.resolved_database_url, pipeline["id"]) == {
        (topic, p): len(produced.get(p, [])) for p in range(4)
    }


@pytest.mark.parametrize("engine", ["warm", "submit"])
def test_worker_killed_between_delta_commit_and_offsets_commit(stack, sandbox_kafka, kafka_faults, kafka_topic,
                                                               engine: str) -> None:
    if make_url(stack.settings.resolved_database_url).get_backend_name() != "postgresql":
        pytest.skip("holds the run's row with SELECT … FOR NO KEY UPDATE, which SQLite lacks (make test runs it on PostgreSQL)")
    topic = kafka_topic(partitions=3)
    produced = produce_keyed(sandbox_kafka.bootstrap_servers, topic, 90)
    tenant, pipeline = _pipeline(stack, sandbox_kafka, topic, "crash/worker-killed")
    uri = pipeline["status"]["target_uri"]
    stack.env["INLET_RUN_ENGINE"] = engine
    stack.start_worker()
    kafka_faults.hold_fetches()
    run_id = stack.client.post(f"/pipelines/{pipeline['id']}/runs", headers=tenant.editor).json()["id"]
    stack.wait_for(lambda: spark_job_pgids(run_id), timeout_s=120, every_s=0.1, what="the Spark job to start")

    # Hold the run's row: the worker can write the Delta commit but not the offsets commit after it.
    # (Not its log lines: they only need a key share of the row.)
    database = create_engine(stack.settings.resolved_database_url)
    with database.connect() as held, held.begin():
        held.execute(text("SELECT id FROM runs WHERE id = :id FOR NO KEY UPDATE"), {"id": run_id})
        kafka_faults.reset()
        stack.wait_for(lambda: delta_txn_version(uri, pipeline["id"]) == 1, timeout_s=180, every_s=0.05,
                       what="the run's Delta commit")
        stack.kill("worker")
        for group in spark_job_pgids(run_id):
            os.killpg(group, signal.SIGKILL)
    database.dispose()
    crashed = stack.client.get(f"/runs/{run_id}", headers=tenant.viewer).json()
    assert crashed["state"] == "running", "the kill must land between the two commits"
    assert committed_offsets(stack.settings.resolved_database_url, pipeline["id"]) == {}

    stack.start_worker("worker-2")
    stack.start_scheduler()  # re-sends the run once its dead worker's lease expires
    run = wait_for_run(stack, run_id, tenant.viewer)
    assert run["state"] == "succeeded", (run, stack.log_text())
    assert run["already_committed"] is True
    assert delta_coordinates(uri) == _expected(topic, produced)
    assert committed_offsets(stack.settings.resolved_database_url, pipeline["id"]) == {
        (topic, p): len(produced.get(p, [])) for p in range(3)
    }
