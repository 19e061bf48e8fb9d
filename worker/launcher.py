"""Running one ``RunSpec`` through ``spark-submit`` and getting its ``RunResult`` back.

The spec (with the Kafka secrets) reaches the job only through a 0600 file in ``workdir`` that is
deleted when the job ends: never through argv, the environment or a log line. spark-submit runs
in its own process group so that a timeout or cancel can stop the JVM and all its Python workers,
and (on Linux) it is killed when the worker that started it dies: a job nobody watches any more
(no cancel, no timeout, no lease) must not go on to write a run that another worker retries.
Pure Python: the Celery task that calls ``launch`` owns the database and the retries.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import zipfile
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Protocol

import spark_jobs
from spark_jobs import jars
from spark_jobs.spec import RunError, RunResult, RunSpec, Timings, redact

# The fixed start-up cost of a run matters more than peak throughput for small runs.
LEAN_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.log.level": "WARN",
    "spark.sql.shuffle.partitions": "4",
    "spark.python.worker.reuse": "true",
    "spark.sql.execution.arrow.maxRecordsPerBatch": "20000",
    # Spark's default misses JAAS configs, which carry SASL passwords in the JVM Kafka connector.
    "spark.redaction.regex": r"(?i)secret|password|token|access[.]?key|jaas|credential|ssl\.key",
}

TERM_GRACE_S = 10.0
# Runs in the child and execs spark-submit in place (so the JVM keeps it): SIGKILL when the worker's
# launching thread ends. A preexec_fn would do the same but is unsafe beside the heartbeat thread.
_DIE_WITH_PARENT = (
    "import ctypes, os, signal, sys\n"
    "ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG\n"
    "if os.getppid() != int(sys.argv[1]): os._exit(70)  # the worker died before prctl\n"
    "os.execvp(sys.argv[2], sys.argv[2:])\n"
)


@dataclass
class SparkSubmitSettings:
    spark_submit: str = field(default_factory=lambda: str(Path(sys.executable).parent / "spark-submit"))
    master: str = "local[*]"
    conf: dict[str, str] = field(default_factory=dict)
    driver_memory: str | None = "1g"
    executor_memory: str | None = None
    # Executors need an interpreter with pyarrow, confluent-kafka and deltalake.
    python: str = sys.executable
    extra_env: dict[str, str] = field(default_factory=dict)


# When tasks write their own files the JVM only schedules them: its JIT work is pure start-up cost.
# Measured here: first job result 26-29 s instead of 45-68 s under load.
SCHEDULING_ONLY_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:CICompilerCount=2"


class Launcher(Protocol):
    """How the worker runs a spec: ``SubmitLauncher`` (spark-submit per run) or
    ``worker.engine.WarmLauncher`` (a resident driver). Both return a result, never raise."""

    def launch(self, spec: RunSpec, *, workdir: Path, timeout_s: float, on_log_line: Callable[[str], None] | None = None,
               cancel: threading.Event | None = None) -> RunResult: ...

    def close(self) -> None: ...


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


def spark_command(settings: SparkSubmitSettings, name: str, py_files: Path, script: str, *args: str,
                  conf: dict[str, str] | None = None) -> list[str]:
    """spark-submit of ``spark_jobs/<script>`` with Inlet's conf, then ``conf``, then the settings'."""
    merged = {**LEAN_CONF, "spark.pyspark.python": settings.python, **jars.spark_conf(), **(conf or {}), **settings.conf}
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
    return spark_command(settings, f"inlet-{spec.pipeline_id}-{spec.run_id}", py_files, "ingest.py",
                         "--spec", str(spec_path), "--result", str(result_path), conf=jvm)


def package_spark_jobs(workdir: Path) -> Path:
    """``spark_jobs`` as a zip for ``--py-files``: executors on a real cluster lack this checkout."""
    target = workdir / "spark_jobs.zip"
    package = Path(spark_jobs.__file__).parent
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(package.glob("*.py")):
            zf.write(path, f"spark_jobs/{path.name}")
    return target


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
    started_at = datetime.now(timezone.utc)
    workdir.mkdir(parents=True, exist_ok=True)
    spec_path, result_path = workdir / f"spec-{spec.run_id}.json", workdir / f"result-{spec.run_id}.json"
    result_path.unlink(missing_ok=True)
    _write_private(spec_path, spec.to_json())
    tail: deque[str] = deque(maxlen=20)
    try:
        cmd = build_command(settings, spec, spec_path, result_path, package_spark_jobs(workdir))
        process = start_process(cmd, env=job_env(settings), cwd=workdir)
        log = threading.Thread(target=_pump_log, args=(process, spec.secret_values(), tail, on_log_line),
                               name=f"spark-log-{spec.run_id}", daemon=True)
        log.start()
        stopped_by = _wait(process, deadline=time.monotonic() + timeout_s, cancel=cancel)
        log.join(timeout=5)
    finally:
        spec_path.unlink(missing_ok=True)

    result = _read_result(result_path, spec.run_id)
    if result is not None and stopped_by is None:
        return result
    if stopped_by == "timeout":
        error = RunError(kind="timeout", message=f"spark-submit ran longer than {timeout_s:.0f}s and was killed")
    elif stopped_by == "cancelled":
        error = RunError(kind="cancelled", message="the run was cancelled and spark-submit was killed")
    else:
        last = " | ".join(line for line in tail if line.strip())[-1500:]
        error = RunError(kind="crashed", message=f"spark-submit exited {process.returncode} without a result: {last}")
    now = datetime.now(timezone.utc)
    return RunResult(run_id=spec.run_id, status="failed", timings=Timings(started_at=started_at, finished_at=now), error=error)


def _write_private(path: Path, text: str) -> None:
    """A file only this user can read: the spec holds the Kafka clients' secrets."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def job_env(settings: SparkSubmitSettings) -> dict[str, str]:
    # Inlet's own settings (a Vault token, the operator token) are no business of the job's.
    inherited = {k: v for k, v in os.environ.items() if not k.startswith(("INLET_", "VAULT_"))}
    return {**inherited, "PYSPARK_PYTHON": settings.python, "PYSPARK_DRIVER_PYTHON": settings.python,
            **settings.extra_env}


