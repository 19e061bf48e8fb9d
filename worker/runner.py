"""Executing one run end to end: claim, plan, launch ``spark-submit``, commit or fail.

Safe to run twice for the same run id: only one worker can claim a run, and a run whose data is
already in Delta (its transaction version is there) gets its offsets committed instead of being
written again. Everything here is reached from thin Celery tasks in ``worker.tasks``.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import threading
import uuid
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Engine
from sqlmodel import Session, select

from api.connections.models import Connection
from api.connections.service import CredentialsMissing, client_config
from api.core.config import Settings
from api.core.db import unit_of_work
from api.kafka.client import KafkaClient
from api.kafka.errors import KafkaClientError, KafkaTimeout, KafkaUnavailable
from api.offsets import group_mirror
from api.pipelines.models import Pipeline
from api.pipelines.service import target_uri
from api.runs import lifecycle
from api.runs.models import Run
from api.runs.planning import Plan, plan_pipeline
from api.secrets.store import SecretBackendRefused, SecretBackendUnavailable, SecretStore
from spark_jobs.spec import RunResult
from worker.delta_state import committed_txn_version
from worker.launcher import SparkSubmitSettings, launch
from worker.specs import build_spec

log = logging.getLogger(__name__)

# Failures worth the same plan again after a pause; anything else fails the run for good.
TRANSIENT_KINDS = frozenset({"kafka_unavailable", "crashed", "secret_backend_unavailable", "timeout_lookup"})


@dataclass(frozen=True)
class Outcome:
    state: str
    run_id: uuid.UUID | None = None
    retry_in_s: float | None = None
    mirror_group_of: uuid.UUID | None = None  # a pipeline whose consumer group should get the new offsets


def spark_settings(settings: Settings) -> SparkSubmitSettings:
    defaults = SparkSubmitSettings()
    return SparkSubmitSettings(
        spark_submit=settings.spark_submit or defaults.spark_submit, master=settings.spark_master,
        conf=dict(settings.spark_conf), packages=list(settings.spark_packages), jars=list(settings.spark_jars),
        driver_memory=settings.spark_driver_memory, executor_memory=settings.spark_executor_memory,
    )


def _error_of(exc: Exception) -> dict[str, Any]:
    if isinstance(exc, (KafkaUnavailable, KafkaTimeout)):
        return {"kind": "kafka_unavailable", "message": str(exc)}
    if isinstance(exc, KafkaClientError):
        return {"kind": f"kafka_{exc.kind}", "message": str(exc)}
    if isinstance(exc, SecretBackendUnavailable):
        return {"kind": "secret_backend_unavailable", "message": exc.detail}
    if isinstance(exc, SecretBackendRefused):  # an operator must act: retrying cannot help
        return {"kind": "secret_backend_refused", "message": exc.detail}
    if isinstance(exc, CredentialsMissing):
        return {"kind": "credentials_missing", "message": exc.detail}
    return {"kind": "internal", "message": type(exc).__name__}


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
    def __init__(self, settings: Settings, engine: Engine, secrets: SecretStore) -> None:
        self.settings = settings
        self.engine = engine
        self.secrets = secrets
        self.worker = f"{socket.gethostname()}:{os.getpid()}"

    # Entry points.

    def execute(self, run_id: uuid.UUID) -> Outcome:
        with unit_of_work(self.engine) as session:
            run = lifecycle.claim(session, run_id, worker=self.worker, lease_s=self.settings.run_lease_s)
            if run is None:
                return Outcome("not-claimable", run_id)
            needs_plan = run.plan is None
        if needs_plan:
            planned = self._plan(run_id)
            if planned is not None:
                return planned
        if (recovered := self._already_in_delta(run_id)) is not None:
            return recovered
        return self._launch(run_id)

    def fire_schedule(self, pipeline_id: uuid.UUID, slot: datetime) -> Outcome:
        """A schedule slot: plan first, and create a run only when there is something to read."""
        with unit_of_work(self.engine) as session:
            pipeline = session.exec(select(Pipeline).where(Pipeline.id == pipeline_id).with_for_update()).first()
            if pipeline is None or pipeline.state != "active":
                return Outcome("paused")
            if session.exec(select(Run.id).where(Run.pipeline_id == pipeline_id, Run.state.in_(("queued", "running")))).first():  # type: ignore[attr-defined]
                return Outcome("busy")
            try:
                plan = self._make_plan(session, pipeline)
            except Exception as exc:  # the next slot tries again; a scheduled probe failing is not a run
                log.warning("schedule of pipeline %s: planning failed: %s", pipeline_id, _error_of(exc)["message"])
                return Outcome("plan-failed")
            if plan.total == 0:
                lifecycle.initialize_positions(session, pipeline, plan)
                return Outcome("nothing-new")
            run = lifecycle.create_run(session, pipeline, trigger="schedule", scheduled_for=slot)
            self._store_plan(session, run, pipeline, plan)
            run_id = run.id
        return self.execute(run_id)

    def mirror_group(self, pipeline_id: uuid.UUID) -> str:
        """Copy the committed offsets to the pipeline's consumer group: ``ok``, ``failed`` or ``off``."""
        with unit_of_work(self.engine) as session:
            return group_mirror.mirror_committed_offsets(session=session, secrets=self.secrets, pipeline_id=pipeline_id,
                                                         timeout_s=self.settings.kafka_timeout_s)

    def delete_group(self, connection_id: uuid.UUID, group: str) -> bool:
        with unit_of_work(self.engine) as session:
            return group_mirror.delete_mirrored_group(session=session, secrets=self.secrets, connection_id=connection_id,
                                                      group=group, timeout_s=self.settings.kafka_timeout_s)

    # Steps.

    def _client(self, session: Session, pipeline: Pipeline) -> KafkaClient:
        conn = session.get(Connection, pipeline.connection_id)
        assert conn is not None
        return KafkaClient(client_config(conn, self.secrets), timeout_s=self.settings.kafka_timeout_s)

    def _make_plan(self, session: Session, pipeline: Pipeline) -> Plan:
        with self._client(session, pipeline) as client:
            return plan_pipeline(session, pipeline, client)

    def _store_plan(self, session: Session, run: Run, pipeline: Pipeline, plan: Plan) -> None:
        """The plan, with the credentials versions and replace ranges a retry must reuse."""
        source = session.get(Connection, pipeline.connection_id)
        target = session.get(Connection, pipeline.target_connection_id) if pipeline.target_connection_id else None
        lifecycle.store_plan(
            session, run, plan, source_version=source.credentials_version if source else None,
            target_version=target.credentials_version if target else None,
            replace_ranges=lifecycle.replace_ranges_for(session, pipeline, plan),
        )

    def _plan(self, run_id: uuid.UUID) -> Outcome | None:
        """Plan a run that has none yet; an Outcome if it ends here (skipped, failed, retried)."""
        with unit_of_work(self.engine) as session:
            run, pipeline = _load(session, run_id)
            try:
                plan = self._make_plan(session, pipeline)
            except Exception as exc:  # every planning failure is recorded on the run
                return self._failed(session, run, _error_of(exc))
            if plan.total == 0:
                lifecycle.skip(session, run, plan, "no new records in any partition")
                return Outcome("skipped", run_id)
            self._store_plan(session, run, pipeline, plan)
        return None

    def _already_in_delta(self, run_id: uuid.UUID) -> Outcome | None:
        """After a crash between the Delta commit and the offsets commit: commit the offsets only."""
        with unit_of_work(self.engine) as session:
            run = session.get(Run, run_id)
            pipeline = session.get(Pipeline, run.pipeline_id) if run else None
            if run is None or pipeline is None or pipeline.target["type"] != "delta":
                return None
            uri = target_uri(pipeline, self.settings.resolved_storage_root)
            version = committed_txn_version(uri, pipeline.id) if uri else None
            if version is None or version < run.seq:
                return None
            lifecycle.commit_succeeded(session, run, summary={"result": {"already_committed": True, "recovered": True}})
            log.info("run %s was already committed to Delta (version %s); offsets committed", run_id, version)
        self._remove_workdir(run_id)  # a killed worker's attempt left its spec (with secrets) behind
        return Outcome(run.state, run_id, mirror_group_of=_mirrored(pipeline))

    def _workdir(self, run_id: uuid.UUID) -> Path:
        return self.settings.resolved_work_dir / str(run_id)

    def _remove_workdir(self, run_id: uuid.UUID) -> None:
        shutil.rmtree(self._workdir(run_id), ignore_errors=True)

    def _ensure_kafka_target(self, session: Session, pipeline: Pipeline) -> None:
        """A Kafka target's topic exists before anything is read, or is created if the pipeline asks.

        Only a definite answer stops the run here (the topic is missing, or creating it was refused):
        a cluster that cannot be asked now fails the job the same way, with the job's own diagnosis."""
        if pipeline.target["type"] != "kafka":
            return
        conn = session.get(Connection, pipeline.target_connection_id)
        assert conn is not None
        try:
            with KafkaClient(client_config(conn, self.secrets), timeout_s=self.settings.kafka_timeout_s) as client:
                client.ensure_topic(pipeline.target["topic"], pipeline.target.get("create_topic"))
        except KafkaClientError as exc:
            if exc.kind in ("target_missing", "target_refused"):
                raise
            log.info("target topic of pipeline %s not checked (%s); the job will say", pipeline.id, exc.kind)

    def _launch(self, run_id: uuid.UUID) -> Outcome:
        with unit_of_work(self.engine) as session:
            run, pipeline = _load(session, run_id)
            try:
                self._ensure_kafka_target(session, pipeline)
                spec = build_spec(session, run, pipeline, settings=self.settings, secrets=self.secrets)
            except Exception as exc:  # e.g. the secret backend is down: retried like any transient failure
                return self._failed(session, run, _error_of(exc))

        cancel = threading.Event()
        sink = LogSink()
        stop = threading.Event()
        beat = threading.Thread(target=self._heartbeat, args=(run_id, sink, cancel, stop), daemon=True,
                                name=f"heartbeat-{run_id}")
        beat.start()
        try:
            result = launch(spec, workdir=self._workdir(run_id), settings=spark_settings(self.settings),
                            timeout_s=self.settings.run_timeout_s, on_log_line=sink.add, cancel=cancel)
        finally:
            stop.set()
            beat.join(timeout=30)
            self._remove_workdir(run_id)  # nothing of an attempt outlives it: the next one starts afresh
        with unit_of_work(self.engine) as session:
            if text := sink.drain():
                lifecycle.append_log(session, run_id, text)
        return self._finish(run_id, result)

    def _heartbeat(self, run_id: uuid.UUID, sink: LogSink, cancel: threading.Event, stop: threading.Event) -> None:
        interval = min(self.settings.run_lease_s / 3, 5.0)
        while not stop.wait(interval):
            try:
                with unit_of_work(self.engine) as session:
                    if text := sink.drain():
                        lifecycle.append_log(session, run_id, text)
                    state = lifecycle.heartbeat(session, run_id, worker=self.worker, lease_s=self.settings.run_lease_s)
            except Exception:  # a missed beat is survivable; the lease outlasts several
                log.exception("heartbeat of run %s failed", run_id)
                continue
            if state is None or state:
                cancel.set()  # cancelled, or another worker took the run over: stop the job

    def _finish(self, run_id: uuid.UUID, result: RunResult) -> Outcome:
        if result.status != "succeeded" and (recovered := self._already_in_delta(run_id)) is not None:
            return recovered
        with unit_of_work(self.engine) as session:
            run = session.get(Run, run_id)
            assert run is not None
            if run.state != "running" or run.worker != self.worker:
                return Outcome("lost-lease", run_id)
            if result.status == "succeeded":
                lifecycle.commit_succeeded(session, run, summary=_summary(result))
                return Outcome(run.state, run_id, mirror_group_of=_mirrored(session.get(Pipeline, run.pipeline_id)))
            error = result.error.model_dump() if result.error else {"kind": "internal", "message": "no error given"}
            if error["kind"] == "cancelled":
                lifecycle.finish(session, run, "cancelled", error=error, result=result.model_dump(mode="json"))
                return Outcome("cancelled", run_id)
            return self._failed(session, run, error, result=result.model_dump(mode="json"))

    def _failed(self, session: Session, run: Run, error: dict[str, Any], **values: Any) -> Outcome:
        if error["kind"] in TRANSIENT_KINDS and run.attempt < self.settings.run_max_attempts:
            delay = self.settings.run_retry_backoff_s * 2 ** (run.attempt - 1)
            lifecycle.requeue(session, run, error=error, delay_s=delay)
            return Outcome("queued", run.id, retry_in_s=delay)
        lifecycle.finish(session, run, "failed", error=error, **values)
        return Outcome("failed", run.id)


def _load(session: Session, run_id: uuid.UUID) -> tuple[Run, Pipeline]:
    run = session.get(Run, run_id)
    assert run is not None, f"run {run_id} vanished while claimed"  # runs are deleted only with their pipeline
    pipeline = session.get(Pipeline, run.pipeline_id)
    assert pipeline is not None
    return run, pipeline


def _mirrored(pipeline: Pipeline | None) -> uuid.UUID | None:
    return pipeline.id if pipeline is not None and pipeline.source.get("commit_to_group") else None


def _summary(result: RunResult) -> dict[str, Any]:
    return {
        "result": result.model_dump(mode="json"),
        "rows_written": result.rows_written,
        "rows_quarantined": result.rows_quarantined,
        "records_read": sum(p.records_read for p in result.partitions),
        "bytes_read": result.bytes_read,
        "delta_version": result.delta_version,
        "error": None,
    }
