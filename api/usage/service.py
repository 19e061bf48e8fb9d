"""The usage ledger's one writer (``meter``, called by ``api.runs.lifecycle`` in the transaction that
ends a run's attempt) and its readers: a tenant's report, the operator's report across tenants, and
the totals /metrics exports.

``meter`` is an insert-or-update on the row's key (``ON CONFLICT DO UPDATE SET n = n + excluded.n``,
on PostgreSQL and SQLite alike), so two attempts ending at once in the same hour both count, and
nothing is ever recomputed from ``runs``.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import datetime, timedelta
from typing import Any, Literal

from sqlalchemy import ColumnElement, Table, func
from sqlalchemy import select as sa_select
from sqlalchemy.dialects import postgresql, sqlite
from sqlmodel import Session, SQLModel, col, select

from api.core.errors import NotFound, ValidationFailed
from api.core.security import TenantContext
from api.pipelines.models import Pipeline
from api.tenancy import service as tenancy
from api.usage.models import COUNTERS, DURATION_BUCKETS, DURATION_COLUMNS, UsageHour, UsageTotal
from api.usage.schemas import RunsByOutcome, UsageFigures, UsageReport, UsageRow

AttemptOutcome = Literal["succeeded", "failed", "retried", "cancelled", "skipped"]
Granularity = Literal["hour", "day"]

# The widest range one report covers: an hour's rows for a month, a day's for a year.
MAX_RANGE: dict[Granularity, timedelta] = {"hour": timedelta(days=31), "day": timedelta(days=366)}


@dataclass(frozen=True)
class Figures:
    """What one attempt read, wrote and cost, as its job reported it."""

    records_read: int = 0
    rows_written: int = 0
    rows_quarantined: int = 0
    rows_violating: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    engine_ms: int = 0

    @classmethod
    def of(cls, values: Mapping[str, Any]) -> Figures:
        """From the values an attempt's end writes onto its run (``records_read`` … and the job's
        ``result``): the ledger counts exactly what the run row shows."""
        result: Mapping[str, Any] = values.get("result") or {}

        def number(name: str, default: int = 0) -> int:
            value = values.get(name, result.get(name))
            return int(value) if value is not None else default

        records = values.get("records_read")
        if records is None:
            records = sum(int(p.get("records_read") or 0) for p in result.get("partitions") or [])
        timings = result.get("timings") or {}
        engine_ms = 0
        if timings.get("started_at") and timings.get("finished_at"):
            took = _instant(timings["finished_at"]) - _instant(timings["started_at"])
            engine_ms = max(0, round(took.total_seconds() * 1000))
        return cls(records_read=int(records), rows_written=number("rows_written"),
                   rows_quarantined=number("rows_quarantined"), rows_violating=number("rows_violating"),
                   bytes_read=number("bytes_read"),
                   bytes_written=number("bytes_written"), engine_ms=engine_ms)


def _instant(value: str | datetime) -> datetime:
    return value if isinstance(value, datetime) else datetime.fromisoformat(value)


def hour_of(at: datetime) -> datetime:
    return at.replace(minute=0, second=0, microsecond=0)


def _table(model: type[SQLModel]) -> Table:
    table: Table = model.__table__  # type: ignore[attr-defined]  # every table=True model has one
    return table


def _upsert(session: Session, table: Table, keys: dict[str, Any], increments: dict[str, int], name: str) -> None:
    insert = postgresql.insert if session.get_bind().dialect.name == "postgresql" else sqlite.insert
    statement = insert(table).values(**keys, pipeline_name=name, **increments)
    added = {column: table.c[column] + statement.excluded[column] for column in increments}
    session.execute(statement.on_conflict_do_update(
        index_elements=[k for k in keys if k != "day"],
        set_={**added, "pipeline_name": statement.excluded.pipeline_name}))


def meter(
    session: Session, *, tenant_id: uuid.UUID, pipeline_id: uuid.UUID, pipeline_name: str, outcome: AttemptOutcome,
    figures: Figures, wall_s: float, at: datetime,
) -> None:
    """Add one ended attempt to its pipeline's hour (the hour ``at`` falls in) and its total."""
    wall_ms = max(0, round(wall_s * 1000))
    increments = {f.name: getattr(figures, f.name) for f in fields(figures)}
    increments |= {"wall_ms": wall_ms, f"runs_{outcome}": 1}
    hour = hour_of(at)
    _upsert(session, _table(UsageHour), {"tenant_id": tenant_id, "pipeline_id": pipeline_id, "hour": hour,
                                           "day": hour.replace(hour=0)}, increments, pipeline_name)
    durations = {column: 1 for bound, column in zip(DURATION_BUCKETS, DURATION_COLUMNS, strict=True)
                 if wall_ms <= bound * 1000}
    _upsert(session, _table(UsageTotal), {"tenant_id": tenant_id, "pipeline_id": pipeline_id},
            increments | durations, pipeline_name)


# Reading.

