"""Python workers forked from Inlet's daemon (``spark_jobs/python_daemon.py``): a task finds what it
imports already imported, and frozen out of its garbage collection. Local masters only: a cluster's
executors get ``spark_jobs`` from ``--py-files`` after their daemon has started. (An engine's memory
bound and its stop reach the daemon, which leaves the engine's process group: test_processes.py.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from spark_jobs.python_daemon import TASK_MODULES
from tests.fixtures.local_spark import local_spark
from worker.launch.submit import SparkSubmitSettings, imports_daemon, job_env, package_spark_jobs, spark_command


def _conf(master: str) -> dict[str, str]:
    command = spark_command(SparkSubmitSettings(master=master), "inlet-test", Path("code.zip"), "engine.py")
    return dict(command[i + 1].split("=", 1) for i, arg in enumerate(command) if arg == "--conf")


def test_local_masters_fork_python_workers_from_inlet_s_daemon_and_clusters_from_spark_s() -> None:
    assert _conf("local[2]")["spark.python.daemon.module"] == "spark_jobs.python_daemon"
    assert _conf("local[2]")["spark.executorEnv.PYTHONPATH"] == "code.zip"
    assert "spark.python.daemon.module" not in _conf("spark://127.0.0.1:7077")
    assert "spark.executorEnv.PYTHONPATH" not in _conf("spark://127.0.0.1:7077")


_FIRST_TASK = """
import importlib, sys, zipimport
from spark_jobs.python_daemon import preload

preload()
reads = []
read_directory = zipimport._read_directory
zipimport._read_directory = lambda path: reads.append(path) or read_directory(path)
importlib.invalidate_caches()  # as pyspark's worker does at its first task, the job's files added to its path
import pyspark.ml.param  # a module no task module imported: from pyspark.zip, as the worker's path says
print(len(reads), pyspark.ml.param.__file__)
"""


def test_a_new_worker_reads_no_zip_archive_again_before_its_first_task() -> None:
    """pyspark's worker calls ``importlib.invalidate_caches()`` at its first task: on Python 3.11 every
    zip importer cached in the daemon read its archive's directory again (0.24 s of a core)."""
    import pyspark

    archive = next(Path(pyspark.__file__).parent.glob("python/lib/pyspark.zip"))
    done = subprocess.run([sys.executable, "-c", _FIRST_TASK], env={**os.environ, "PYTHONPATH": str(archive)},
                          capture_output=True, text=True, timeout=120, check=True, cwd="/")
    reads, module = done.stdout.split()
    assert module.startswith(f"{archive}/")
    assert reads == "0", done.stdout


_SUBMITTED = """
import sys
from pyspark import SparkContext

def modules(_):
    import spark_jobs.kafka_source, spark_jobs.spec  # preloaded by the daemon, and imported now
    return [spark_jobs.kafka_source.__file__, spark_jobs.spec.__file__]

context = SparkContext.getOrCreate()
print("task modules:", *context.parallelize([0], 1).map(modules).collect()[0])
context.stop()
"""


def test_the_daemon_and_its_tasks_run_the_snapshot_the_driver_was_given_not_the_checkout(tmp_path: Path) -> None:
    zipped = package_spark_jobs(tmp_path)  # as a launch snapshots the code it runs
    script = tmp_path / "submitted.py"
    script.write_text(_SUBMITTED)
    settings = SparkSubmitSettings(master="local[1]")
    command = spark_command(settings, "inlet-test", zipped, str(script))  # an absolute script stays itself
    done = subprocess.run(command, env=job_env(settings, tmp_path), cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          check=False)  # as launches run: in a folder of their own

    line = next((line for line in done.stdout.splitlines() if line.startswith("task modules:")), None)
    assert line is not None, done.stdout[-2000:] + done.stderr[-3000:]
    assert all(path.startswith(f"{zipped}/spark_jobs/") for path in line.split()[2:]), line


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
