"""Python workers forked from Inlet's daemon (``spark_jobs/python_daemon.py``): a task finds what it
imports already imported, and frozen out of its garbage collection. Local masters only: a cluster's
executors get ``spark_jobs`` from ``--py-files`` after their daemon has started. An engine's memory
bound counts the daemon and its workers, which leave the engine's process group."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from spark_jobs.python_daemon import TASK_MODULES
from tests.fixtures.local_spark import local_spark
from worker.launch.processes import tree_memory_bytes
from worker.launch.submit import SparkSubmitSettings, imports_daemon, spark_command


def _conf(master: str) -> dict[str, str]:
    command = spark_command(SparkSubmitSettings(master=master), "inlet-test", Path("code.zip"), "engine.py")
    return dict(command[i + 1].split("=", 1) for i, arg in enumerate(command) if arg == "--conf")


def test_local_masters_fork_python_workers_from_inlet_s_daemon_and_clusters_from_spark_s() -> None:
    assert _conf("local[2]")["spark.python.daemon.module"] == "spark_jobs.python_daemon"
    assert "spark.python.daemon.module" not in _conf("spark://127.0.0.1:7077")


def test_an_interpreter_without_spark_jobs_keeps_spark_s_daemon(tmp_path: Path) -> None:
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=120)
    python = str(bare / "bin" / "python")
    assert not imports_daemon(python)
    command = spark_command(SparkSubmitSettings(master="local[2]", python=python), "inlet-test", Path("code.zip"), "engine.py")
    assert not any(arg.startswith("spark.python.daemon.module=") for arg in command)
    assert imports_daemon(sys.executable)


def _at_task_start(_: int) -> tuple[int, list[str]]:
    import gc
    import sys

    return gc.get_freeze_count(), [name for name in TASK_MODULES if name not in sys.modules]


def test_a_task_finds_what_it_imports_already_imported_and_frozen() -> None:
    spark = local_spark()  # a local master: started with Inlet's daemon, as the worker starts its engines
    assert spark.sparkContext.getConf().get("spark.python.daemon.module") == "spark_jobs.python_daemon"
    for frozen, missing in spark.sparkContext.parallelize(range(4), 4).map(_at_task_start).collect():
        assert missing == []
        assert frozen > 50_000  # the objects the preloaded modules made (about 110,000)


_PARENT = """
import os, subprocess, sys
child = subprocess.Popen([sys.executable, "-c", sys.argv[1]], stdout=subprocess.PIPE)
assert child.stdout.readline() == b"ready\\n"
print(child.pid, flush=True)
child.wait()
"""
# As Spark's Python daemon does: a process group of its own, then memory it holds.
_CHILD = "import os, time; os.setpgid(0, 0); held = b'x' * (200 * 2**20); print('ready', flush=True); time.sleep(120)"


def test_an_engine_s_memory_counts_the_python_daemon_that_left_its_process_group() -> None:
    parent = subprocess.Popen([sys.executable, "-c", _PARENT, _CHILD], stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert os.getpgid(child) == child != parent.pid
        assert tree_memory_bytes(parent.pid) > 200 * 2**20  # the child's 200 MiB, and the interpreters
    finally:
        os.killpg(parent.pid, signal.SIGKILL)
        os.kill(child, signal.SIGKILL)
        parent.wait(10)