@dataclass(frozen=True)
class UsageQuery:
    """A report's range and grouping, checked: ``start`` < ``end``, at most ``MAX_RANGE`` apart. A
    bucket is in the range when its start is (a day starting before ``start`` is left out whole)."""

    start: datetime
    end: datetime
    granularity: Granularity
    pipeline_id: uuid.UUID | None = None

    @classmethod
    def of(cls, *, start: datetime | None, end: datetime | None, granularity: Granularity,
           pipeline_id: uuid.UUID | None, now: datetime) -> UsageQuery:
        for loc, value in (("query.from", start), ("query.to", end)):
            if value is not None and value.tzinfo is None:
                raise ValidationFailed.field(loc, "give a time zone (e.g. 2026-11-25T00:00:00Z)")
        if end is None:  # the end of the hour (or day) under way
            end = hour_of(now) + timedelta(hours=1) if granularity == "hour" else (
                hour_of(now).replace(hour=0) + timedelta(days=1))
        start = start or end - (timedelta(days=1) if granularity == "hour" else timedelta(days=30))
        if start >= end:
            raise ValidationFailed.field("query.from", "from must be before to")
        if end - start > MAX_RANGE[granularity]:
            raise ValidationFailed.field("query.from", f"a {granularity} report covers at most "
                                         f"{MAX_RANGE[granularity].days} days")
        return cls(start=start, end=end, granularity=granularity, pipeline_id=pipeline_id)


def _sums() -> list[ColumnElement[Any]]:
    return [func.coalesce(func.sum(getattr(UsageHour, c)), 0).label(c) for c in COUNTERS]


def _figures(row: Any) -> UsageFigures:
    return UsageFigures(
        records_read=row.records_read, rows_written=row.rows_written, rows_quarantined=row.rows_quarantined,
        rows_violating=row.rows_violating, bytes_read=row.bytes_read, bytes_written=row.bytes_written, wall_seconds=row.wall_ms / 1000,
        engine_seconds=row.engine_ms / 1000,
        runs=RunsByOutcome(succeeded=row.runs_succeeded, failed=row.runs_failed, retried=row.runs_retried,
                           cancelled=row.runs_cancelled, skipped=row.runs_skipped))


def _report(session: Session, query: UsageQuery, *, tenant_id: uuid.UUID | None, by: Literal["pipeline", "tenant"]
            ) -> UsageReport:
    bucket = col(UsageHour.hour) if query.granularity == "hour" else col(UsageHour.day)
    keys: list[Any] = [col(UsageHour.tenant_id)]
    if by == "pipeline":
        keys.append(col(UsageHour.pipeline_id))
    statement = (sa_select(*keys, bucket.label("bucket"), *_sums())
                 .where(bucket >= query.start, bucket < query.end).group_by(*keys, bucket)
                 .order_by(bucket, *keys))
    if tenant_id is not None:
        statement = statement.where(col(UsageHour.tenant_id) == tenant_id)
    if query.pipeline_id is not None:
        statement = statement.where(col(UsageHour.pipeline_id) == query.pipeline_id)
    rows = session.execute(statement).all()
    names = _names(session, {row.pipeline_id for row in rows}) if by == "pipeline" else {}
    items = [UsageRow(tenant_id=row.tenant_id, pipeline_id=getattr(row, "pipeline_id", None),
                      pipeline_name=names.get(getattr(row, "pipeline_id", None)), bucket=row.bucket,
                      **_figures(row).model_dump()) for row in rows]
    return UsageReport(start=query.start, end=query.end, granularity=query.granularity,
                       pipeline_id=query.pipeline_id, items=items)


def _names(session: Session, pipeline_ids: set[uuid.UUID]) -> dict[uuid.UUID | None, str]:
    """Each pipeline's latest name (kept after the pipeline is deleted)."""
    if not pipeline_ids:
        return {}
    rows = session.exec(select(UsageTotal.pipeline_id, UsageTotal.pipeline_name)
                        .where(col(UsageTotal.pipeline_id).in_(pipeline_ids))).all()
    return dict(rows)


def _check_pipeline(session: Session, tenant_id: uuid.UUID, pipeline_id: uuid.UUID | None) -> None:
    """A pipeline filter names one of the tenant's pipelines, or a deleted one it has usage of; else 404."""
    if pipeline_id is None:
        return
    metered = session.get(UsageTotal, (tenant_id, pipeline_id))
    pipeline = session.get(Pipeline, pipeline_id)
    if metered is None and (pipeline is None or pipeline.tenant_id != tenant_id):
        raise NotFound("Pipeline", pipeline_id)


def tenant_report(*, session: Session, ctx: TenantContext, query: UsageQuery) -> UsageReport:
    """The caller's tenant's usage per pipeline and hour (or day)."""
    _check_pipeline(session, ctx.tenant_id, query.pipeline_id)
    return _report(session, query, tenant_id=ctx.tenant_id, by="pipeline")


def operator_report(*, session: Session, tenant_id: uuid.UUID, query: UsageQuery) -> UsageReport:
    """One tenant's usage per pipeline, as the operator reads it; 404 for no such tenant."""
    tenancy.get_tenant(session=session, tenant_id=tenant_id)
    _check_pipeline(session, tenant_id, query.pipeline_id)
    return _report(session, query, tenant_id=tenant_id, by="pipeline")


def tenants_report(*, session: Session, query: UsageQuery) -> UsageReport:
    """Every tenant's usage per hour (or day), pipelines summed (the operator's view across tenants)."""
    return _report(session, query, tenant_id=None, by="tenant")


def totals(session: Session) -> Sequence[UsageTotal]:
    """Every pipeline's total since it began: one row per pipeline ever metered, never per run."""
    return session.exec(select(UsageTotal).order_by(col(UsageTotal.tenant_id), col(UsageTotal.pipeline_id))).all()
