"""Redis (the Celery broker) crashing mid-run and coming back empty: the running run completes, a run
triggered while Redis was down is sent again by the scheduler, and no run is created or claimed twice.

Uses a private redis-server (not the suite's, which ``make test`` owns) so that it can be killed."""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.faults.helpers import assert_exact, runs_of, sandbox_pipeline, trigger
from tests.fixtures.kafka import produce_keyed
from tests.fixtures.stack import _free_port
from tests.runs.helpers import spark_job_pgids, wait_for_run

pytestmark = pytest.mark.slow


class PrivateRedis:
    def __init__(self, workdir: Path) -> None:
        self.workdir, self.port = workdir, _free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> PrivateRedis:
        # No persistence: a restart loses every queued message, as a crashed cache-only Redis does.
        self.process = subprocess.Popen(["redis-server", "--bind", "127.0.0.1", "--port", str(self.port), "--save", "",
                                         "--appendonly", "no", "--dir", str(self.workdir)], stdout=subprocess.DEVNULL)
        client = redis.Redis(port=self.port)
        for _ in range(100):
            try:
                client.ping()
                return self
            except redis.ConnectionError:
                time.sleep(0.05)
        raise RuntimeError("the private redis-server did not start")

    def crash(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed: run `make setup`")
    (tmp_path / "redis").mkdir()
    server = PrivateRedis(tmp_path / "redis").start()
    yield server
    server.crash()


@pytest.fixture
def redis_url(private_redis: PrivateRedis) -> str:
    """The stack's broker is the private one."""
    return private_redis.url


def test_redis_restarted_mid_run(stack, private_redis, sandbox_kafka, kafka_topic) -> None:
    topics = [kafka_topic(partitions=2), kafka_topic(partitions=2)]
    produced = [produce_keyed(sandbox_kafka.bootstrap_servers, t, 40) for t in topics]
    (tenant_a, running), (tenant_b, lost) = (
        sandbox_pipeline(stack, sandbox_kafka.bootstrap_servers, t, f"faults/redis-{i}") for i, t in enumerate(topics))
    stack.start_worker()
    stack.start_scheduler()
    running_id = trigger(stack, tenant_a, running)
    stack.wait_for(lambda: spark_job_pgids(running_id), timeout_s=120, every_s=0.1, what="spark-submit to start")

    private_redis.crash()
    lost_id = trigger(stack, tenant_b, lost)  # committed; its message cannot reach the broker
    time.sleep(3)
    assert stack.client.get(f"/runs/{lost_id}", headers=tenant_b.viewer).json()["state"] == "queued"
    private_redis.start()  # same port, empty

    first = wait_for_run(stack, running_id, tenant_a.viewer)
    second = wait_for_run(stack, lost_id, tenant_b.viewer)
    assert (first["state"], second["state"]) == ("succeeded", "succeeded"), (first, second, stack.log_text())
    assert (first["attempt"], second["attempt"]) == (1, 1), "each run was claimed once"
    assert [r["id"] for r in runs_of(stack, tenant_a, running)] == [running_id]
    assert [r["id"] for r in runs_of(stack, tenant_b, lost)] == [lost_id]
    assert_exact(stack, running, topics[0], produced[0], 2)
    assert_exact(stack, lost, topics[1], produced[1], 2)
