"""Executing a run, step by step, as the worker calls it: claim, plan, recover, prepare the job's
spec, record its result; and firing a schedule slot.

Every step takes the caller's session (the worker opens one unit of work per step) and is safe to
run twice: only one worker can claim a run, and a run whose data already reached Delta (its
transaction version is there) gets its offsets committed instead of being written again. A step
that ends the run (or the slot) says so with an ``Outcome``: a ``Verdict`` and what the worker must
do next; a failure is a ``RunFailure`` (``api.runs.retry``). The worker itself only launches the
job and keeps the lease alive (``worker.runner``).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from sqlmodel import Session, select

from api.connections.client_configs import kafka_client
from api.core.config import Settings
from api.core.db import utcnow
from api.core.enqueue import enqueue_run
from api.kafka.errors import KafkaClientError
from api.pipelines.definition import definition_of
from api.pipelines.models import Pipeline
from api.pipelines.schedules import ContinuousSchedule
from api.pipelines.scheduling import claim_slot
from api.pipelines.service import target_uri
from api.runs import fairness, lifecycle, repository
from api.runs.delta_state import committed_txn_version
from api.runs.job_spec import build_spec
from api.runs.models import Run
from api.runs.planning import Plan, plan_next_run
from api.runs.quotas import check_run_rate
from api.runs.retry import RetryPolicy, RunFailure, failure_of
from api.runs.states import RunState, state_of
from api.runs.tenant_errors import for_tenant
from api.secrets.store import SecretStore
from api.tenancy.quotas import QuotaExceeded, QuotaLimits
from spark_jobs.public import RunResult, RunSpec, Store

log = logging.getLogger(__name__)


# What a step or a schedule slot came to: the state a run ended its attempt in (``queued``: to be
# retried), or why nothing ran: the run was not this worker's to take (``not-claimable``) or to finish
# (``lost-lease``); the slot's pipeline was paused, or busy with a run, its plan failed, there was
# nothing new to read, or the tenant was over its runs_per_hour quota; or a continuous pipeline's
# message found its slot moved on (``superseded``: another message, or the scheduler, has it).
Verdict = RunState | Literal["not-claimable", "lost-lease", "paused", "busy", "plan-failed", "nothing-new",
                             "over-quota", "superseded"]


@dataclass(frozen=True)
class Outcome:
    """Where a step left the run (or the schedule slot), and what the worker should do next."""

    verdict: Verdict
    run_id: uuid.UUID | None = None
    retry_in_s: float | None = None  # send the run again after this long
    mirror_group_of: uuid.UUID | None = None  # a pipeline whose consumer group should get the new offsets


@dataclass(frozen=True)
class Services:
    """What the steps reach beyond the database."""

    settings: Settings
    secrets: SecretStore

    @property
    def retry(self) -> RetryPolicy:
        return RetryPolicy(max_attempts=self.settings.run_max_attempts, backoff_s=self.settings.run_retry_backoff_s)

    def plan_now(self, session: Session, pipeline: Pipeline) -> Plan:
        """The pipeline's next ranges, asked of its source cluster now."""
        with kafka_client(session, pipeline.connection_id, self.secrets, timeout_s=self.settings.kafka_timeout_s,
                          egress=self.settings.egress_policy) as client:
            return plan_next_run(session, pipeline, client)


# Steps.

def claim(*, session: Session, run_id: uuid.UUID, worker: str, lease_s: float) -> Run | None:
    """Take the run for ``worker``; None when it is not claimable now (taken, finished, not due)."""
    return lifecycle.claim(session, run_id, worker=worker, lease_s=lease_s)


def claim_next(*, session: Session, token: uuid.UUID, worker: str, services: Services) -> Run | None:
    """The run a worker's ``execute_run`` message lets it take: the fairest claimable one
    (``api.runs.fairness``), or with ``INLET_RUN_FAIR_DISPATCH=false`` the one the message names.
    None: nothing claimable now (the message is dropped)."""
    settings = services.settings
    if not settings.run_fair_dispatch:
        return lifecycle.claim(session, token, worker=worker, lease_s=settings.run_lease_s)
    return fairness.claim_fairest(session, token=token, worker=worker, lease_s=settings.run_lease_s,
                                  defaults=QuotaLimits.defaults(settings))


