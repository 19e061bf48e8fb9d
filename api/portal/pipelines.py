"""The portal's pipeline pages: the list, one pipeline with its offsets, charts and runs, the new and
edit forms, the delete confirmation, and pause, resume and run-now."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, fields
from typing import Annotated, Any

from fastapi import Form, Query
from fastapi.responses import Response

from api.connections import service as connections
from api.connections.models import Connection
from api.core.errors import Conflict, PreconditionFailed, ValidationFailed
from api.core.pagination import PageParams
from api.maintenance import service as maintenance
from api.offsets import service as offsets
from api.offsets.schemas import OffsetsRead
from api.pipelines import service as pipelines
from api.pipelines.definition import as_written, definition_of
from api.pipelines.maintenance_policy import RetentionFloor
from api.pipelines.models import Pipeline
from api.pipelines.schemas import PipelineRead, PipelineSpec
from api.portal import charts, pages, views
from api.portal.auth import Editor, SignedIn, Viewer, portal_router
from api.portal.connections import all_connections
from api.portal.edits import EditConflict, delete_confirmed, edit_conflict
from api.portal.forms import DeleteForm, PipelineFilters, PipelineForm
from api.quarantine import service as quarantine
from api.runs import service as runs
from api.runs.schemas import RunRead
from api.runs.states import TERMINAL_STATES
from api.tenancy.quotas import QuotaExceeded, QuotaLimits

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
    return caller.render("pipelines.html", items=[{"pipeline": row, "schedule": definition_of(row).schedule,
                                                   "last_run": newest.get(row.id), "table": pipelines.table_health_of(row)}
                                                  for row in rows],
                         total=total, page=filters.number, pages=max((total + PAGE_SIZE - 1) // PAGE_SIZE, 1),
                         filters=filters.shown())


def _definition(pipeline: PipelineRead | PipelineSpec) -> dict[str, Any]:
    """A pipeline's definition as written (what its form edits), saved or sent."""
    return pipeline.model_dump(mode="json", by_alias=True,
                               include={"name", "source", "target", "schedule", "state", "contract"})


def _firings(pipeline: Pipeline) -> list[views.Firing]:
    """When the pipeline's schedule fires next: from the slot the scheduler keeps while it is active,
    from now (a resume) while it is paused."""
    return views.next_fires(definition_of(pipeline).schedule,
                            first=pipeline.next_run_at if pipeline.state == "active" else None)


def _form_page(caller: SignedIn, form: PipelineForm, *, pipeline: Pipeline | None = None, status: int = 200,
               errors: views.FormErrors | None = None, conflict: EditConflict | None = None) -> Response:
    """The pipeline form: new, or (with ``pipeline``) the edit of one, with its schedule's next firings."""
    firings = [] if pipeline is None else _firings(pipeline)
    return caller.render("pipeline_form.html", status=status, connections=all_connections(caller), pipeline=pipeline,
                         values=form.values(), errors=errors or views.FormErrors(), conflict=conflict, firings=firings)


@router.get("/pipelines/new")
def new_pipeline_form(caller: Editor) -> Response:
    """The new-pipeline form."""
    return _form_page(caller, PipelineForm.initial())


@router.post("/pipelines/new")
def create_pipeline(caller: Editor, form: Annotated[PipelineForm, Form()]) -> Response:
    """Create a pipeline, or show the form again with each refusal beside its input."""
    try:
        created = pipelines.create_pipeline(session=caller.session, ctx=caller.ctx, spec=form.spec(),
                                            storage_root=caller.settings.resolved_storage_root,
                                            quotas=QuotaLimits.defaults(caller.settings),
                                            retention=RetentionFloor.of(caller.settings))
    except (ValidationFailed, Conflict, QuotaExceeded) as exc:
        caller.start_over(exc)
        return _form_page(caller, form, status=exc.status, errors=form.errors(exc))
    return pages.redirect(f"/portal/pipelines/{created.id}?notice=created")


@router.get("/pipelines/{pipeline_id}/edit")
def edit_pipeline_form(caller: Editor, pipeline_id: str) -> Response:
    """The edit form of a pipeline, with its schedule's next firings."""
    pipeline = pipelines.get_pipeline(session=caller.session, ctx=caller.ctx,
                                      pipeline_id=pages.parse_id(pipeline_id, "Pipeline"))
    read = pipelines.to_read(pipeline, caller.settings.resolved_storage_root)
    return _form_page(caller, PipelineForm.of(read, pipelines.etag(pipeline)), pipeline=pipeline)