def start_process(cmd: list[str], *, env: dict[str, str], cwd: Path) -> subprocess.Popen[str]:
    """spark-submit in a process group of its own (killed as one), dying with this worker on Linux."""
    if sys.platform.startswith("linux"):
        cmd = [sys.executable, "-c", _DIE_WITH_PARENT, str(os.getpid()), *cmd]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            env=env, cwd=cwd, start_new_session=True, text=True, errors="replace")


def _pump_log(process: subprocess.Popen[str], secrets: list[str], tail: deque[str],
              on_log_line: Callable[[str], None] | None) -> None:
    """The job's output, line by line and redacted, to ``on_log_line``; the last lines kept in ``tail``."""
    assert process.stdout is not None  # started with stdout=PIPE
    for line in process.stdout:
        line = redact(line.rstrip("\n"), secrets)
        tail.append(line)
        if on_log_line:
            on_log_line(line)


def _wait(process: subprocess.Popen[str], *, deadline: float, cancel: threading.Event | None) -> str | None:
    """Until the job exits; None, or why it was killed (``cancelled``, ``timeout``)."""
    while process.poll() is None:
        stopped_by = "cancelled" if cancel is not None and cancel.is_set() else None
        if stopped_by is None and time.monotonic() > deadline:
            stopped_by = "timeout"
        if stopped_by:
            _kill_group(process)
            return stopped_by
        (cancel.wait(0.2) if cancel is not None else time.sleep(0.2))
    return None


def _kill_group(process: subprocess.Popen[str]) -> None:
    """SIGTERM the job's process group, then SIGKILL whatever outlives the grace period."""
    for sig, wait_s in ((signal.SIGTERM, TERM_GRACE_S), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(wait_s)
            # The JVM's children (Python workers) may still be in the group.
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue
        return


def _read_result(path: Path, run_id: str) -> RunResult | None:
    try:
        result = RunResult.from_json(path.read_bytes())
    except (OSError, ValueError):
        return None
    return result if result.run_id == run_id else None
