"""Runs: trigger one now, list a pipeline's runs, read one with its plan and log, cancel."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Depends, Response
from fastapi.responses import JSONResponse, PlainTextResponse

from api.core.deps import Editor, SessionDep, SettingsDep, Viewer
from api.core.idempotency import IdempotencyDep
from api.core.pagination import Page, PageParams, page_params
from api.runs import service
from api.runs.schemas import RunRead, RunState
from api.tenancy.quotas import QuotaLimits

router = APIRouter(tags=["runs"])

RunPage = Annotated[PageParams, Depends(page_params(("created_at", "seq", "state"), default="-created_at"))]


@router.post("/pipelines/{pipeline_id}/runs", operation_id="trigger_run", status_code=202, response_model=RunRead)
def trigger_run(
    pipeline_id: uuid.UUID, response: Response, ctx: Editor, session: SessionDep,
    settings: SettingsDep, idem: IdempotencyDep,
) -> RunRead | JSONResponse:
    """Run a pipeline now; 409 while it has an active run, 429 over the tenant's runs-per-hour quota."""
    return idem.respond(session, f"tenant:{ctx.tenant_id}", lambda: service.to_read(service.trigger_run(
        session=session, ctx=ctx, pipeline_id=pipeline_id, quotas=QuotaLimits.defaults(settings),
    )), response=response, status_code=202)


@router.get("/pipelines/{pipeline_id}/runs", operation_id="list_runs", response_model=Page[RunRead])
def list_runs(
    pipeline_id: uuid.UUID, ctx: Viewer, session: SessionDep, page: RunPage, state: RunState | None = None
) -> Page[RunRead]:
    """List a pipeline's runs, newest first, optionally by state."""
    rows, total = service.list_runs(session=session, ctx=ctx, pipeline_id=pipeline_id, page=page, state=state)
    return Page(items=[service.to_read(r) for r in rows], total=total, limit=page.limit, offset=page.offset)


@router.get("/runs/{run_id}", operation_id="get_run", response_model=RunRead)
def get_run(run_id: uuid.UUID, ctx: Viewer, session: SessionDep) -> RunRead:
    """Read one run: its plan per partition, counts, timings, error, Delta version and log tail."""
    run = service.get_run(session=session, ctx=ctx, run_id=run_id)
    return service.to_read(run, log=service.log_text(session, run.id))


@router.get("/runs/{run_id}/log", operation_id="get_run_log", response_class=PlainTextResponse)
def get_run_log(run_id: uuid.UUID, ctx: Viewer, session: SessionDep) -> PlainTextResponse:
    """The run's whole log as text (secrets redacted before it was stored)."""
    run = service.get_run(session=session, ctx=ctx, run_id=run_id)
    return PlainTextResponse(service.log_text(session, run.id))


@router.post("/runs/{run_id}/cancel", operation_id="cancel_run", response_model=RunRead)
def cancel_run(run_id: uuid.UUID, ctx: Editor, session: SessionDep) -> RunRead:
    """Cancel a run: a queued one at once, a running one as soon as its worker stops the job."""
    return service.to_read(service.cancel_run(session=session, ctx=ctx, run_id=run_id))
