"""``/pipelines``: definitions of what to ingest from where to where, and when."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Query, Response
from fastapi.responses import JSONResponse

from api.core.deps import Editor, IfMatch, SessionDep, SettingsDep, Viewer
from api.core.http import resource_headers
from api.core.idempotency import IdempotencyDep
from api.core.pagination import Page, PageParams, page_params
from api.pipelines import alerts, service
from api.pipelines.alerts import LagAlertRead, LagAlertSpec
from api.pipelines.maintenance_policy import RetentionFloor
from api.pipelines.models import Pipeline
from api.pipelines.schemas import PipelineRead, PipelineSpec, PipelineState
from api.tenancy.quotas import QuotaLimits

router = APIRouter(prefix="/pipelines", tags=["pipelines"])

PipelinePage = Annotated[PageParams, Depends(page_params(("created_at", "updated_at", "name", "state")))]
PatchBody = Annotated[dict[str, Any], Body(
    description="JSON Merge Patch (RFC 7396) of the pipeline definition", media_type="application/merge-patch+json",
)]


def _read(pipeline: Pipeline, storage_root: str, response: Response, *, created: bool = False) -> PipelineRead:
    resource_headers(response, etag=service.etag(pipeline), location=f"/pipelines/{pipeline.id}" if created else None)
    return service.to_read(pipeline, storage_root)


@router.post("", operation_id="create_pipeline", status_code=201, response_model=PipelineRead)
def create_pipeline(
    body: PipelineSpec, response: Response, ctx: Editor, session: SessionDep, settings: SettingsDep,
    idem: IdempotencyDep,
) -> PipelineRead | JSONResponse:
    """Define a pipeline: a Kafka source, a Delta or Kafka target and an optional schedule."""
    root = settings.resolved_storage_root
    return idem.respond(session, f"tenant:{ctx.tenant_id}", lambda: _read(
        service.create_pipeline(session=session, ctx=ctx, spec=body, storage_root=root,
                                quotas=QuotaLimits.defaults(settings), retention=RetentionFloor.of(settings)),
        root, response, created=True

    ), response=response, status_code=201)


@router.get("", operation_id="list_pipelines", response_model=Page[PipelineRead])
def list_pipelines(
    ctx: Viewer, session: SessionDep, settings: SettingsDep, page: PipelinePage,
    name: Annotated[str | None, Query(max_length=100, description="Exact name")] = None,
    name_contains: Annotated[str | None, Query(max_length=100)] = None,
    state: PipelineState | None = None,
    connection_id: uuid.UUID | None = None,
) -> Page[PipelineRead]:
    """List the tenant's pipelines, filtered by name, state or source connection."""
    rows, total = service.list_pipelines(session=session, ctx=ctx, page=page, name=name,
                                         name_contains=name_contains, state=state, connection_id=connection_id)
    root = settings.resolved_storage_root
    return Page(items=[service.to_read(r, root) for r in rows], total=total, limit=page.limit, offset=page.offset)


@router.get("/{pipeline_id}", operation_id="get_pipeline", response_model=PipelineRead)
def get_pipeline(
    pipeline_id: uuid.UUID, response: Response, ctx: Viewer, session: SessionDep, settings: SettingsDep
) -> PipelineRead:
    """Read one pipeline."""
    return _read(service.get_pipeline(session=session, ctx=ctx, pipeline_id=pipeline_id),
                 settings.resolved_storage_root, response)


@router.put("/{pipeline_id}", operation_id="replace_pipeline", response_model=PipelineRead)
def replace_pipeline(
    pipeline_id: uuid.UUID, body: PipelineSpec, response: Response, ctx: Editor, session: SessionDep,
    settings: SettingsDep, if_match: IfMatch = None,
) -> PipelineRead:
    """Replace a pipeline's whole definition; the same body twice changes nothing the second time."""
    root = settings.resolved_storage_root
    return _read(service.replace_pipeline(session=session, ctx=ctx, pipeline_id=pipeline_id, spec=body,
                                          if_match=if_match, storage_root=root, quotas=QuotaLimits.defaults(settings),
                                          retention=RetentionFloor.of(settings)),
                 root, response)


