"""spark-submit: the command a job is started with (a run's own, or a warm engine's), and
``SubmitLauncher``, a new spark-submit for every run that gives its ``RunResult`` back.

The spec (with the Kafka secrets) reaches a run's job only through a 0600 file in ``workdir`` that is
deleted when the job ends: never through argv, the environment or a log line. A timeout or cancel
stops the job's whole process group (``processes``). Pure Python: the Celery task that calls
``launch`` owns the database and the retries.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import spark_jobs
from spark_jobs.public import JobFailure, RunResult, RunSpec, Timings, jars_conf, redact
from worker.launch.processes import MemoryWatch, Output, kill_group, start_process, terminate_group, write_private

# The job's entry point for one run, in spark_jobs/.
RUN_SCRIPT = "ingest.py"

# The fixed start-up cost of a run matters more than peak throughput for small runs.
LEAN_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.log.level": "WARN",
    "spark.sql.shuffle.partitions": "4",
    "spark.python.worker.reuse": "true",
    "spark.sql.execution.arrow.maxRecordsPerBatch": "20000",
    # And by bytes: a Kafka target's records come back from the JVM in batches of at most this much,
    # as the reader's go into it (spark_jobs.read_budget); the worker sets INLET_RUN_MAX_BATCH_BYTES here.
    "spark.sql.execution.arrow.maxBytesPerBatch": str(64 << 20),
    # Spark's default misses JAAS configs, which carry SASL passwords in the JVM Kafka connector.
    "spark.redaction.regex": r"(?i)secret|password|token|access[.]?key|jaas|credential|ssl\.key",
}

# A local master's Python workers fork from a daemon that has imported what a task imports
# (spark_jobs/python_daemon.py), where the executors' interpreter has spark_jobs installed.
LOCAL_PYTHON_DAEMON = {"spark.python.daemon.module": "spark_jobs.python_daemon"}

# delta-spark rebuilds a table's state in 50 tasks by default: seconds of task overhead on a local master.
LOCAL_DELTA = {"spark.databricks.delta.snapshotPartitions": "2"}

# When tasks write their own files the JVM only schedules them: its JIT work is pure start-up cost.
# Measured here: first job result 26-29 s instead of 45-68 s under load.
SCHEDULING_ONLY_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:CICompilerCount=2"


@dataclass
class SparkSubmitSettings:
    spark_submit: str = field(default_factory=lambda: str(Path(sys.executable).parent / "spark-submit"))
    master: str = "local[*]"
    conf: dict[str, str] = field(default_factory=dict)
    driver_memory: str | None = "1g"
    executor_memory: str | None = None
    # Executors need an interpreter with Inlet's dependencies: pyarrow, confluent-kafka, deltalake, the formats' decoders.
    python: str = sys.executable
    extra_env: dict[str, str] = field(default_factory=dict)
    # What a run's processes (the JVM, the driver's Python and its workers) may hold while it runs.
    run_memory_mb: int | None = None


@dataclass(frozen=True)
class SubmitLauncher:
    """A new spark-submit for every run: nothing of one run's JVM or Python workers is left for the next."""

    settings: SparkSubmitSettings

    def launch(self, spec: RunSpec, *, workdir: Path, timeout_s: float, on_log_line: Callable[[str], None] | None = None,
               cancel: threading.Event | None = None) -> RunResult:
        return launch(spec, workdir=workdir, settings=self.settings, timeout_s=timeout_s, on_log_line=on_log_line,
                      cancel=cancel)

    def close(self) -> None:
        pass


@functools.cache
def imports_daemon(python: str) -> bool:
    """Whether ``python``, started outside any checkout, imports Inlet's Python daemon: an interpreter
    that lacks ``spark_jobs`` (the executors get it from ``--py-files`` only when a task starts) keeps
    Spark's own daemon. Asked once per interpreter (34 ms)."""
    try:
        done = subprocess.run([python, "-c", "import spark_jobs.python_daemon"], cwd="/", capture_output=True,
                              timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):  # no such interpreter, or a hung one: the run says so itself
        return False
    return done.returncode == 0


def spark_command(settings: SparkSubmitSettings, name: str, py_files: Path, script: str, *args: str,
                  conf: dict[str, str] | None = None) -> list[str]:
    """spark-submit of ``spark_jobs/<script>`` with Inlet's conf, then ``conf``, then the settings'."""
    local: dict[str, str] = LOCAL_DELTA if settings.master.startswith("local") else {}
    if settings.master.startswith("local") and imports_daemon(settings.python):
        # The daemon imports spark_jobs before any task puts --py-files on its path: from the same
        # snapshot the driver runs, not from the checkout, which a deploy may have changed since.
        local = {**local, **LOCAL_PYTHON_DAEMON, "spark.executorEnv.PYTHONPATH": str(py_files)}
    merged = {**LEAN_CONF, **local, "spark.pyspark.python": settings.python, **jars_conf(), **(conf or {}), **settings.conf}
    cmd = [settings.spark_submit, "--master", settings.master, "--name", name]
    for key, value in merged.items():
        cmd += ["--conf", f"{key}={value}"]
    if settings.driver_memory:
        cmd += ["--driver-memory", settings.driver_memory]
    if settings.executor_memory:
        cmd += ["--executor-memory", settings.executor_memory]
    return cmd + ["--py-files", str(py_files), str(Path(spark_jobs.__file__).parent / script), *args]


