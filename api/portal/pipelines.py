"""The portal's pipeline pages: the list, one pipeline with its offsets and runs, the new-pipeline
form, and pause, resume and run-now."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, fields
from typing import Annotated, Any

from fastapi import Form, Query
from fastapi.responses import Response

from api.connections import service as connections
from api.connections.models import Connection
from api.core.errors import Conflict, ValidationFailed
from api.core.pagination import PageParams
from api.offsets import service as offsets
from api.offsets.schemas import OffsetsRead
from api.pipelines import service as pipelines
from api.pipelines.models import Pipeline
from api.pipelines.schemas import PipelineRead
from api.portal import pages, views
from api.portal.auth import Editor, SignedIn, Viewer, portal_router
from api.portal.connections import all_connections
from api.portal.forms import PipelineFilters, PipelineForm
from api.runs import service as runs
from api.runs.states import TERMINAL_STATES

router = portal_router()

PAGE_SIZE = 20
RUNS_SHOWN = 20


@dataclass(frozen=True)
class PipelineView:
    """A pipeline as its page (and its replay page) shows it: the definition, its source, its offsets."""

    pipeline: Pipeline
    read: PipelineRead
    definition_json: str
    connection: Connection
    offsets: OffsetsRead
    offsets_etag: str
    max_lag: int

    def context(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def pipeline_view(caller: SignedIn, pipeline_id: uuid.UUID) -> PipelineView:
    pipeline = pipelines.get_pipeline(session=caller.session, ctx=caller.ctx, pipeline_id=pipeline_id)
    table, etag = offsets.read_offsets(session=caller.session, ctx=caller.ctx, pipeline_id=pipeline.id,
                                       client_factory=caller.kafka_clients.client)
    read = pipelines.to_read(pipeline, caller.settings.resolved_storage_root)
    definition = read.model_dump(mode="json", by_alias=True, exclude={"id", "status", "created_at", "updated_at"})
    return PipelineView(
        pipeline=pipeline, read=read, definition_json=json.dumps(definition, indent=2),
        connection=connections.get_connection(session=caller.session, ctx=caller.ctx,
                                              connection_id=pipeline.connection_id),
        offsets=table, offsets_etag=etag, max_lag=max((p.lag or 0 for p in table.partitions), default=0),
    )


@router.get("/pipelines")
def pipelines_page(caller: Viewer, filters: Annotated[PipelineFilters, Query()]) -> Response:
    """The tenant's pipelines, filtered and paged, each with its newest run."""
    page = PageParams(limit=PAGE_SIZE, offset=(filters.number - 1) * PAGE_SIZE, sort="name")
    rows, total = pipelines.list_pipelines(session=caller.session, ctx=caller.ctx, page=page,
                                           name_contains=filters.name_contains or None,
                                           state=filters.chosen_state or None)
    newest = runs.newest_runs(session=caller.session, ctx=caller.ctx, pipelines=rows)
    return caller.render("pipelines.html", items=[{"pipeline": row, "last_run": newest.get(row.id)} for row in rows],
                         total=total, page=filters.number, pages=max((total + PAGE_SIZE - 1) // PAGE_SIZE, 1),
                         filters=filters.shown())


def _new_pipeline_page(caller: SignedIn, form: PipelineForm, *, status: int = 200,
                       errors: views.FormErrors | None = None) -> Response:
    return caller.render("pipeline_new.html", status=status, connections=all_connections(caller),
                         values=form.values(), errors=errors or views.FormErrors())


@router.get("/pipelines/new")
def new_pipeline_form(caller: Editor) -> Response:
    """The new-pipeline form."""
    return _new_pipeline_page(caller, PipelineForm.initial())


@router.post("/pipelines/new")
def create_pipeline(caller: Editor, form: Annotated[PipelineForm, Form()]) -> Response:
    """Create a pipeline, or show the form again with each refusal beside its input."""
    try:
        created = pipelines.create_pipeline(session=caller.session, ctx=caller.ctx, spec=form.spec(),
                                            storage_root=caller.settings.resolved_storage_root)
    except (ValidationFailed, Conflict) as exc:
        caller.start_over(exc)
        return _new_pipeline_page(caller, form, status=exc.status, errors=form.errors(exc))
    return pages.redirect(f"/portal/pipelines/{created.id}?notice=created")


@router.get("/pipelines/{pipeline_id}")
def pipeline_page(caller: Viewer, pipeline_id: str) -> Response:
    """A pipeline: its definition, offsets and lag per partition, and its recent runs."""
    view = pipeline_view(caller, pages.parse_id(pipeline_id, "Pipeline"))
    recent, total_runs = runs.list_runs(session=caller.session, ctx=caller.ctx, pipeline_id=view.pipeline.id,
                                        page=PageParams(limit=RUNS_SHOWN, offset=0, sort="-created_at"))
    reads = [runs.to_read(r) for r in recent]
    records, durations = views.run_charts(reads)
    return caller.render("pipeline.html", **view.context(), records_chart=records, duration_chart=durations,
                         runs=reads, total_runs=total_runs, live=any(r.state not in TERMINAL_STATES for r in reads),
                         share=views.share)


def _set_state(caller: SignedIn, pipeline_id: str, state: str, notice: str) -> Response:
    pipeline = pipelines.set_state(session=caller.session, ctx=caller.ctx,
                                   pipeline_id=pages.parse_id(pipeline_id, "Pipeline"), state=state)
    return pages.redirect(f"/portal/pipelines/{pipeline.id}?notice={notice}")


@router.post("/pipelines/{pipeline_id}/pause")
def pause_pipeline(caller: Editor, pipeline_id: str) -> Response:
    """Pause a pipeline: its schedule stops firing."""
    return _set_state(caller, pipeline_id, "paused", "paused")


@router.post("/pipelines/{pipeline_id}/resume")
def resume_pipeline(caller: Editor, pipeline_id: str) -> Response:
    """Resume a paused pipeline."""
    return _set_state(caller, pipeline_id, "active", "resumed")


@router.post("/pipelines/{pipeline_id}/run")
def run_now(caller: Editor, pipeline_id: str) -> Response:
    """Queue a run now and follow it on its page."""
    run = runs.trigger_run(session=caller.session, ctx=caller.ctx, pipeline_id=pages.parse_id(pipeline_id, "Pipeline"),
                           dispatcher=caller.dispatcher)
    return pages.redirect(f"/portal/runs/{run.id}?notice=run-queued")