@router.patch("/{pipeline_id}", operation_id="patch_pipeline", response_model=PipelineRead)
def patch_pipeline(
    pipeline_id: uuid.UUID, body: PatchBody, response: Response, ctx: Editor, session: SessionDep,
    settings: SettingsDep, if_match: IfMatch = None,
) -> PipelineRead:
    """Change some fields of a pipeline (JSON Merge Patch)."""
    root = settings.resolved_storage_root
    return _read(service.patch_pipeline(session=session, ctx=ctx, pipeline_id=pipeline_id, patch=body,
                                        if_match=if_match, storage_root=root, quotas=QuotaLimits.defaults(settings),
                                        retention=RetentionFloor.of(settings)),
                 root, response)


@router.delete("/{pipeline_id}", operation_id="delete_pipeline", status_code=204)
def delete_pipeline(
    pipeline_id: uuid.UUID, ctx: Editor, session: SessionDep, if_match: IfMatch = None
) -> Response:
    """Delete a pipeline (its Delta table is left in place; its mirrored consumer group is deleted)."""
    service.delete_pipeline(session=session, ctx=ctx, pipeline_id=pipeline_id, if_match=if_match)
    return Response(status_code=204)


@router.post("/{pipeline_id}/pause", operation_id="pause_pipeline", response_model=PipelineRead)
def pause_pipeline(
    pipeline_id: uuid.UUID, response: Response, ctx: Editor, session: SessionDep, settings: SettingsDep,
    if_match: IfMatch = None,
) -> PipelineRead:
    """Pause a pipeline: its schedule stops firing; pausing a paused pipeline changes nothing."""
    return _read(service.set_state(session=session, ctx=ctx, pipeline_id=pipeline_id, state="paused",
                                   quotas=QuotaLimits.defaults(settings), if_match=if_match), settings.resolved_storage_root, response)


@router.post("/{pipeline_id}/resume", operation_id="resume_pipeline", response_model=PipelineRead)
def resume_pipeline(
    pipeline_id: uuid.UUID, response: Response, ctx: Editor, session: SessionDep, settings: SettingsDep,
    if_match: IfMatch = None,
) -> PipelineRead:
    """Resume a paused pipeline; its schedule fires again from now."""
    return _read(service.set_state(session=session, ctx=ctx, pipeline_id=pipeline_id, state="active",
                                   quotas=QuotaLimits.defaults(settings), if_match=if_match), settings.resolved_storage_root, response)


def _lag_alert(pipeline: Pipeline, response: Response) -> LagAlertRead:
    resource_headers(response, etag=alerts.etag(pipeline))
    return alerts.to_read(pipeline)


@router.get("/{pipeline_id}/lag-alert", operation_id="get_lag_alert", response_model=LagAlertRead)
def get_lag_alert(pipeline_id: uuid.UUID, response: Response, ctx: Viewer, session: SessionDep) -> LagAlertRead:
    """The pipeline's lag alert: its thresholds, and whether it is raised (404 when none is set)."""
    return _lag_alert(alerts.get_lag_alert(session=session, ctx=ctx, pipeline_id=pipeline_id), response)


@router.put("/{pipeline_id}/lag-alert", operation_id="put_lag_alert", response_model=LagAlertRead)
def put_lag_alert(
    pipeline_id: uuid.UUID, body: LagAlertSpec, response: Response, ctx: Editor, session: SessionDep,
    if_match: IfMatch = None,
) -> LagAlertRead:
    """Set the lag (records, and optionally seconds behind) that sends pipeline.lag_exceeded to webhooks."""
    return _lag_alert(alerts.put_lag_alert(session=session, ctx=ctx, pipeline_id=pipeline_id, spec=body,
                                           if_match=if_match), response)


@router.delete("/{pipeline_id}/lag-alert", operation_id="delete_lag_alert", status_code=204)
def delete_lag_alert(pipeline_id: uuid.UUID, ctx: Editor, session: SessionDep, if_match: IfMatch = None) -> Response:
    """Stop alerting on the pipeline's lag."""
    alerts.delete_lag_alert(session=session, ctx=ctx, pipeline_id=pipeline_id, if_match=if_match)
    return Response(status_code=204)