def pass_token(*, session: Session, services: Services) -> uuid.UUID | None:
    """A worker's run ended: when queued runs wait, send one ``execute_run`` after the commit so a
    worker takes the fairest of them (whichever the message names). Returns the run it names."""
    if not services.settings.run_fair_dispatch or (waiting := repository.any_due(session)) is None:
        return None
    enqueue_run(session, waiting)
    return waiting


def plan_claimed_run(*, session: Session, run_id: uuid.UUID, services: Services) -> Outcome | None:
    """Plan a claimed run that has no plan yet; an Outcome when the run ends here (nothing to read,
    or planning failed), None when it goes on to its launch."""
    run, pipeline = _load(session, run_id)
    try:
        planned = services.plan_now(session, pipeline)
    except Exception as exc:  # noqa: BLE001 (every planning failure is recorded on the run)
        return _failed(session, run, failure_of(exc), services.retry)
    if planned.total == 0:
        lifecycle.skip(session, run, planned, "no new records in any partition")
        return Outcome("skipped", run_id)
    lifecycle.store_plan(session, run, pipeline, planned)
    return None


def recover_committed(*, session: Session, run_id: uuid.UUID, settings: Settings) -> Outcome | None:
    """After a crash between the Delta commit and the offsets commit: commit the offsets only.
    None when the run's data is not in Delta (it must be written)."""
    run = session.get(Run, run_id)
    pipeline = session.get(Pipeline, run.pipeline_id) if run else None
    if run is None or pipeline is None or run.trigger == "reprocess":  # its job finishes its second commit itself
        return None
    target = definition_of(pipeline).target
    if target.type != "delta":
        return None
    uri = target_uri(pipeline, target, settings.resolved_storage_root)
    version = committed_txn_version(Store(settings.resolved_storage_options), uri, pipeline.id) if uri else None
    if version is None or version < run.seq:
        return None
    lifecycle.commit_succeeded(session, run, summary={"result": {"already_committed": True, "recovered": True}})
    log.info("run %s was already committed to Delta (version %s); offsets committed", run_id, version)
    return Outcome(state_of(run.state), run_id, mirror_group_of=_mirrored(pipeline))


def prepare_launch(*, session: Session, run_id: uuid.UUID, services: Services) -> RunSpec | Outcome:
    """The job's spec, with the credentials of the versions the plan recorded; an Outcome when the
    run cannot be launched (e.g. the secret backend is down: retried like any transient failure)."""
    run, pipeline = _load(session, run_id)
    try:
        _ensure_kafka_target(session, pipeline, services)
        return build_spec(session, run, pipeline, settings=services.settings, secrets=services.secrets)
    except Exception as exc:  # noqa: BLE001 (every failure to build the spec is recorded on the run)
        return _failed(session, run, failure_of(exc), services.retry)


def record_result(*, session: Session, run_id: uuid.UUID, worker: str, result: RunResult,
                  retry: RetryPolicy) -> Outcome:
    """The job's result: offsets committed on success, else the run cancelled, retried or failed.
    ``lost-lease`` when another worker took the run over meanwhile (its result is not ours to record)."""
    run = session.get(Run, run_id)
    if run is None or run.state != "running" or run.worker != worker:
        return Outcome("lost-lease", run_id)
    if result.status == "succeeded":
        lifecycle.commit_succeeded(session, run, summary=_summary(result))
        mirror = _mirrored(session.get(Pipeline, run.pipeline_id))
        return Outcome(state_of(run.state), run_id, mirror_group_of=mirror)
    reported = result.error
    failure = (RunFailure(reported.kind, for_tenant(reported.message), reported.topic, reported.partition) if reported
               else RunFailure("internal", "no error given"))
    if reported and failure.message != reported.message:  # the whole of it for the operator
        log.warning("run %s failed (%s): %s", run_id, reported.kind, reported.message)
    if failure.kind == "cancelled":
        lifecycle.finish(session, run, "cancelled", error=failure, result=result.model_dump(mode="json"))
        return Outcome("cancelled", run_id)
    return _failed(session, run, failure, retry, result=result.model_dump(mode="json"))


