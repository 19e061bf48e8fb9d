"""PostgreSQL restarting while a run executes: heartbeats fail for longer than the lease, then the
run completes (or is taken over and recovered from Delta), with the exact final state.

Runs on a private PostgreSQL cluster of its own (restarting the suite's would break other tests),
started like ``scripts/services.sh`` does; skipped only where PostgreSQL is not installed."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from api.core.migrate import upgrade_to_head
from tests.faults.helpers import assert_exact, runs_of, sandbox_pipeline, trigger
from tests.fixtures.kafka import produce_keyed
from tests.fixtures.stack import _free_port
from tests.runs.helpers import spark_job_pgids, wait_for_run

pytestmark = pytest.mark.slow

DOWN_S = 25  # longer than the stack's 15 s lease


class PrivatePostgres:
    def __init__(self, bindir: str) -> None:
        self.bindir, self.port = bindir, _free_port()
        # Under /tmp, not pytest's root-only tmp_path: the server runs as the postgres user.
        self.dir = Path(tempfile.mkdtemp(prefix="inlet-faults-pg-"))
        self.as_user = ["runuser", "-u", "postgres", "--"] if os.getuid() == 0 else []
        if self.as_user:
            shutil.chown(self.dir, "postgres", "postgres")
        self._run("initdb", "-D", str(self.dir / "data"), "-U", "postgres", "--auth=trust", "-E", "UTF8")

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, tool: str, *args: str) -> None:
        subprocess.run([*self.as_user, f"{self.bindir}/{tool}", *args], check=True, capture_output=True)

    def start(self) -> None:
        self._run("pg_ctl", "-D", str(self.dir / "data"), "-l", str(self.dir / "log"), "-w", "-o",
                  f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.dir} -c fsync=off -c max_connections=100",
                  "start")

    def stop(self, mode: str = "immediate") -> None:
        self._run("pg_ctl", "-D", str(self.dir / "data"), "-m", mode, "-w", "stop")

    def destroy(self) -> None:
        try:
            self.stop()
        except subprocess.CalledProcessError:
            pass
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def private_postgres() -> Iterator[PrivatePostgres]:
    bindirs = sorted(glob.glob("/usr/lib/postgresql/*/bin"))
    if not bindirs:
        pytest.skip("PostgreSQL is not installed (make setup installs it): cannot restart a database server")
    cluster = PrivatePostgres(bindirs[-1])
    cluster.start()
    yield cluster
    cluster.destroy()


@pytest.fixture
def database_url(private_postgres: PrivatePostgres) -> str:
    """This module's database is the private cluster's, whatever the suite runs on."""
    upgrade_to_head(private_postgres.url)
    return private_postgres.url


def test_postgres_restarted_mid_run(stack, private_postgres, sandbox_kafka, kafka_faults, kafka_topic) -> None:
    topic = kafka_topic(partitions=3)
    produced = produce_keyed(sandbox_kafka.bootstrap_servers, topic, 90)
    tenant, pipeline = sandbox_pipeline(stack, sandbox_kafka.bootstrap_servers, topic, "faults/pg-restart")
    stack.start_worker()
    stack.start_scheduler()
    kafka_faults.hold_fetches()  # the run stays in its Spark job meanwhile
    run_id = trigger(stack, tenant, pipeline)
    stack.wait_for(lambda: spark_job_pgids(run_id), timeout_s=120, every_s=0.1, what="the Spark job to start")

    private_postgres.stop("immediate")  # a crash: every connection of every process is cut
    time.sleep(DOWN_S)
    private_postgres.start()
    kafka_faults.reset()

    run = wait_for_run(stack, run_id, tenant.viewer, timeout_s=300)
    assert run["state"] == "succeeded", (run, stack.log_text())
    assert [r["id"] for r in runs_of(stack, tenant, pipeline)] == [run_id]
    assert sum(p["end"] - p["start"] for p in run["partitions"]) == 90
    assert_exact(stack, pipeline, topic, produced, 3)
    assert "heartbeat of run" in Path(stack.logs["worker"]).read_text(), "the heartbeats did fail meanwhile"