@router.post("/pipelines/{pipeline_id}/edit")
def edit_pipeline(caller: Editor, pipeline_id: str, form: Annotated[PipelineForm, Form()]) -> Response:
    """Save an edited pipeline, as ``PUT /pipelines/{id}`` with If-Match does; a change saved by someone
    else since the form was shown is a conflict that shows both."""
    ident = pages.parse_id(pipeline_id, "Pipeline")
    root = caller.settings.resolved_storage_root
    pipeline = pipelines.get_pipeline(session=caller.session, ctx=caller.ctx, pipeline_id=ident)
    before = pipelines.etag(pipeline)
    spec: PipelineSpec | None = None
    try:
        spec = form.spec(stored=as_written(pipeline))
        saved = pipelines.replace_pipeline(session=caller.session, ctx=caller.ctx, pipeline_id=ident, spec=spec,
                                           if_match=form.etag or None, storage_root=root,
                                           quotas=QuotaLimits.defaults(caller.settings),
                                           retention=RetentionFloor.of(caller.settings))
    except (ValidationFailed, Conflict, PreconditionFailed, QuotaExceeded) as exc:
        caller.start_over(exc)
        pipeline = pipelines.get_pipeline(session=caller.session, ctx=caller.ctx, pipeline_id=ident)
        if isinstance(exc, PreconditionFailed) and spec is not None:
            conflict = edit_conflict(caller, "pipeline", ident, _definition(pipelines.to_read(pipeline, root)),
                                     _definition(spec))
            # Saving again now replaces what is saved with this form: a choice made knowing both.
            retry = form.model_copy(update={"etag": pipelines.etag(pipeline)})
            return _form_page(caller, retry, pipeline=pipeline, status=exc.status, conflict=conflict)
        return _form_page(caller, form, pipeline=pipeline, status=exc.status, errors=form.errors(exc))
    notice = "saved" if pipelines.etag(saved) != before else "unchanged"
    return pages.redirect(f"/portal/pipelines/{ident}?notice={notice}")


def _recent_runs(caller: SignedIn, pipeline: Pipeline, limit: int = RUNS_SHOWN) -> tuple[list[RunRead], int]:
    """The pipeline's newest runs, newest first, and how many it has."""
    recent, total = runs.list_runs(session=caller.session, ctx=caller.ctx, pipeline_id=pipeline.id,
                                   page=PageParams(limit=limit, offset=0, sort="-created_at"))
    return [runs.to_read(r) for r in recent], total


@router.get("/pipelines/{pipeline_id}")
def pipeline_page(caller: Viewer, pipeline_id: str) -> Response:
    """A pipeline: its definition and next firings, its Delta table's health and maintenance, offsets and
    lag per partition, charts of its recent runs, and the runs."""
    view = pipeline_view(caller, pages.parse_id(pipeline_id, "Pipeline"))
    reads, total_runs = _recent_runs(caller, view.pipeline)
    oldest_first = list(reversed(reads))
    pipeline = view.pipeline
    table = (maintenance.get_status(session=caller.session, ctx=caller.ctx, pipeline_id=pipeline.id,
                                    settings=caller.settings) if view.read.target.type == "delta" else None)
    return caller.render(
        "pipeline.html", **view.context(), table=table, runs=reads, total_runs=total_runs, share=views.share,
        records_chart=charts.records_chart(oldest_first), duration_chart=charts.duration_chart(oldest_first),
        lag_chart=charts.lag_chart(oldest_first), live=any(r.state not in TERMINAL_STATES for r in reads),
        firings=_firings(pipeline), reprocessable=quarantine.reprocessable(pipeline),
    )


def _delete_page(caller: SignedIn, ident: uuid.UUID, *, status: int = 200,
                 errors: views.FormErrors | None = None) -> Response:
    view = pipeline_view(caller, ident)
    newest, total_runs = _recent_runs(caller, view.pipeline, limit=1)
    active = newest[0] if newest and newest[0].state not in TERMINAL_STATES else None
    return caller.render("pipeline_delete.html", status=status, **view.context(), etag=pipelines.etag(view.pipeline),
                         total_runs=total_runs, active=active, errors=errors or views.FormErrors(),
                         committed=sum(1 for p in view.offsets.partitions if p.committed is not None),
                         windows=sum(1 for p in view.offsets.partitions if p.replay))


@router.get("/pipelines/{pipeline_id}/delete")
def delete_pipeline_form(caller: Editor, pipeline_id: str) -> Response:
    """What deleting a pipeline loses and what it keeps, and the confirmation."""
    return _delete_page(caller, pages.parse_id(pipeline_id, "Pipeline"))


@router.post("/pipelines/{pipeline_id}/delete")
def delete_pipeline(caller: Editor, pipeline_id: str, form: Annotated[DeleteForm, Form()]) -> Response:
    """Delete a pipeline with its runs and offsets, as ``DELETE /pipelines/{id}`` with If-Match does."""
    ident = pages.parse_id(pipeline_id, "Pipeline")
    pipeline = pipelines.get_pipeline(session=caller.session, ctx=caller.ctx, pipeline_id=ident)
    return delete_confirmed(
        caller, form, name=pipeline.name, done="/portal/pipelines?notice=pipeline-deleted",
        delete=lambda if_match: pipelines.delete_pipeline(session=caller.session, ctx=caller.ctx, pipeline_id=ident,
                                                          if_match=if_match),
        page_again=lambda status, errors: _delete_page(caller, ident, status=status, errors=errors))


def _set_state(caller: SignedIn, pipeline_id: str, state: str, notice: str) -> Response:
    pipeline = pipelines.set_state(session=caller.session, ctx=caller.ctx,
                                   pipeline_id=pages.parse_id(pipeline_id, "Pipeline"), state=state,
                                   quotas=QuotaLimits.defaults(caller.settings))
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
                           quotas=QuotaLimits.defaults(caller.settings))

    return pages.redirect(f"/portal/runs/{run.id}?notice=run-queued")
