"""Crashes at the worst moments leave the table as one clean run would and the offsets at what was
committed: the job's Spark processes killed mid-run (the warm engine, or spark-submit), and the worker
killed between the Delta commit and the offsets commit. For an append table (every record exactly
once) and a keyed one (a Debezium change log's final state, merged once). Real worker, Redis, Spark and
sandbox Kafka."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from typing import Any, ClassVar

import pytest
from sqlalchemy import create_engine, make_url, text

from tests.factories import Tenant, create_sandbox_pipeline, make_tenant
from tests.fixtures.debezium import SCHEMA, change_log, final_rows, live_rows, produce_changes
from tests.fixtures.kafka import SandboxKafka, produce_keyed
from tests.fixtures.stack import Stack
from tests.runs.helpers import (
    committed_offsets,
    delta_coordinates,
    delta_txn_version,
    spark_job_pgids,
    txn_operations,
    wait_for_run,
)

pytestmark = pytest.mark.slow


class Appends:
    """Keyed raw records into an append table, which must hold each (topic, partition, offset) once."""

    source: ClassVar[dict[str, Any]] = {"value_format": "raw"}
    target: ClassVar[dict[str, Any]] = {"type": "delta"}
    operation = "WRITE"

    def __init__(self, records: int, partitions: int) -> None:
        self.records, self.partitions = records, partitions

    def produce(self, bootstrap: str, topic: str) -> dict[int, int]:
        """The records on ``topic``; each partition's end offset."""
        return {p: len(offsets) for p, offsets in produce_keyed(bootstrap, topic, self.records).items()}

    def assert_table(self, uri: str, topic: str, ends: dict[int, int]) -> None:
        assert delta_coordinates(uri) == sorted((topic, p, o) for p, end in ends.items() for o in range(end))


class DebeziumChanges:
    """A Debezium change log (inserts, updates, deletes with their tombstones, keys that move partition
    halfway) into a keyed table, which must hold exactly the log's final state."""

    partitions = 3  # produce_changes' partitions
    source: ClassVar[dict[str, Any]] = {"value_format": "json", "schema": SCHEMA}
    target: ClassVar[dict[str, Any]] = {"type": "delta", "mode": "upsert", "key": ["id"], "sequence_by": "source.lsn",
                                       "changes": "debezium"}
    operation = "MERGE"

    def __init__(self, changes: int) -> None:
        self.log = change_log(seed=30, keys=25, n=changes)

    def produce(self, bootstrap: str, topic: str) -> dict[int, int]:
        return produce_changes(bootstrap, topic, self.log)

    def assert_table(self, uri: str, topic: str, ends: dict[int, int]) -> None:
        assert live_rows(uri) == final_rows(self.log)


Workload = Appends | DebeziumChanges


def _cases(appends: Appends) -> list[Any]:
    """(engine, workload): appends on both engines; the keyed table on the warm one (CI's time)."""
    return [pytest.param("warm", appends, id="warm-append"), pytest.param("submit", appends, id="submit-append"),
            pytest.param("warm", DebeziumChanges(300), id="warm-upsert")]


def _pipeline(stack: Stack, sandbox_kafka: SandboxKafka, kafka_topic: Callable[..., str], workload: Workload,
              path: str) -> tuple[Tenant, dict[str, Any], str, dict[int, int]]:
    """A paused pipeline of ``workload`` from a new topic that holds its records, and the topic's ends."""
    topic = kafka_topic(partitions=workload.partitions)
    ends = workload.produce(sandbox_kafka.bootstrap_servers, topic)
    tenant = make_tenant(stack.client)
    pipeline = create_sandbox_pipeline(stack.client, tenant, sandbox_kafka.bootstrap_servers, [topic],
                                       source=workload.source, target={**workload.target, "path": path})
    return tenant, pipeline, topic, ends


def _assert_recovered(stack: Stack, pipeline: dict[str, Any], run: dict[str, Any], workload: Workload, topic: str,
                      ends: dict[int, int]) -> None:
    """The retried run succeeded, its records are in the table as one clean run leaves them, committed
    by one Delta commit, and the offsets are at the partitions' ends."""
    assert run["state"] == "succeeded", (run, stack.log_text())
    assert sum(p["end"] - p["start"] for p in run["partitions"]) == sum(ends.values())
    uri = pipeline["status"]["target_uri"]
    workload.assert_table(uri, topic, ends)
    assert txn_operations(uri, pipeline["id"], run["seq"]) == [workload.operation]
    assert committed_offsets(stack.settings.resolved_database_url, pipeline["id"]) == {
        (topic, p): ends.get(p, 0) for p in range(workload.partitions)
    }


@pytest.mark.parametrize(("engine", "workload"), _cases(Appends(400, partitions=4)))
def test_killed_spark_job_is_retried_with_the_same_plan(stack, sandbox_kafka, kafka_faults, kafka_topic, engine: str,
                                                        workload: Workload) -> None:
    tenant, pipeline, topic, ends = _pipeline(stack, sandbox_kafka, kafka_topic, workload, "crash/spark-killed")
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
    _assert_recovered(stack, pipeline, run, workload, topic, ends)
    assert run["attempt"] == 2, "the killed attempt was retried once, with the same plan"


@pytest.mark.parametrize(("engine", "workload"), _cases(Appends(90, partitions=3)))
def test_worker_killed_between_delta_commit_and_offsets_commit(stack, sandbox_kafka, kafka_faults, kafka_topic,
                                                               engine: str, workload: Workload) -> None:
    if make_url(stack.settings.resolved_database_url).get_backend_name() != "postgresql":
        pytest.skip("holds the run's row with SELECT … FOR NO KEY UPDATE, which SQLite lacks (make test runs it on PostgreSQL)")
    tenant, pipeline, topic, ends = _pipeline(stack, sandbox_kafka, kafka_topic, workload, "crash/worker-killed")
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
    _assert_recovered(stack, pipeline, run, workload, topic, ends)
    assert run["already_committed"] is True
