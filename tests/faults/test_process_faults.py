"""Processes dying at random points of a real run: the job's Spark processes (the warm engine, or
spark-submit) killed several times at seeded random delays within one run's life, the worker killed
while its job runs, and a run cancelled (on the warm engine, one timed out too) while its Spark job
runs. Each runs on both run engines and ends on the exact state: every record in Delta once, the
offsets at the partitions' ends, no job left running, no spec left.

The fixed-point variants (a kill during the JVM's start-up; the worker killed between the Delta
commit and the offsets commit) are in tests/runs/test_crash_recovery.py.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import pytest

from tests.faults.helpers import (
    assert_exact,
    kill_spark,
    runs_of,
    sandbox_pipeline,
    trigger,
)
from tests.fixtures.kafka import produce_keyed
from tests.fixtures.stack import Stack
from tests.runs.helpers import committed_offsets, spark_job_pgids, wait_for_run

pytestmark = pytest.mark.slow
ENGINES = pytest.mark.parametrize("engine", ["warm", "submit"])

# INLET_TEST_FAULT_SEED=<n> replays another sequence of kill points; the seed is in every failure message.
SEED = int(os.environ.get("INLET_TEST_FAULT_SEED", "20250609"))
KILLS = 3


def _leftovers(stack: Stack) -> list[Path]:
    return sorted(Path(stack.env["INLET_WORK_DIR"]).rglob("spec-*.json"))


# A kill lands anywhere from the job's start to its Delta commit on a quiet machine (later on a busy
# one): a run of 200 records lasts about a second on a warm engine, 5-6 s by spark-submit.
KILL_DELAYS_S = {"warm": (0.05, 1.2), "submit": (0.5, 5.0)}


@ENGINES
def test_spark_job_killed_at_random_points(stack, sandbox_kafka, kafka_topic, engine: str) -> None:
    rng = random.Random(SEED)
    topic = kafka_topic(partitions=4)
    produced = produce_keyed(sandbox_kafka.bootstrap_servers, topic, 200)
    tenant, pipeline = sandbox_pipeline(stack, sandbox_kafka.bootstrap_servers, topic, "faults/spark-killed")
    stack.env["INLET_RUN_MAX_ATTEMPTS"] = str(KILLS + 1)
    stack.env["INLET_RUN_ENGINE"] = engine
    stack.start_worker()
    run_id = trigger(stack, tenant, pipeline)

    landed: list[tuple[int, float]] = []
    for attempt in range(1, KILLS + 1):
        def started(attempt: int = attempt) -> bool:
            run = stack.client.get(f"/runs/{run_id}", headers=tenant.viewer).json()
            return run["state"] not in ("queued", "running") or (run["attempt"] == attempt and bool(spark_job_pgids(run_id)))

        stack.wait_for(started, timeout_s=180, every_s=0.05, what=f"attempt {attempt}'s Spark job (seed {SEED})")
        delay = rng.uniform(*KILL_DELAYS_S[engine])
        time.sleep(delay)
        if not kill_spark(run_id):
            break  # the job had already ended: this attempt succeeded or was committed
        landed.append((attempt, round(delay, 2)))
        if committed_offsets(stack.settings.resolved_database_url, pipeline["id"]):
            break

    run = wait_for_run(stack, run_id, tenant.viewer)
    context = (SEED, landed, run)
    assert run["state"] == "succeeded", (context, stack.log_text())
    assert landed, f"no kill landed: the job outran every delay (seed {SEED})"
    # A kill after the Delta commit is recovered without a new attempt; any other costs one attempt.
    assert run["attempt"] in (len(landed), len(landed) + 1), context
    assert run["already_committed"] or run["attempt"] == len(landed) + 1, context
    assert sum(p["end"] - p["start"] for p in run["partitions"]) == 200
    assert len(runs_of(stack, tenant, pipeline)) == 1
    assert_exact(stack, pipeline, topic, produced, 4)
    assert not spark_job_pgids(run_id) and _leftovers(stack) == []


@ENGINES
def test_worker_killed_while_its_job_runs(stack, sandbox_kafka, kafka_faults, kafka_topic, engine: str) -> None:
    topic = kafka_topic(partitions=3)
    produced = produce_keyed(sandbox_kafka.bootstrap_servers, topic, 90)
    tenant, pipeline = sandbox_pipeline(stack, sandbox_kafka.bootstrap_servers, topic, "faults/worker-killed")
    stack.env["INLET_RUN_ENGINE"] = engine
    stack.start_worker()
    kafka_faults.hold_fetches()  # the job's tasks wait on Kafka
    run_id = trigger(stack, tenant, pipeline)

    stack.wait_for(lambda: spark_job_pgids(run_id), timeout_s=120, every_s=0.1, what="the Spark job to start")
    time.sleep(2)
    stack.kill("worker")
    # Nobody watches a job whose worker is gone (no cancel, no timeout, no lease): it must die too,
    # or it would write the run's data while another worker runs the same plan.
    stack.wait_for(lambda: not spark_job_pgids(run_id), timeout_s=20, every_s=0.2,
                   what="the dead worker's spark-submit to stop")
    assert stack.client.get(f"/runs/{run_id}", headers=tenant.viewer).json()["state"] == "running"
    assert committed_offsets(stack.settings.resolved_database_url, pipeline["id"]) == {}

    kafka_faults.reset()
    stack.start_worker("worker-2")
    stack.start_scheduler()  # sends the run again once the dead worker's lease expires
    run = wait_for_run(stack, run_id, tenant.viewer)
    assert run["state"] == "succeeded", (run, stack.log_text())
    assert run["attempt"] == 2
    assert len(runs_of(stack, tenant, pipeline)) == 1
    assert_exact(stack, pipeline, topic, produced, 3)
    assert _leftovers(stack) == [], "the killed attempt's spec file (with its secrets) was left behind"


@ENGINES
def test_a_run_cancelled_or_timed_out_in_its_spark_job_stops_it_and_commits_nothing(
    stack, sandbox_kafka, kafka_faults, kafka_topic, engine: str
) -> None:
    topic = kafka_topic(partitions=2)
    produced = produce_keyed(sandbox_kafka.bootstrap_servers, topic, 40)
    tenant, pipeline = sandbox_pipeline(stack, sandbox_kafka.bootstrap_servers, topic, "faults/cancelled")
    # The timeout counts from launch, so a cold engine's start (tens of seconds on a loaded machine)
    # must fit in it before the job's tasks are there to cancel.
    stack.env |= {"INLET_RUN_ENGINE": engine, "INLET_RUN_TIMEOUT_S": "60", "INLET_RUN_MAX_ATTEMPTS": "1"}
    stack.start_worker()
    kafka_faults.hold_fetches()  # the job's tasks wait on Kafka

    cancelled_id = trigger(stack, tenant, pipeline)
    stack.wait_for(lambda: spark_job_pgids(cancelled_id), timeout_s=120, every_s=0.1, what="the Spark job to start")
    time.sleep(1)
    asked = time.monotonic()
    answer = stack.client.post(f"/runs/{cancelled_id}/cancel", headers=tenant.editor)
    assert answer.status_code in (200, 202), answer.text
    cancelled = wait_for_run(stack, cancelled_id, tenant.viewer)
    stopped_in = time.monotonic() - asked
    assert cancelled["state"] == "cancelled", (cancelled, stack.log_text())
    # The worker hears of the cancel at its next heartbeat (5 s), then the job stops.
    assert stopped_in < 20 and not spark_job_pgids(cancelled_id), stopped_in

    if engine == "warm":
        # The worker passes its timeout and its cancel to either launcher alike; spark-submit's stops
        # its job the same way for both (tests/spark_jobs/test_spec.py), so its variant skips the
        # minute of waiting.
        timed_out = wait_for_run(stack, trigger(stack, tenant, pipeline), tenant.viewer)
        assert timed_out["state"] == "failed" and timed_out["error"]["kind"] == "timeout", timed_out
        assert not spark_job_pgids(timed_out["id"])
    assert committed_offsets(stack.settings.resolved_database_url, pipeline["id"]) == {}

    kafka_faults.reset()
    run = wait_for_run(stack, trigger(stack, tenant, pipeline), tenant.viewer)
    assert run["state"] == "succeeded", (run, stack.log_text())
    assert_exact(stack, pipeline, topic, produced, 2)
    assert _leftovers(stack) == []
