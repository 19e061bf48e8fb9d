"""``/pipelines``: definitions of what to ingest from where to where, and when."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Query, Request, Response
from fastapi.responses import JSONResponse

from api.core.deps import Editor, IfMatch, SessionDep, SettingsDep, Viewer
from api.core.http import resource_response
from api.core.idempotency import IdempotencyDep
from api.core.pagination import Page, PageParams, page_params
from api.pipelines import service
from api.pipelines.models import Pipeline
from api.pipelines.schemas import PipelineRead, PipelineSpec, PipelineState

router = APIRouter(prefix="/pipelines", tags=["pipelines"])

PipelinePage = Annotated[PageParams, Depends(page_params(("created_at", "updated_at", "name", "state")))]
PatchBody = Annotated[dict[str, Any], Body(
    description="JSON Merge Patch (RFC 7396) of the pipeline definition", media_type="application/merge-patch+json",
)]


def _respond(pipeline: Pipeline, storage_root: str, status_code: int = 200) -> JSONResponse:
    location = f"/pipelines/{pipeline.id}" if status_code == 201 else None
    return resource_response(service.to_read(pipeline, storage_root), etag=service.etag(pipeline),
                             status_code=status_code, location=location)


@router.post("", operation_id="create_pipeline", status_code=201, response_model=PipelineRead)
def create_pipeline(
    body: PipelineSpec, ctx: Editor, session: SessionDep, settings: SettingsDep, idem: IdempotencyDep
) -> JSONResponse:
    """Define a pipeline: a Kafka source, a Delta or Kafka target and an optional schedule."""
    root = settings.resolved_storage_root
    return idem.respond(session, f"tenant:{ctx.tenant_id}", lambda: _respond(
        service.create_pipeline(session=session, ctx=ctx, spec=body, storage_root=root), root, 201
    ))


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
def get_pipeline(pipeline_id: uuid.UUID, ctx: Viewer, session: SessionDep, settings: SettingsDep) -> JSONResponse:
    """Read one pipeline."""
    return _respond(service.get_pipeline(session=session, ctx=ctx, pipeline_id=pipeline_id),
                    settings.resolved_storage_root)


@router.put("/{pipeline_id}", operation_id="replace_pipeline", response_model=PipelineRead)
def replace_pipeline(
    pipeline_id: uuid.UUID, body: PipelineSpec, ctx: Editor, session: SessionDep, settings: SettingsDep,
    if_match: IfMatch = None,
) -> JSONResponse:
    """Replace a pipeline's whole definition; the same body twice changes nothing the second time."""
    root = settings.resolved_storage_root
    return _respond(service.replace_pipeline(session=session, ctx=ctx, pipeline_id=pipeline_id, spec=body,
                                             if_match=if_match, storage_root=root), root)


@router.patch("/{pipeline_id}", operation_id="patch_pipeline", response_model=PipelineRead)
def patch_pipeline(
    pipeline_id: uuid.UUID, body: PatchBody, ctx: Editor, session: SessionDep, settings: SettingsDep,
    if_match: IfMatch = None,
) -> JSONResponse:
    """Change some fields of a pipeline (JSON Merge Patch)."""
    root = settings.resolved_storage_root
    return _respond(service.patch_pipeline(session=session, ctx=ctx, pipeline_id=pipeline_id, patch=body,
                                           if_match=if_match, storage_root=root), root)


@router.delete("/{pipeline_id}", operation_id="delete_pipeline", status_code=204)
def delete_pipeline(
    pipeline_id: uuid.UUID, request: Request, ctx: Editor, session: SessionDep, if_match: IfMatch = None
) -> Response:
    """Delete a pipeline (its Delta table is left in place; its mirrored consumer group is deleted)."""
    service.delete_pipeline(session=session, ctx=ctx, pipeline_id=pipeline_id, if_match=if_match,
                            dispatcher=request.app.state.dispatcher)
    return Response(status_code=204)


@router.post("/{pipeline_id}/pause", operation_id="pause_pipeline", response_model=PipelineRead)
def pause_pipeline(
    pipeline_id: uuid.UUID, ctx: Editor, session: SessionDep, settings: SettingsDep, if_match: IfMatch = None
) -> JSONResponse:
    """Pause a pipeline: its schedule stops firing; pausing a paused pipeline changes nothing."""
    return _respond(service.set_state(session=session, ctx=ctx, pipeline_id=pipeline_id, state="paused",
                                      if_match=if_match), settings.resolved_storage_root)


@router.post("/{pipeline_id}/resume", operation_id="resume_pipeline", response_model=PipelineRead)
def resume_pipeline(
    pipeline_id: uuid.UUID, ctx: Editor, session: SessionDep, settings: SettingsDep, if_match: IfMatch = None
) -> JSONResponse:
    """Resume a paused pipeline; its schedule fires again from now."""
    return _respond(service.set_state(session=session, ctx=ctx, pipeline_id=pipeline_id, state="active",
                                      if_match=if_match), settings.resolved_storage_root)
