"""A pipeline's lag alert: the lag that raises ``pipeline.lag_exceeded``, and the scheduler's evaluation
of it with hysteresis.

The lag is the one the pipeline's last plan or commit observed (``service.record_observed_lag``). How
long the pipeline has been behind is the time since a plan or commit last found nothing left to read
(``caught_up_at``, else its creation), counted while the last observation saw a lag: at most the age
of its oldest unread record, and still growing while its runs fail. The alert is raised when either
reaches its threshold and cleared (``pipeline.lag_recovered``) only once both are back below
``RECOVERY_RATIO`` of theirs, so a lag hovering around a threshold does not flap. Paused pipelines
are not evaluated (they are behind on purpose); their alert state is kept.

Raised and cleared by compare-and-set on ``lag_alert_since``: two schedulers send each change once.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import update
from sqlmodel import Session, col, select

from api.audit.service import record_by
from api.core.db import rows_changed, utcnow
from api.core.errors import NotFound
from api.core.etag import check_if_match, etag_for
from api.core.security import TenantContext
from api.pipelines.models import Pipeline
from api.pipelines.service import freshness_of, get_pipeline
from api.webhooks.events import emit


class LagAlertSpec(BaseModel):
    """The lag that raises ``pipeline.lag_exceeded`` (docs/webhooks.md); ``pipeline.lag_recovered``
    follows once the lag is back below half of each threshold."""

    model_config = ConfigDict(extra="forbid")

    lag_records: int = Field(ge=1, le=10**15, description="Records between the pipeline's position and the "
                                                          "partitions' ends, as its last plan or commit saw them")
    lag_age_s: int | None = Field(
        default=None, ge=60, le=31 * 86_400,
        description="Also raise the alert when the pipeline has not caught up for this long: seconds since a plan "
                    "or commit last found nothing left to read (at most the age of its oldest unread record)")
    freshness_s: int | None = Field(
        default=None, ge=1, le=31 * 86_400,
        description="Also raise the alert when records wait and the newest committed record (at the worst "
                    "partition) is older than this many seconds: a continuous pipeline's freshness target")


class LagAlertStatus(BaseModel):
    state: Literal["ok", "exceeded"]
    since: datetime | None = Field(description="When the alert was raised; null while it is not")
    observed_lag: int | None = Field(description="The lag last observed; null: never planned yet")
    observed_at: datetime | None
    behind_s: float | None = Field(description="Seconds since the pipeline last had nothing left to read")
    freshness_s: float | None = Field(default=None, description="The age of the newest committed record at the "
                                                                "worst partition (status.freshness.age_s)")


class LagAlertRead(LagAlertSpec):
    pipeline_id: uuid.UUID
    status: LagAlertStatus


RECOVERY_RATIO = 0.5
RESOURCE_TYPE = "pipeline_lag_alert"


class LagAlertNotSet(NotFound):
    def __init__(self, pipeline_id: uuid.UUID) -> None:
        super().__init__("Lag alert of pipeline", pipeline_id)


def etag(pipeline: Pipeline) -> str:
    return etag_for("lag-alert", pipeline.id, json.dumps(pipeline.lag_alert, sort_keys=True))


def behind_s(pipeline: Pipeline, now: datetime) -> float | None:
    """Seconds the pipeline has been behind, as far as its observations tell; None: never observed."""
    if pipeline.observed_lag is None:
        return None
    if pipeline.observed_lag == 0:
        return 0.0
    return max((now - (pipeline.caught_up_at or pipeline.created_at)).total_seconds(), 0.0)


def to_read(pipeline: Pipeline, now: datetime | None = None) -> LagAlertRead:
    spec = LagAlertSpec.model_validate(pipeline.lag_alert)
    status = LagAlertStatus(state="exceeded" if pipeline.lag_alert_since else "ok", since=pipeline.lag_alert_since,
                            observed_lag=pipeline.observed_lag, observed_at=pipeline.observed_at,
                            behind_s=behind_s(pipeline, now or utcnow()),
                            freshness_s=freshness_of(pipeline, now).age_s)
    return LagAlertRead(**spec.model_dump(), pipeline_id=pipeline.id, status=status)


def get_lag_alert(*, session: Session, ctx: TenantContext, pipeline_id: uuid.UUID) -> Pipeline:
    pipeline = get_pipeline(session=session, ctx=ctx, pipeline_id=pipeline_id)
    if pipeline.lag_alert is None:
        raise LagAlertNotSet(pipeline_id)
    return pipeline


def put_lag_alert(
    *, session: Session, ctx: TenantContext, pipeline_id: uuid.UUID, spec: LagAlertSpec, if_match: str | None,
) -> Pipeline:
    """Set the thresholds; a raised alert stays raised until the next evaluation says otherwise."""
    pipeline = get_pipeline(session=session, ctx=ctx, pipeline_id=pipeline_id, lock=True)
    check_if_match(if_match, etag(pipeline))
    wanted = spec.model_dump()
    if wanted == pipeline.lag_alert:
        return pipeline
    before = pipeline.lag_alert
    pipeline.lag_alert = wanted
    session.add(pipeline)
    session.flush()
    record_by(session, ctx, resource_type=RESOURCE_TYPE, resource_id=pipeline.id, action="update", before=before,
              after=wanted)
    return pipeline


def delete_lag_alert(*, session: Session, ctx: TenantContext, pipeline_id: uuid.UUID, if_match: str | None) -> None:
    """No more lag alerts for the pipeline; one raised is dropped without a ``lag_recovered``."""
    pipeline = get_pipeline(session=session, ctx=ctx, pipeline_id=pipeline_id, lock=True)
    if pipeline.lag_alert is None:
        raise LagAlertNotSet(pipeline_id)
    check_if_match(if_match, etag(pipeline))
    before = pipeline.lag_alert
    pipeline.lag_alert, pipeline.lag_alert_since = None, None
    session.add(pipeline)
    session.flush()
    record_by(session, ctx, resource_type=RESOURCE_TYPE, resource_id=pipeline.id, action="delete", before=before)


# The scheduler's evaluation.

@dataclass(frozen=True)
class Evaluated:
    checked: int
    raised: int
    cleared: int
    last_id: uuid.UUID | None  # where the next batch starts


def _exceeded(spec: LagAlertSpec, lag: int, behind: float, stale: float, ratio: float = 1.0) -> bool:
    """Over a threshold (times ``ratio``): the lag, the time behind, or (while records wait) the age of
    the newest committed record."""
    return (lag >= spec.lag_records * ratio or (spec.lag_age_s is not None and behind >= spec.lag_age_s * ratio)
            or (spec.freshness_s is not None and lag > 0 and stale >= spec.freshness_s * ratio))


def _event_data(pipeline: Pipeline, spec: LagAlertSpec, behind: float, stale: float | None) -> dict[str, Any]:
    return {"pipeline_id": str(pipeline.id), "pipeline_name": pipeline.name, "observed_lag": pipeline.observed_lag,
            "observed_at": pipeline.observed_at.isoformat() if pipeline.observed_at else None,
            "behind_s": round(behind, 1), "freshness_s": round(stale, 1) if stale is not None else None,
            "threshold": spec.model_dump()}


def _set_since(session: Session, pipeline: Pipeline, since: datetime | None) -> bool:
    """Raise (``since``) or clear (None) the alert if nobody changed it since this read."""
    seen = pipeline.lag_alert_since
    condition = col(Pipeline.lag_alert_since).is_(None) if seen is None else col(Pipeline.lag_alert_since) == seen
    return rows_changed(session, update(Pipeline).where(col(Pipeline.id) == pipeline.id, condition)
                        .values(lag_alert_since=since)) == 1


def evaluate_lag_alerts(session: Session, *, now: datetime, after: uuid.UUID | None, limit: int) -> Evaluated:
    """One batch of active pipelines with a lag alert, by id after ``after``: raise or clear each
    alert whose state the observed lag changed, with its event."""
    stmt = select(Pipeline).where(Pipeline.state == "active", col(Pipeline.lag_alert).is_not(None),
                                  col(Pipeline.observed_lag).is_not(None))
    if after is not None:
        stmt = stmt.where(col(Pipeline.id) > after)
    pipelines = session.exec(stmt.order_by(col(Pipeline.id)).limit(limit)).all()
    raised = cleared = 0
    for pipeline in pipelines:
        spec = LagAlertSpec.model_validate(pipeline.lag_alert)
        lag, behind = pipeline.observed_lag or 0, behind_s(pipeline, now) or 0.0
        stale = freshness_of(pipeline, now).age_s
        if pipeline.lag_alert_since is None and _exceeded(spec, lag, behind, stale or 0.0):
            if _set_since(session, pipeline, now):
                emit(session, pipeline.tenant_id, "pipeline.lag_exceeded", _event_data(pipeline, spec, behind, stale))
                raised += 1
        elif pipeline.lag_alert_since is not None and not _exceeded(spec, lag, behind, stale or 0.0, RECOVERY_RATIO):
            since = pipeline.lag_alert_since
            if _set_since(session, pipeline, None):
                emit(session, pipeline.tenant_id, "pipeline.lag_recovered",
                     _event_data(pipeline, spec, behind, stale) | {"exceeded_since": since.isoformat()})
                cleared += 1
    return Evaluated(checked=len(pipelines), raised=raised, cleared=cleared,
                     last_id=pipelines[-1].id if pipelines else None)
