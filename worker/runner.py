"""The worker's part of a run: the steps in order, each in its own unit of work, and around the
launch (on the warm engine, or by spark-submit) the lease kept alive and the log shipped.

What each step decides (claiming, planning, recovering a run already in Delta, recording the
result, retrying) is the runs domain's (``api.runs.execution``); reached from thin Celery tasks
in ``worker.tasks``.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import threading
import uuid
from datetime import datetime
from pathlib import Path

from sqlalchemy import Engine

from api.core.config import Settings
from api.core.db import unit_of_work
from api.offsets import group_mirror
from api.runs import continuous, execution, lifecycle
from api.runs.execution import Outcome
from api.secrets.store import SecretStore
from spark_jobs.public import RunResult, RunSpec
from worker.launch import EngineLimits, Launcher, SparkSubmitSettings, SubmitLauncher, WarmLauncher

log = logging.getLogger(__name__)


def spark_settings(settings: Settings) -> SparkSubmitSettings:
    defaults = SparkSubmitSettings()
    return SparkSubmitSettings(
        spark_submit=settings.spark_submit or defaults.spark_submit, master=settings.spark_master,
        conf={"spark.sql.execution.arrow.maxBytesPerBatch": str(settings.run_max_batch_bytes), **settings.spark_conf}, driver_memory=settings.spark_driver_memory,
        executor_memory=settings.spark_executor_memory, python=settings.spark_python or defaults.python,
        run_memory_mb=settings.run_memory_mb,
    )


def make_launcher(settings: Settings) -> Launcher:
    """The launcher the settings name (``run_engine``): a warm engine per worker process, or spark-submit per run."""
    if settings.run_engine == "submit":
        return SubmitLauncher(spark_settings(settings))
    limits = EngineLimits(max_runs=settings.engine_max_runs, max_memory_mb=settings.engine_max_memory_mb,
                          idle_s=settings.engine_idle_s)
    return WarmLauncher(spark_settings(settings), limits)


class LogSink:
    """Buffers a run's log lines; the heartbeat flushes them to the database in chunks."""

    def __init__(self) -> None:
        self._lines: list[str] = []
        self._lock = threading.Lock()

    def add(self, line: str) -> None:
        with self._lock:
            self._lines.append(line)

    def drain(self) -> str:
        with self._lock:
            lines, self._lines = self._lines, []
        return "\n".join(lines) + "\n" if lines else ""


