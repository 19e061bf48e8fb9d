"""Usage: a tenant reads its own (``/usage``); the operator reads one tenant's
(``/tenants/{id}/usage``) and every tenant's (``/usage/tenants``). JSON, or CSV with ``Accept:
text/csv`` or ``?format=csv``."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Header, Query, Response

from api.core.db import utcnow
from api.core.deps import OperatorDep, SessionDep, Viewer
from api.usage import service
from api.usage.csv import report_csv
from api.usage.schemas import UsageReport

router = APIRouter(tags=["usage"])

CSV = "text/csv; charset=utf-8"
_RESPONSES: dict[int | str, dict[str, object]] = {200: {"content": {"text/csv": {}}}}


def _query(
    start: Annotated[datetime | None, Query(alias="from", description="Start (inclusive, with a time zone): the "
                                            "buckets starting from it; default: a day (hour) or 30 days (day) "
                                            "before `to`")] = None,
    end: Annotated[datetime | None, Query(alias="to", description="End (exclusive); default: the end of this hour "
                                          "(hour) or of today, UTC (day)")] = None,
    granularity: Annotated[Literal["hour", "day"], Query(description="One row per hour or per day (UTC)")] = "hour",
    pipeline_id: Annotated[uuid.UUID | None, Query(description="Only this pipeline (a deleted one too)")] = None,
) -> service.UsageQuery:
    return service.UsageQuery.of(start=start, end=end, granularity=granularity, pipeline_id=pipeline_id, now=utcnow())


QueryDep = Annotated[service.UsageQuery, Depends(_query)]


def _wants_csv(
    format: Annotated[Literal["json", "csv"] | None, Query(description="csv: the same rows as CSV")] = None,
    accept: Annotated[str | None, Header(include_in_schema=False)] = None,
) -> bool:
    return format == "csv" or (format is None and accept is not None and "text/csv" in accept)


CsvDep = Annotated[bool, Depends(_wants_csv)]


def _respond(report: UsageReport, as_csv: bool) -> UsageReport | Response:
    return Response(report_csv(report), media_type=CSV) if as_csv else report


@router.get("/usage", operation_id="get_usage", response_model=UsageReport, responses=_RESPONSES)
def get_usage(ctx: Viewer, session: SessionDep, query: QueryDep, as_csv: CsvDep) -> UsageReport | Response:
    """The caller's tenant's usage per pipeline and hour (or day): records, rows, bytes, run time, runs by outcome."""
    return _respond(service.tenant_report(session=session, ctx=ctx, query=query), as_csv)


@router.get("/usage/tenants", operation_id="get_usage_by_tenant", response_model=UsageReport, responses=_RESPONSES)
def get_usage_by_tenant(operator: OperatorDep, session: SessionDep, query: QueryDep,
                        as_csv: CsvDep) -> UsageReport | Response:
    """Every tenant's usage per hour (or day), its pipelines summed (operator only)."""
    return _respond(service.tenants_report(session=session, query=query), as_csv)


@router.get("/tenants/{tenant_id}/usage", operation_id="get_tenant_usage", response_model=UsageReport,
            responses=_RESPONSES)
def get_tenant_usage(tenant_id: uuid.UUID, operator: OperatorDep, session: SessionDep, query: QueryDep,
                     as_csv: CsvDep) -> UsageReport | Response:
    """A tenant's usage per pipeline and hour (or day) (operator only)."""
    return _respond(service.operator_report(session=session, tenant_id=tenant_id, query=query), as_csv)