def fire_schedule(*, session: Session, pipeline_id: uuid.UUID, slot: datetime, services: Services,
                  claim: bool = False) -> uuid.UUID | Outcome:
    """A schedule slot: plan first, and create a run (returned, planned) only when there is
    something to read. A failed plan is not a run, nor a slot over the tenant's runs_per_hour quota
    (logged): the next slot tries again. ``claim``: a continuous pipeline's own message, which takes
    its slot first (``superseded`` when the slot moved on meanwhile); the scheduler's took it already.

    A continuous pipeline's runs are not counted by runs_per_hour (a run a second would spend it in
    an hour): it has one run at a time, and its tenant's share of the workers is ``concurrent_runs``."""

    pipeline = session.exec(select(Pipeline).where(Pipeline.id == pipeline_id).with_for_update()).first()
    if pipeline is None or pipeline.state != "active":
        return Outcome("paused")
    if claim and not claim_slot(pipeline, slot, now=utcnow()):
        return Outcome("superseded")
    if repository.active_run(session, pipeline_id) is not None:
        return Outcome("busy")
    continuous = isinstance(definition_of(pipeline).schedule, ContinuousSchedule)
    quotas = QuotaLimits.defaults(services.settings)
    if not continuous and (over := _over_rate(session, pipeline, slot, quotas, lock=False)) is not None:
        return over  # known before asking Kafka anything
    try:
        planned = services.plan_now(session, pipeline)
    except Exception as exc:  # noqa: BLE001 (logged; the next slot tries again)
        log.warning("schedule of pipeline %s: planning failed: %s", pipeline_id, failure_of(exc).message)
        return Outcome("plan-failed")
    if planned.total == 0:
        lifecycle.initialize_positions(session, pipeline, planned)
        return Outcome("nothing-new")
    if not continuous and (over := _over_rate(session, pipeline, slot, quotas, lock=True)) is not None:
        lifecycle.initialize_positions(session, pipeline, planned)  # a start at `latest` stays where it was seen
        return over  # the tenant's lock is taken only now: never held while Kafka is asked
    run = lifecycle.create_run(session, pipeline, trigger="continuous" if continuous else "schedule",
                               scheduled_for=slot)
    lifecycle.store_plan(session, run, pipeline, planned)
    return run.id


# Helpers.

def _over_rate(session: Session, pipeline: Pipeline, slot: datetime, quotas: QuotaLimits, *,
               lock: bool) -> Outcome | None:
    """A slot over the tenant's runs_per_hour quota is skipped with its reason logged: not an error to
    retry, the next slot tries again."""
    try:
        check_run_rate(session, pipeline.tenant_id, quotas=quotas, lock=lock)
    except QuotaExceeded as exc:
        log.info("schedule of pipeline %s: slot %s skipped: %s", pipeline.id, slot.isoformat(), exc.detail)
        return Outcome("over-quota")
    return None


def _load(session: Session, run_id: uuid.UUID) -> tuple[Run, Pipeline]:
    run = session.get(Run, run_id)
    assert run is not None, f"run {run_id} vanished while claimed"  # runs are deleted only with their pipeline
    pipeline = session.get(Pipeline, run.pipeline_id)
    assert pipeline is not None  # a pipeline with an active run is not deleted (api.runs.models)
    return run, pipeline


def _ensure_kafka_target(session: Session, pipeline: Pipeline, services: Services) -> None:
    """A Kafka target's topic exists before anything is read, or is created if the pipeline asks.

    Only a definite answer stops the run here (the topic is missing, or creating it was refused):
    a cluster that cannot be asked now fails the job the same way, with the job's own diagnosis."""
    target = definition_of(pipeline).target
    if target.type != "kafka":
        return
    try:
        with kafka_client(session, target.connection_id, services.secrets,
                          timeout_s=services.settings.kafka_timeout_s, egress=services.settings.egress_policy) as client:
            client.ensure_topic(target.topic, target.create_topic)
    except KafkaClientError as exc:
        if exc.kind in ("target_missing", "target_refused"):
            raise
        log.info("target topic of pipeline %s not checked (%s); the job will say", pipeline.id, exc.kind)


def _failed(session: Session, run: Run, failure: RunFailure, retry: RetryPolicy, **values: Any) -> Outcome:
    delay = retry.retry_in(failure.kind, run.attempt)
    if delay is not None:
        lifecycle.requeue(session, run, error=failure, delay_s=delay, figures_of=values)
        return Outcome("queued", run.id, retry_in_s=delay)
    lifecycle.finish(session, run, "failed", error=failure, **values)
    return Outcome("failed", run.id)


def _mirrored(pipeline: Pipeline | None) -> uuid.UUID | None:
    return pipeline.id if pipeline is not None and definition_of(pipeline).source.commit_to_group else None


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