def build_command(settings: SparkSubmitSettings, spec: RunSpec, spec_path: Path, result_path: Path, py_files: Path) -> list[str]:
    jvm = {"spark.driver.extraJavaOptions": SCHEDULING_ONLY_JVM} if spec.writes_directly and settings.master.startswith("local") else {}
    return spark_command(settings, f"inlet-{spec.pipeline_id}-{spec.run_id}", py_files, RUN_SCRIPT,
                         "--spec", str(spec_path), "--result", str(result_path), conf=jvm)


def job_sources() -> list[Path]:
    """Every source file of ``spark_jobs``, its subpackages' included, in a stable order."""
    return sorted(Path(spark_jobs.__file__).parent.rglob("*.py"))


def package_spark_jobs(workdir: Path) -> Path:
    """``spark_jobs`` as a zip for ``--py-files``: executors on a real cluster lack this checkout."""
    target = workdir / "spark_jobs.zip"
    root = Path(spark_jobs.__file__).parent.parent
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in job_sources():
            zf.write(path, path.relative_to(root).as_posix())
    return target


def job_env(settings: SparkSubmitSettings, scratch: Path) -> dict[str, str]:
    """The driver's environment. Its Spark keeps its temporary files (the jars it serves its executors,
    23 MB; its blocks) in ``scratch``, the run's or the engine's folder, which Inlet removes with it: a
    killed JVM (a cancel, a timeout, a hung engine) runs no shutdown hook to remove them from /tmp."""
    # Inlet's own settings (a Vault token, the operator token) are no business of the job's.
    inherited = {k: v for k, v in os.environ.items() if not k.startswith(("INLET_", "VAULT_"))}
    return {**inherited, "PYSPARK_PYTHON": settings.python, "PYSPARK_DRIVER_PYTHON": settings.python,
            "SPARK_LOCAL_DIRS": str(scratch), **settings.extra_env}


def failed(spec: RunSpec, started_at: datetime, kind: str, message: str) -> RunResult:
    """A failed result the job did not write itself (it crashed, or was stopped); the message redacted."""
    error = JobFailure.model_validate({"kind": kind, "message": redact(message, spec.secret_values())})
    return RunResult(run_id=spec.run_id, status="failed", error=error,
                     timings=Timings(started_at=started_at, finished_at=datetime.now(UTC)))


def launch(
    spec: RunSpec,
    *,
    workdir: Path,
    settings: SparkSubmitSettings,
    timeout_s: float,
    on_log_line: Callable[[str], None] | None = None,
    cancel: threading.Event | None = None,
) -> RunResult:
    """Run ``spec`` with spark-submit and return its result (a failed one if the job left none)."""
    started_at = datetime.now(UTC)
    workdir.mkdir(parents=True, exist_ok=True)
    spec_path, result_path = workdir / f"spec-{spec.run_id}.json", workdir / f"result-{spec.run_id}.json"
    result_path.unlink(missing_ok=True)
    write_private(spec_path, spec.to_json())
    try:
        cmd = build_command(settings, spec, spec_path, result_path, package_spark_jobs(workdir))
        process = start_process(cmd, env=job_env(settings, workdir), cwd=workdir)
        output = Output(process, name=f"spark-log-{spec.run_id}", secrets=spec.secret_values(), listener=on_log_line)
        watch = MemoryWatch(process.pid, settings.run_memory_mb << 20 if settings.run_memory_mb else None)
        stopped_by = wait_for_exit(process, deadline=time.monotonic() + timeout_s, cancel=cancel, watch=watch)
        output.join(5)
    finally:
        spec_path.unlink(missing_ok=True)

    result = _read_result(result_path, spec.run_id)
    if result is not None and stopped_by is None:
        return result
    if stopped_by == "timeout":
        return failed(spec, started_at, "timeout", f"spark-submit ran longer than {timeout_s:.0f}s and was killed")
    if stopped_by == "cancelled":
        return failed(spec, started_at, "cancelled", "the run was cancelled and spark-submit was killed")
    if stopped_by == "resource_exhausted":
        return failed(spec, started_at, "resource_exhausted", watch.message(watch.peak_bytes))
    return failed(spec, started_at, "crashed",
                  f"spark-submit exited {process.returncode} without a result: {output.last_lines()}")


def wait_for_exit(process: subprocess.Popen[str], *, deadline: float, cancel: threading.Event | None,
                  watch: MemoryWatch | None = None) -> str | None:
    """Until the job exits; None, or why it was killed (``cancelled``, ``timeout``, ``resource_exhausted``:
    past ``watch``'s bound, killed at once, without a grace period in which to grow)."""
    while process.poll() is None:
        stopped_by = "cancelled" if cancel is not None and cancel.is_set() else None
        if stopped_by is None and time.monotonic() > deadline:
            stopped_by = "timeout"
        if stopped_by is None and watch is not None and watch.exceeded(time.monotonic()) is not None:
            kill_group(process)
            return "resource_exhausted"
        if stopped_by:
            terminate_group(process)
            return stopped_by
        (cancel.wait(0.2) if cancel is not None else time.sleep(0.2))
    return None


def _read_result(path: Path, run_id: str) -> RunResult | None:
    try:
        result = RunResult.from_json(path.read_bytes())
    except (OSError, ValueError):
        return None
    return result if result.run_id == run_id else None
