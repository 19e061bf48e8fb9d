"""Kafka misbehaving under a real run: brokers down mid-run, request errors, retention deleting
records the pipeline had not read yet. Real worker, Redis, spark-submit and sandbox Kafka; each test
ends on the exact state: every surviving record in Delta once, offsets equal to what was committed."""

from __future__ import annotations

import pytest

from tests.faults.helpers import assert_exact, runs_of, sandbox_pipeline, trigger
from tests.fixtures.kafka import produce_keyed
from tests.runs.helpers import (
    committed_offsets,
    delta_coordinates,
    spark_job_pgids,
    wait_for_run,
)

pytestmark = pytest.mark.slow

BROKERS = (1, 2, 3)
LIST_OFFSETS, FETCH = 2, 1
NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE, REQUEST_TIMED_OUT = 6, 5, 7


def test_brokers_down_during_a_run_then_back(stack, sandbox_kafka, kafka_faults, kafka_topic) -> None:
    topic = kafka_topic(partitions=3)
    produced = produce_keyed(sandbox_kafka.bootstrap_servers, topic, 90)
    tenant, pipeline = sandbox_pipeline(stack, sandbox_kafka.bootstrap_servers, topic, "faults/brokers-down")
    stack.start_worker()
    stack.start_scheduler()
    run_id = trigger(stack, tenant, pipeline)

    # Planned (the plan is stored before launch) and spark-submit started: now every leader goes.
    stack.wait_for(lambda: spark_job_pgids(run_id), timeout_s=120, every_s=0.1, what="spark-submit to start")
    for broker in BROKERS:
        kafka_faults.broker_down(broker)
    planned = stack.client.get(f"/runs/{run_id}", headers=tenant.viewer).json()
    assert sum(p["end"] - p["start"] for p in planned["partitions"]) == 90

    def first_attempt_over() -> dict | None:
        run = stack.client.get(f"/runs/{run_id}", headers=tenant.viewer).json()
        return run if run["error"] is not None or run["state"] in ("succeeded", "failed") else None

    failed_attempt = stack.wait_for(first_attempt_over, timeout_s=240, what="the attempt without brokers to end")
    assert committed_offsets(stack.settings.resolved_database_url, pipeline["id"]) == {}, "offsets moved without data"
    for broker in BROKERS:
        kafka_faults.broker_up(broker)

    run = wait_for_run(stack, run_id, tenant.viewer)
    if run["state"] == "failed":  # attempts used up: it must have failed cleanly, and a later run completes
        assert run["error"]["kind"] == "kafka_unavailable", run
        run = wait_for_run(stack, trigger(stack, tenant, pipeline), tenant.viewer)
    assert run["state"] == "succeeded", (run, failed_attempt, stack.log_text())
    assert failed_attempt["error"]["kind"] == "kafka_unavailable", failed_attempt
    # The retry used the stored plan, not a new one.
    assert [(p["start"], p["end"]) for p in run["partitions"]] == [(p["start"], p["end"]) for p in planned["partitions"]]
    assert_exact(stack, pipeline, topic, produced, 3)


def test_request_errors_are_retried_to_an_exact_result(stack, sandbox_kafka, kafka_faults, kafka_topic) -> None:
    topic = kafka_topic(partitions=3)
    produced = produce_keyed(sandbox_kafka.bootstrap_servers, topic, 120)
    tenant, pipeline = sandbox_pipeline(stack, sandbox_kafka.bootstrap_servers, topic, "faults/request-errors")
    # Offset lookups (planning, then the job's watermark check) and fetches (the executors' reads)
    # answer with retriable errors first.
    kafka_faults.request_errors(LIST_OFFSETS, [NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE, REQUEST_TIMED_OUT] * 2)
    kafka_faults.request_errors(FETCH, [NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE, REQUEST_TIMED_OUT] * 2)
    stack.start_worker()
    stack.start_scheduler()

    run = wait_for_run(stack, trigger(stack, tenant, pipeline), tenant.viewer)
    assert run["state"] == "succeeded", (run, stack.log_text())
    assert run["records_read"] == 120 and run["rows_written"] == 120
    assert len(runs_of(stack, tenant, pipeline)) == 1
    assert_exact(stack, pipeline, topic, produced, 3)


def test_records_deleted_before_they_were_read(stack, any_kafka, any_topic) -> None:
    """On the sandbox, and on a real broker through the admin API's DeleteRecords."""
    topic = any_topic(partitions=2)
    produced = produce_keyed(any_kafka.bootstrap_servers, topic, 60)
    tenant, pipeline = sandbox_pipeline(stack, any_kafka.bootstrap_servers, topic, "faults/data-loss",
                                        on_data_loss="fail")
    offsets = f"/pipelines/{pipeline['id']}/offsets"
    reset = stack.client.patch(offsets, json={"reset": "earliest"}, headers=tenant.editor)
    assert reset.status_code == 200, reset.text
    assert committed_offsets(stack.settings.resolved_database_url, pipeline["id"]) == {(topic, 0): 0, (topic, 1): 0}
    lost_to = len(produced[0]) // 2
    any_kafka.delete_records(topic, 0, lost_to)  # as retention would: partition 0's earliest offset moves up
    stack.start_worker()

    failed = wait_for_run(stack, trigger(stack, tenant, pipeline), tenant.viewer)
    assert failed["state"] == "failed", (failed, stack.log_text())
    assert failed["error"]["kind"] == "data_loss" and failed["error"]["partition"] == 0, failed
    assert f"{topic}[0]" in failed["error"]["message"] and f"[0, {lost_to})" in failed["error"]["message"], failed
    assert committed_offsets(stack.settings.resolved_database_url, pipeline["id"]) == {(topic, 0): 0, (topic, 1): 0}

    patched = stack.client.patch(f"/pipelines/{pipeline['id']}", json={"source": {"on_data_loss": "skip"}},
                                 headers={**tenant.editor, "Content-Type": "application/merge-patch+json"})
    assert patched.status_code == 200, patched.text
    run = wait_for_run(stack, trigger(stack, tenant, pipeline), tenant.viewer)
    assert run["state"] == "succeeded", (run, stack.log_text())
    by_partition = {p["partition"]: p for p in run["partitions"]}
    assert by_partition[0]["gap"] == [0, lost_to], by_partition
    assert by_partition[1]["gap"] is None
    assert run["records_read"] == 60 - lost_to
    surviving = {0: produced[0][lost_to:], 1: produced[1]}
    assert delta_coordinates(pipeline["status"]["target_uri"]) == sorted(
        (topic, p, o) for p, offs in surviving.items() for o in offs)
    assert_exact(stack, pipeline, topic, surviving, 2, ends={0: len(produced[0]), 1: len(produced[1])})
