"""Python workers forked from Inlet's daemon (``spark_jobs/python_daemon.py``): a task finds what it
imports already imported, and frozen out of its garbage collection. Local masters only: a cluster's
executors get ``spark_jobs`` from ``--py-files`` after their daemon has started."""

from __future__ import annotations

from pathlib import Path

from spark_jobs.python_daemon import TASK_MODULES
from tests.fixtures.local_spark import local_spark
from worker.launch.submit import SparkSubmitSettings, spark_command


def _conf(master: str) -> dict[str, str]:
    command = spark_command(SparkSubmitSettings(master=master), "inlet-test", Path("code.zip"), "engine.py")
    return dict(command[i + 1].split("=", 1) for i, arg in enumerate(command) if arg == "--conf")


def test_local_masters_fork_python_workers_from_inlet_s_daemon_and_clusters_from_spark_s() -> None:
    assert _conf("local[2]")["spark.python.daemon.module"] == "spark_jobs.python_daemon"
    assert "spark.python.daemon.module" not in _conf("spark://127.0.0.1:7077")


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
