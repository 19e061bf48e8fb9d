"""The portal's usage page: records read per hour (the last day) or per day (the last 30), a chart per
pipeline, and each pipeline's totals over the range (the API's ``/usage``)."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Literal

from fastapi.responses import Response

from api.core.db import utcnow
from api.portal import charts
from api.portal.auth import Viewer, portal_router
from api.usage import service as usage
from api.usage.schemas import UsageRow

router = portal_router()

STEP = {"hour": timedelta(hours=1), "day": timedelta(days=1)}


def _summed(rows: list[UsageRow]) -> dict[str, float]:
    names = ("records_read", "rows_written", "rows_quarantined", "bytes_read", "bytes_written", "wall_seconds",
             "engine_seconds")
    sums = {name: sum(getattr(r, name) for r in rows) for name in names}
    sums["runs"] = sum(sum(r.runs.model_dump().values()) for r in rows)
    return sums


@router.get("/usage")
def usage_page(caller: Viewer, granularity: Literal["hour", "day"] = "hour") -> Response:
    """The tenant's usage: a chart of records read per pipeline, and the range's totals."""
    now = utcnow()
    # The default range: its last slot is the hour (or day) under way.
    query = usage.UsageQuery.of(start=None, end=None, granularity=granularity, pipeline_id=None, now=now)
    start, end = query.start, query.end
    report = usage.tenant_report(session=caller.session, ctx=caller.ctx, query=query)
    by_pipeline: dict[uuid.UUID, list[UsageRow]] = {}
    for row in report.items:
        assert row.pipeline_id is not None
        by_pipeline.setdefault(row.pipeline_id, []).append(row)
    pipelines = sorted(by_pipeline.items(), key=lambda kv: (kv[1][0].pipeline_name or "", kv[0]))
    shown = [(pipeline_id, rows[0].pipeline_name or str(pipeline_id), _summed(rows),
              charts.usage_chart(rows[0].pipeline_name or str(pipeline_id), rows, start=start, end=end,
                                 step=STEP[granularity]))
             for pipeline_id, rows in pipelines]
    return caller.render("usage.html", granularity=granularity, start=start, end=end, pipelines=shown,
                         csv=f"/usage?granularity={granularity}&format=csv")
