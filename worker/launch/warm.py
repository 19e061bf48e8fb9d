"""Runs on a warm engine: the worker's side of ``spark_jobs/engine.py``.

Each worker process keeps at most one engine, a resident Spark driver started (by spark-submit, with
the settings a per-run launch uses) on its first run and kept for the next ones. The engine is
replaced when it dies or hangs, and recycled after ``max_runs`` runs or once its processes hold more
than ``max_memory_mb``, when the ``spark_jobs`` code on disk is no longer the code it runs, and after
``idle_s`` without a run (which also gives a cluster its executors back).

A recycled engine hands over without a pause: its replacement starts beside it (a standby, 7-11 s on
2 cores) while it serves on, and takes over between two runs once ready. A continuous pipeline's
runs would otherwise wait for a whole engine start every ``max_runs`` runs.

What a run keeps from spark-submit per run (``worker.launch.submit``), guarantee by guarantee:
- The spec and its secrets reach the engine over a Unix socket in a 0700 folder, and live only in
  its memory (and in the 0600 plan files of the run's scratch folder, as with spark-submit).
- Cancel and timeout cancel the run's Spark jobs and stop it before its commit; an engine that has
  not answered within the grace period is killed with its process group.
- An engine that exits mid-run, or answers no ping for ``hung_after_s``, fails the run as ``crashed``
  (retried by the usual rules) and is killed; the next run starts a new engine. Before each run the
  engine is pinged, so a hung idle engine is replaced rather than given the run.
- A worker that dies takes its engine with it: the engine exits when its socket closes, and its JVM
  gets SIGKILL from the kernel (PR_SET_PDEATHSIG) when the thread that started it ends. So engines
  are started from one thread that lives as long as the worker process.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
import socket
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import spark_jobs
from spark_jobs.public import RunResult, RunSpec, end_of_output
from worker.launch.engine_process import EngineGone, EngineProcess
from worker.launch.processes import (
    TERM_GRACE_S,
    MemoryWatch,
    private_folder,
    start_process,
    sweep_folders,
)
from worker.launch.submit import (
    SparkSubmitSettings,
    failed,
    job_env,
    job_sources,
    package_spark_jobs,
    spark_command,
)

log = logging.getLogger(__name__)

# The engine's entry point, in spark_jobs/.
ENGINE_SCRIPT = "engine.py"

# On a cluster an idle engine gives its executors back (and asks again at its next run's first job)
# rather than hold cores other applications could use. The settings' spark_conf overrides any of it,
# e.g. spark.dynamicAllocation.minExecutors to keep some warm.
RELEASE_IDLE_EXECUTORS = {
    "spark.dynamicAllocation.enabled": "true",
    "spark.dynamicAllocation.shuffleTracking.enabled": "true",
    "spark.dynamicAllocation.executorIdleTimeout": "60s",
}


@dataclass(frozen=True)
class EngineLimits:
    """When an engine is replaced: recycled between runs, or given up on as hung."""

    max_runs: int = 500
    max_memory_mb: int = 2048
    idle_s: float = 600.0
    # An engine that answers no ping for this long is hung (a stopped JVM or driver, a deadlock): it is
    # killed, and its run fails as crashed.
    hung_after_s: float = 30.0


_PING_EVERY_S = 5.0
# How long the worker waits, after a run's result, for the run's last log lines (they come through the
# JVM's stdout, the result through the socket); a few milliseconds as a rule.
_OUTPUT_LAG_S = 5.0
_FOLDER_PREFIX = "inlet-engine-"
_STANDBY_START_S = 300.0  # how long a replacement may take to start before it is given up


def code_digest() -> str:
    """A digest of the ``spark_jobs`` sources on disk: an engine runs the code it started with."""
    digest = hashlib.sha256()
    package = Path(spark_jobs.__file__).parent
    for path in job_sources():
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


class WarmLauncher:
    """``launch`` for the worker: each run on this process's warm engine, one run at a time."""

    def __init__(self, settings: SparkSubmitSettings, limits: EngineLimits = EngineLimits()) -> None:
        self.settings = settings
        self.limits = limits
        self._engine: EngineProcess | None = None
        self._lock = threading.Lock()
        self._last_used = time.monotonic()
        # PR_SET_PDEATHSIG fires when the *thread* that started a process ends: engines are started
        # from this one, which lives as long as the process, not from a run's thread.
        self._spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="engine-spawner")
        self._standby: Future[EngineProcess] | None = None  # the recycled engine's replacement, starting
        self._standby_starter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="engine-standby")
        self._idle_timer: threading.Timer | None = None

    def launch(
        self,
        spec: RunSpec,
        *,
        workdir: Path,
        timeout_s: float,
        on_log_line: Callable[[str], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> RunResult:
        """Run ``spec`` on the warm engine (started if there is none) and return its result."""
        started_at = datetime.now(UTC)
        deadline = time.monotonic() + timeout_s
        with self._lock:
            try:
                engine = self._ready_engine(deadline)
            except EngineGone as exc:
                return failed(spec, started_at, "crashed", str(exc))
            launch_id = uuid.uuid4().hex
            engine.output.listen(on_log_line, spec.secret_values(), until=end_of_output(launch_id))
            try:
                return self._run(engine, spec, launch_id, started_at, deadline, timeout_s, cancel)
            finally:
                engine.output.stop_listening(wait_s=_OUTPUT_LAG_S if engine.alive() else 0.0)
                engine.runs += 1
                self._last_used = time.monotonic()
                self._recycle_if_due()
                self._arm_idle_timer()

    @property
    def engine_pid(self) -> int | None:
        """The process id of the engine's spark-submit (its process group's), while there is one."""
        engine = self._engine
        return engine.process.pid if engine is not None and engine.alive() else None

    def engine_memory_bytes(self) -> int | None:
        """What the engine's processes hold now, while there is an engine."""
        engine = self._engine
        return engine.memory_bytes() if engine is not None and engine.alive() else None

    def replacement_started(self, timeout_s: float) -> bool:
        """Whether a recycled engine's replacement has started (waited for up to ``timeout_s``); it takes
        over before the next run."""
        standby = self._standby
        if standby is None:
            return False
        try:
            standby.result(timeout=timeout_s)
        except (EngineGone, FutureTimeout):
            return False
        return True

    def close(self) -> None:
        if self._idle_timer is not None:
            self._idle_timer.cancel()
        with self._lock:
            self._discard(graceful=True)
            self._drop_standby()
        self._standby_starter.shutdown(wait=False)
        self._spawner.shutdown(wait=False)

    # One run.

    def _run(self, engine: EngineProcess, spec: RunSpec, launch_id: str, started_at: datetime, deadline: float,
             timeout_s: float, cancel: threading.Event | None) -> RunResult:
        stopped_by: str | None = None
        result: RunResult | None = None
        grace_until = 0.0
        memory = self.settings.run_memory_mb
        watch = MemoryWatch(engine.process.pid, memory << 20 if memory else None)
        try:
            engine.send({"op": "run", "spec": spec.to_json(), "launch": launch_id})
            answered = pinged = time.monotonic()
            while True:
                message = engine.receive(0.2)
                now = time.monotonic()
                if message is not None:
                    answered = now
                    if message.get("event") == "result":
                        result = _parsed_result(message.get("result"))
                        break
                if (held := watch.exceeded(now)) is not None:
                    # Killed at once: a cancel's grace period would let it grow on. The next run gets a new engine.
                    log.warning("run %s: %s", spec.run_id, watch.message(held))
                    self._discard(graceful=False)
                    return failed(spec, started_at, "resource_exhausted", watch.message(held))
                if now - answered > self.limits.hung_after_s:
                    self._discard(graceful=False)
                    return failed(spec, started_at, "crashed", f"the warm engine answered nothing for "
                                   f"{self.limits.hung_after_s:.0f}s (hung) and was killed: {engine.last_lines()}")
                if now - pinged > _PING_EVERY_S:
                    engine.send({"op": "ping"})
                    pinged = now
                if stopped_by is None:
                    stopped_by = "cancelled" if cancel is not None and cancel.is_set() else None
                    if stopped_by is None and now > deadline:
                        stopped_by = "timeout"
                    if stopped_by is not None:
                        engine.send({"op": "cancel"})
                        grace_until = now + TERM_GRACE_S
                elif now > grace_until:
                    log.warning("the warm engine did not stop run %s within %.0fs: killing it", spec.run_id, TERM_GRACE_S)
                    self._discard(graceful=False)
                    break
        except EngineGone as exc:
            self._discard(graceful=False)
            if stopped_by is None:
                return failed(spec, started_at, "crashed",
                               f"{exc} (exit {engine.process.returncode}) without a result: {engine.last_lines()}")
        if stopped_by == "timeout":
            return failed(spec, started_at, "timeout", f"the run took longer than {timeout_s:.0f}s and was stopped")
        if stopped_by == "cancelled":
            return failed(spec, started_at, "cancelled", "the run was cancelled and its Spark jobs were stopped")
        if result is None or result.run_id != spec.run_id:
            self._discard(graceful=False)
            return failed(spec, started_at, "crashed", "the warm engine answered with no result of this run")
        return result

    # The engine's life.

    def _ready_engine(self, deadline: float) -> EngineProcess:
        engine = self._engine
        if engine is not None and not engine.responsive(self.limits.hung_after_s):
            log.warning("the warm engine %d is gone or hung: replacing it", engine.process.pid)
            self._discard(graceful=False)
        elif engine is not None and engine.digest != code_digest():
            log.info("spark_jobs changed on disk: replacing the warm engine")
            self._discard(graceful=True)
        self._take_standby(deadline)
        if self._engine is None:
            self._engine = self._start_engine(deadline)
        return self._engine

    def _take_standby(self, deadline: float) -> None:
        """The replacement takes over once it is ready (waited for only when there is no engine now);
        one that failed to start, or runs older code, is dropped: the current engine serves on."""
        standby = self._standby
        if standby is None or (not standby.done() and self._engine is not None):
            return
        self._standby = None
        try:
            fresh = standby.result(timeout=max(deadline - time.monotonic(), 0.0))
        except (EngineGone, FutureTimeout) as exc:
            log.warning("the warm engine's replacement did not start (%s): the current one serves on", exc)
            standby.add_done_callback(_stop_started)
            return
        if fresh.digest != code_digest():
            fresh.stop()
            return
        log.info("warm engine %d takes over", fresh.process.pid)
        self._discard(graceful=True)
        self._engine = fresh

    def _drop_standby(self) -> None:
        standby, self._standby = self._standby, None
        if standby is not None and not standby.cancel():
            standby.add_done_callback(_stop_started)

    def _start_engine(self, deadline: float) -> EngineProcess:
        sweep_engine_folders()
        folder = private_folder(_FOLDER_PREFIX)  # 0700, and its path short enough for a socket's
        path = folder / "engine.sock"
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        engine: EngineProcess | None = None
        try:
            listener.bind(str(path))
            listener.listen(1)
            digest = code_digest()
            conf = {} if self.settings.master.startswith("local") else RELEASE_IDLE_EXECUTORS
            cmd = spark_command(self.settings, "inlet-engine", package_spark_jobs(folder), ENGINE_SCRIPT,
                                "--socket", str(path), conf=conf)
            process = self._spawner.submit(start_process, cmd, env=job_env(self.settings, folder), cwd=folder).result()
            engine = EngineProcess(process, folder, digest)
            engine.connect(listener, deadline)
            log.info("warm engine %d ready", engine.process.pid)
            return engine
        except (EngineGone, TimeoutError, OSError) as exc:
            if engine is None:
                shutil.rmtree(folder, ignore_errors=True)
                raise EngineGone(f"the warm engine could not start: {exc}") from exc
            engine.kill()
            raise EngineGone(f"{exc}: {engine.last_lines()}") from exc
        finally:
            listener.close()
            path.unlink(missing_ok=True)  # connected (or given up): nobody else may connect

    def _discard(self, *, graceful: bool) -> None:
        engine, self._engine = self._engine, None
        if engine is not None:
            engine.stop() if graceful else engine.kill()

    def _recycle_if_due(self) -> None:
        engine = self._engine
        if engine is None:
            return
        if engine.runs >= self.limits.max_runs:
            why = f"{engine.runs} runs"
        elif (held := engine.memory_bytes()) > self.limits.max_memory_mb * 2**20:
            why = f"{held / 2**20:.0f} MiB held"
        else:
            return
        if self._standby is None:
            log.info("recycling the warm engine after %s: its replacement starts beside it", why)
            self._standby = self._standby_starter.submit(self._start_engine, time.monotonic() + _STANDBY_START_S)

    def _arm_idle_timer(self) -> None:
        if self._idle_timer is not None:
            self._idle_timer.cancel()
        self._idle_timer = threading.Timer(self.limits.idle_s, self._stop_if_idle)
        self._idle_timer.daemon = True
        self._idle_timer.start()

    def _stop_if_idle(self) -> None:
        if not self._lock.acquire(blocking=False):
            return  # a run is in progress: its end arms the timer again
        try:
            if time.monotonic() - self._last_used >= self.limits.idle_s and self._engine is not None:
                log.info("stopping the warm engine after %.0fs without a run", self.limits.idle_s)
                self._discard(graceful=True)
                self._drop_standby()
        finally:
            self._lock.release()


def sweep_engine_folders() -> None:
    """Remove the folders (the job's code) of engines whose worker process is gone: a worker killed
    with its engine had no chance to."""
    sweep_folders(_FOLDER_PREFIX)


def _stop_started(started: Future[EngineProcess]) -> None:
    """A standby no longer wanted: stopped once it has started (nothing to do if it could not)."""
    if not started.cancelled() and started.exception() is None:
        started.result().stop()


def _parsed_result(raw: object) -> RunResult | None:
    try:
        return RunResult.from_json(raw) if isinstance(raw, (str, bytes)) else None
    except ValueError:
        return None
