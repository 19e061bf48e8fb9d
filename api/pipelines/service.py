"""Pipelines: define, read, replace, patch, pause, resume, delete."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from pydantic import ValidationError
from sqlalchemy import func, or_
from sqlmodel import Session, col, select

from api.audit.service import record_by
from api.connections.models import Connection
from api.core.db import utcnow
from api.core.enqueue import enqueue_group_delete
from api.core.errors import Conflict, ValidationFailed
from api.core.etag import check_if_match, etag_for
from api.core.merge_patch import merge_patch
from api.core.pagination import PageParams, paginate
from api.core.scoping import get_scoped, scoped_select
from api.core.security import TenantContext
from api.pipelines.definition import as_written, definition_of, maintenance_in_effect, spec_of
from api.pipelines.maintenance_policy import NO_OPERATOR_FLOOR, RetentionFloor
from api.pipelines.models import Pipeline
from api.pipelines.scheduling import look_again, next_fire
from api.pipelines.schemas import (
    DeltaTarget,
    Freshness,
    KafkaTarget,
    PipelineRead,
    PipelineSpec,
    PipelineStatus,
    registry_subject,
)
from api.pipelines.states import PIPELINE_STATES
from api.pipelines.storage import resolve_delta_uri
from api.pipelines.table_health import TableHealthRecord, TableHealthSnapshot, snapshot_of
from api.tenancy.quotas import QuotaLimits, enforce


def etag(pipeline: Pipeline) -> str:
    return etag_for(pipeline.id, pipeline.revision)


def target_uri(pipeline: Pipeline, target: DeltaTarget | KafkaTarget, storage_root: str) -> str | None:
    """Where the Delta table of ``pipeline`` (whose definition's ``target`` this is) lives; None for Kafka."""
    if not isinstance(target, DeltaTarget):
        return None
    return resolve_delta_uri(storage_root, pipeline.tenant_id, target.path)


def freshness_of(pipeline: Pipeline, now: datetime | None = None) -> Freshness:
    newest = pipeline.newest_record_at
    age = max(((now or utcnow()) - newest).total_seconds(), 0.0) if newest is not None else None
    return Freshness(newest_record_at=newest, age_s=age)


def to_read(pipeline: Pipeline, storage_root: str) -> PipelineRead:
    spec = spec_of(pipeline)
    return PipelineRead(
        id=pipeline.id, name=spec.name, source=spec.source, target=spec.target, schedule=spec.schedule,
        state=spec.state, contract=spec.contract, created_at=pipeline.created_at, updated_at=pipeline.updated_at,
        status=PipelineStatus(next_run_at=pipeline.next_run_at,
                              target_uri=target_uri(pipeline, spec.target, storage_root),
                              consumer_group=pipeline.group_mirror,
                              table=table_health_of(pipeline, spec), freshness=freshness_of(pipeline)),
    )


def table_health_of(pipeline: Pipeline, spec: PipelineSpec | None = None) -> TableHealthSnapshot | None:
    """The Delta table's health as last recorded on the pipeline's row (no query); None for a Kafka target."""
    policy = (maintenance_in_effect(spec.target, spec.schedule) if spec is not None
              else definition_of(pipeline).maintenance)
    return None if policy is None else snapshot_of(pipeline.table_health, policy, utcnow())


def record_group_mirror(session: Session, pipeline: Pipeline, outcome: dict[str, Any]) -> None:
    """The last copy of the offsets to the pipeline's consumer group (status only: no new revision)."""
    pipeline.group_mirror = outcome
    session.add(pipeline)
    session.flush()


def record_table_health(session: Session, pipeline: Pipeline, record: TableHealthRecord) -> None:
    """The Delta table's health as a run's commit or a maintenance task left it (status only: no new revision)."""
    pipeline.table_health = record.model_dump(mode="json")
    session.add(pipeline)


def record_observed_lag(session: Session, pipeline: Pipeline, lag: int) -> None:
    """The records between the pipeline's position and the partitions' ends, as last planned or
    committed, and when it last had nothing left to read (status only: no new revision)."""
    pipeline.observed_lag, pipeline.observed_at = lag, utcnow()
    if lag == 0:
        pipeline.caught_up_at = pipeline.observed_at
    session.add(pipeline)


def _stored(spec: PipelineSpec) -> dict[str, Any]:
    return spec.model_dump(mode="json", by_alias=True)


def _check_references(session: Session, ctx: TenantContext, spec: PipelineSpec, storage_root: str,
                      retention: RetentionFloor) -> None:
    refs = [("source.connection_id", spec.source.connection_id)]
    if isinstance(spec.target, KafkaTarget):
        refs.append(("target.connection_id", spec.target.connection_id))
    for field, ident in refs:
        conn = session.exec(scoped_select(Connection, ctx.tenant_id).where(Connection.id == ident)).first()
        if conn is None:
            raise ValidationFailed.field(field, f"Connection {ident} does not exist")
        if field == "source.connection_id" and conn.schema_registry is None:
            for part in ("value", "key"):
                if registry_subject(spec.source, part) is not None:
                    raise ValidationFailed.field(
                        f"source.{part}_format", f"This {part}_format reads its schemas from the connection's schema "
                        f"registry, and connection {ident} has none; add schema_registry to it")
    if spec.target.type == "delta":
        uri = resolve_delta_uri(storage_root, ctx.tenant_id, spec.target.path)
        retention.check(spec.target.maintenance)
        if spec.contract is not None and spec.contract.evolution == "widen" and "://" in uri and not uri.startswith("file://"):
            raise ValidationFailed.field("contract.evolution", "widen has delta-spark alter the table, and the run's Spark "
                                                               "reaches tables on a file system only (it has no object "
                                                               "store connector): use add or fail")


def _ensure_name_free(session: Session, ctx: TenantContext, name: str, own_id: uuid.UUID | None = None) -> None:
    existing = session.exec(scoped_select(Pipeline, ctx.tenant_id).where(Pipeline.name == name)).first()
    if existing is not None and existing.id != own_id:
        raise Conflict(f"A pipeline named {name!r} already exists", conflicting_id=str(existing.id))


def _apply(pipeline: Pipeline, spec: PipelineSpec) -> None:
    stored = _stored(spec)
    pipeline.name = spec.name
    pipeline.source_as_written = stored["source"]
    pipeline.target_as_written = stored["target"]
    pipeline.schedule_as_written = stored["schedule"]
    pipeline.contract_as_written = stored["contract"]
    pipeline.connection_id = spec.source.connection_id
    pipeline.target_connection_id = spec.target.connection_id if isinstance(spec.target, KafkaTarget) else None


def _set_state(session: Session, pipeline: Pipeline, state: str, *, quotas: QuotaLimits, looped: bool) -> None:
    """The state, and the schedule's next slot; an active continuous pipeline looks at once, within its
    tenant's ``continuous_pipelines`` quota if it did not loop already (``looped``: ``_loops`` before)."""
    if state != pipeline.state:
        PIPELINE_STATES.check(pipeline.state, state)
        pipeline.state = state
    if _loops(pipeline):
        if not looped:
            enforce(session, pipeline.tenant_id, "continuous_pipelines", defaults=quotas,
                    count=lambda: continuous_used(session, pipeline.tenant_id, besides=pipeline.id))
        look_again(session, pipeline)
        return
    schedule = definition_of(pipeline).schedule
    pipeline.next_run_at = next_fire(schedule, utcnow()) if pipeline.state == "active" else None


def _audit_view(pipeline: Pipeline) -> dict[str, Any]:
    return {"name": pipeline.name, **as_written(pipeline), "state": pipeline.state}


def quota_used(session: Session, tenant_id: uuid.UUID) -> int:
    """The tenant's pipelines: what its ``pipelines`` quota counts."""
    return session.exec(select(func.count()).select_from(Pipeline).where(Pipeline.tenant_id == tenant_id)).one()


def _loops(pipeline: Pipeline) -> bool:
    """Active and continuous: looking for records on its own every ``idle_wait_ms``."""
    return pipeline.state == "active" and "continuous" in (pipeline.schedule_as_written or {})


def continuous_used(session: Session, tenant_id: uuid.UUID, *, besides: uuid.UUID | None = None) -> int:
    """The tenant's active continuous pipelines (but ``besides``): what its ``continuous_pipelines``
    quota counts."""
    active = scoped_select(Pipeline, tenant_id).where(Pipeline.state == "active", Pipeline.id != besides)
    return sum(1 for pipeline in session.exec(active) if _loops(pipeline))


def create_pipeline(
    *, session: Session, ctx: TenantContext, spec: PipelineSpec, storage_root: str, quotas: QuotaLimits,
    retention: RetentionFloor = NO_OPERATOR_FLOOR,
) -> Pipeline:
    enforce(session, ctx.tenant_id, "pipelines", defaults=quotas, count=lambda: quota_used(session, ctx.tenant_id))
    _check_references(session, ctx, spec, storage_root, retention)
    _ensure_name_free(session, ctx, spec.name)
    pipeline = Pipeline(tenant_id=ctx.tenant_id, name=spec.name, connection_id=spec.source.connection_id,
                        source_as_written={}, target_as_written={}, state=spec.state)
    _apply(pipeline, spec)
    _set_state(session, pipeline, spec.state, quotas=quotas, looped=False)
    session.add(pipeline)
    session.flush()
    record_by(session, ctx, resource_type="pipeline", resource_id=pipeline.id, action="create", after=_audit_view(pipeline))
    return pipeline


def get_pipeline(*, session: Session, ctx: TenantContext, pipeline_id: uuid.UUID, lock: bool = False) -> Pipeline:
    return get_scoped(session, Pipeline, ctx.tenant_id, pipeline_id, resource="Pipeline", lock=lock)


def list_pipelines(
    *, session: Session, ctx: TenantContext, page: PageParams, name: str | None = None,
    name_contains: str | None = None, state: str | None = None, connection_id: uuid.UUID | None = None,
) -> tuple[list[Pipeline], int]:
    stmt = scoped_select(Pipeline, ctx.tenant_id)
    if name:
        stmt = stmt.where(Pipeline.name == name)
    if name_contains:
        stmt = stmt.where(col(Pipeline.name).contains(name_contains, autoescape=True))
    if state:
        stmt = stmt.where(Pipeline.state == state)
    if connection_id:
        stmt = stmt.where(Pipeline.connection_id == connection_id)
    return paginate(session, stmt, page, Pipeline)


def pipelines_using(
    *, session: Session, ctx: TenantContext, connection_id: uuid.UUID, limit: int = 100
) -> list[Pipeline]:
    """The pipelines that read from or write to a connection (what keeps it from being deleted), by name."""
    uses = or_(col(Pipeline.connection_id) == connection_id, col(Pipeline.target_connection_id) == connection_id)
    stmt = scoped_select(Pipeline, ctx.tenant_id).where(uses).order_by(col(Pipeline.name)).limit(limit)
    return list(session.exec(stmt).all())


def replace_pipeline(
    *, session: Session, ctx: TenantContext, pipeline_id: uuid.UUID, spec: PipelineSpec,
    if_match: str | None, storage_root: str, quotas: QuotaLimits, retention: RetentionFloor = NO_OPERATOR_FLOOR,
) -> Pipeline:
    pipeline = get_pipeline(session=session, ctx=ctx, pipeline_id=pipeline_id, lock=True)
    check_if_match(if_match, etag(pipeline))
    _check_references(session, ctx, spec, storage_root, retention)
    _ensure_name_free(session, ctx, spec.name, own_id=pipeline.id)
    before = _audit_view(pipeline)
    if _stored(spec) == _stored(spec_of(pipeline)):
        return pipeline  # a no-op write changes nothing, not even the ETag
    _keep_table_shape(pipeline, spec.target)
    schedule_changed = _stored(spec)["schedule"] != pipeline.schedule_as_written
    if _path_of(definition_of(pipeline).target) != _path_of(spec.target):
        pipeline.table_health = None  # another table: nothing recorded of it yet
    looped = _loops(pipeline)
    _apply(pipeline, spec)
    if spec.state != pipeline.state or schedule_changed:
        _set_state(session, pipeline, spec.state, quotas=quotas, looped=looped)
    _touch(session, ctx, pipeline, "update", before)
    return pipeline


# What a Delta table's rows are, for good: they are of one kind, in its partitions, matched by its key.
_TABLE_SHAPE = ("mode", "scd_type", "key", "key_from", "partition_by", "table_features")


def _path_of(target: DeltaTarget | KafkaTarget) -> str | None:
    return target.path if isinstance(target, DeltaTarget) else None


def _keep_table_shape(pipeline: Pipeline, target: DeltaTarget | KafkaTarget) -> None:
    """An edit may not change what the rows of a table that holds data are (its mode, SCD type,
    partitioning, key or where the key comes from): the next run would fail on that table, or match
    rows by another key.
    A new ``path`` is a new table, where any shape goes."""
    before = definition_of(pipeline).target
    if not (isinstance(before, DeltaTarget) and isinstance(target, DeltaTarget)) or before.path != target.path:
        return
    if pipeline.table_health is None:  # no run or maintenance task has written the table yet
        return
    for name in _TABLE_SHAPE:
        if getattr(before, name) != getattr(target, name):
            raise ValidationFailed.field(f"target.{name}", f"the table at this path holds data written with its "
                                                           f"{name} as it is: write another to a new path")


def _touch(session: Session, ctx: TenantContext, pipeline: Pipeline, action: str, before: dict[str, Any]) -> None:
    pipeline.revision += 1
    pipeline.updated_at = utcnow()
    session.add(pipeline)
    session.flush()
    record_by(session, ctx, resource_type="pipeline", resource_id=pipeline.id, action=action,
              before=before, after=_audit_view(pipeline))


def patch_pipeline(
    *, session: Session, ctx: TenantContext, pipeline_id: uuid.UUID, patch: dict[str, Any],
    if_match: str | None, storage_root: str, quotas: QuotaLimits, retention: RetentionFloor = NO_OPERATOR_FLOOR,
) -> Pipeline:
    pipeline = get_pipeline(session=session, ctx=ctx, pipeline_id=pipeline_id, lock=True)
    merged = merge_patch(_stored(spec_of(pipeline)), patch)
    try:
        spec = PipelineSpec.model_validate(merged)
    except ValidationError as exc:
        raise ValidationFailed.of(exc, "The patched pipeline is not valid") from None
    return replace_pipeline(session=session, ctx=ctx, pipeline_id=pipeline_id, spec=spec, if_match=if_match,
                            storage_root=storage_root, quotas=quotas, retention=retention)


def set_state(
    *, session: Session, ctx: TenantContext, pipeline_id: uuid.UUID, state: str, quotas: QuotaLimits,
    if_match: str | None = None,
) -> Pipeline:
    """Pause or resume; asking for the state it already has changes nothing."""
    pipeline = get_pipeline(session=session, ctx=ctx, pipeline_id=pipeline_id, lock=True)
    check_if_match(if_match, etag(pipeline))
    if pipeline.state == state:
        return pipeline
    before = _audit_view(pipeline)
    _set_state(session, pipeline, state, quotas=quotas, looped=_loops(pipeline))
    _touch(session, ctx, pipeline, "pause" if state == "paused" else "resume", before)
    return pipeline


def delete_pipeline(
    *, session: Session, ctx: TenantContext, pipeline_id: uuid.UUID, if_match: str | None
) -> None:
    pipeline = get_pipeline(session=session, ctx=ctx, pipeline_id=pipeline_id, lock=True)
    check_if_match(if_match, etag(pipeline))
    before = _audit_view(pipeline)
    group, connection_id = definition_of(pipeline).source.commit_to_group, pipeline.connection_id
    session.delete(pipeline)
    session.flush()  # a 409 here while the pipeline has an active run (api.runs.models)
    record_by(session, ctx, resource_type="pipeline", resource_id=pipeline_id, action="delete", before=before)
    if group:
        enqueue_group_delete(session, connection_id, group)