class RunExecutor:
    def __init__(self, settings: Settings, db: Engine, secrets: SecretStore) -> None:
        self.settings = settings
        self.db = db
        self.secrets = secrets
        self.services = execution.Services(settings=settings, secrets=secrets)
        self.launcher = make_launcher(settings)
        self.worker = f"{socket.gethostname()}:{os.getpid()}"

    # Entry points.

    def execute(self, token: uuid.UUID) -> Outcome:
        """An ``execute_run`` message: take the run it lets this worker take (the fairest claimable one,
        or the one it names: ``execution.claim_next``), run it to its end, then pass a message on when
        queued runs wait."""
        with unit_of_work(self.db) as session:
            run = execution.claim_next(session=session, token=token, worker=self.worker, services=self.services)
            if run is None:
                return Outcome("not-claimable", token)
            run_id, needs_plan = run.id, run.plan is None
        outcome = self._run(run_id, needs_plan=needs_plan)
        if outcome.verdict != "lost-lease":  # this worker is free again
            self._continue(outcome.verdict, run_id=run_id)
            self._pass_token()
        return outcome

    def _run(self, run_id: uuid.UUID, *, needs_plan: bool) -> Outcome:
        if needs_plan:
            with unit_of_work(self.db) as session:
                ended = execution.plan_claimed_run(session=session, run_id=run_id, services=self.services)
            if ended is not None:
                return ended
        if (recovered := self._recover_committed(run_id)) is not None:
            return recovered
        with unit_of_work(self.db) as session:
            spec = execution.prepare_launch(session=session, run_id=run_id, services=self.services)
        if isinstance(spec, Outcome):
            return spec
        result = self._launch(run_id, spec)
        if result.status != "succeeded" and (recovered := self._recover_committed(run_id)) is not None:
            return recovered
        with unit_of_work(self.db) as session:
            return execution.record_result(session=session, run_id=run_id, worker=self.worker, result=result,
                                           retry=self.services.retry)

    def fire_schedule(self, pipeline_id: uuid.UUID, slot: datetime, *, claim: bool = False) -> Outcome:
        """A schedule slot sent by the scheduler, or with ``claim`` a continuous pipeline's next look
        (``api.runs.continuous``); a slot that makes no run continues a continuous pipeline's chain."""
        with unit_of_work(self.db) as session:
            fired = execution.fire_schedule(session=session, pipeline_id=pipeline_id, slot=slot, services=self.services,
                                            claim=claim)
        if isinstance(fired, Outcome):
            self._continue(fired.verdict, pipeline_id=pipeline_id)
            return fired
        return self.execute(fired)

    def mirror_group(self, pipeline_id: uuid.UUID) -> str:
        """Copy the committed offsets to the pipeline's consumer group: ``ok``, ``failed`` or ``off``."""
        with unit_of_work(self.db) as session:
            return group_mirror.mirror_committed_offsets(session=session, secrets=self.secrets, pipeline_id=pipeline_id,
                                                         timeout_s=self.settings.kafka_timeout_s,
                                                         egress=self.settings.egress_policy)

    def delete_group(self, connection_id: uuid.UUID, group: str) -> bool:
        with unit_of_work(self.db) as session:
            return group_mirror.delete_mirrored_group(session=session, secrets=self.secrets, connection_id=connection_id,
                                                      group=group, timeout_s=self.settings.kafka_timeout_s,
                                                      egress=self.settings.egress_policy)

    def _continue(self, verdict: str, *, run_id: uuid.UUID | None = None, pipeline_id: uuid.UUID | None = None) -> None:
        try:
            with unit_of_work(self.db) as session:
                continuous.continue_after(session, verdict=verdict, run_id=run_id, pipeline_id=pipeline_id)
        except Exception:  # the database is restarting: the scheduler takes the held slot over
            log.exception("could not set a continuous pipeline's next look")

    def _pass_token(self) -> None:
        try:
            with unit_of_work(self.db) as session:
                execution.pass_token(session=session, services=self.services)
        except Exception:  # the database is restarting: the scheduler sends long-queued runs again
            log.exception("could not hand the worker's turn on")

    # The launch.

    def _recover_committed(self, run_id: uuid.UUID) -> Outcome | None:
        with unit_of_work(self.db) as session:
            recovered = execution.recover_committed(session=session, run_id=run_id, settings=self.settings)
        if recovered is not None:
            self._remove_workdir(run_id)  # a killed worker's attempt left its spec (with secrets) behind
        return recovered

    def _workdir(self, run_id: uuid.UUID) -> Path:
        return self.settings.resolved_work_dir / str(run_id)

    def _remove_workdir(self, run_id: uuid.UUID) -> None:
        shutil.rmtree(self._workdir(run_id), ignore_errors=True)

    def _launch(self, run_id: uuid.UUID, spec: RunSpec) -> RunResult:
        cancel = threading.Event()
        sink = LogSink()
        stop = threading.Event()
        beat = threading.Thread(target=self._heartbeat, args=(run_id, sink, cancel, stop), daemon=True,
                                name=f"heartbeat-{run_id}")
        beat.start()
        try:
            return self.launcher.launch(spec, workdir=self._workdir(run_id), timeout_s=self.settings.run_timeout_s,
                                        on_log_line=sink.add, cancel=cancel)
        finally:
            stop.set()
            beat.join(timeout=30)
            self._remove_workdir(run_id)  # nothing of an attempt outlives it: the next one starts afresh
            with unit_of_work(self.db) as session:
                if text := sink.drain():
                    lifecycle.append_log(session, run_id, text)

    def _heartbeat(self, run_id: uuid.UUID, sink: LogSink, cancel: threading.Event, stop: threading.Event) -> None:
        interval = min(self.settings.run_lease_s / 3, 5.0)
        while not stop.wait(interval):
            try:
                with unit_of_work(self.db) as session:
                    if text := sink.drain():
                        lifecycle.append_log(session, run_id, text)
                    state = lifecycle.heartbeat(session, run_id, worker=self.worker, lease_s=self.settings.run_lease_s)
            except Exception:  # a missed beat is survivable; the lease outlasts several
                log.exception("heartbeat of run %s failed", run_id)
                continue
            if state is None or state:
                cancel.set()  # cancelled, or another worker took the run over: stop the job
