"""The portal's run page: a run's state, plan per partition and log, refreshing while it is active."""

from __future__ import annotations

from fastapi.responses import Response

from api.pipelines import service as pipelines
from api.portal import pages
from api.portal.auth import Viewer, portal_router
from api.runs import service as runs
from api.runs.states import TERMINAL_STATES

router = portal_router()


@router.get("/runs/{run_id}")
def run_page(caller: Viewer, run_id: str) -> Response:
    """A run: its state, what it planned and read per partition, and its log."""
    run = runs.get_run(session=caller.session, ctx=caller.ctx, run_id=pages.parse_id(run_id, "Run"))
    read = runs.to_read(run, log=runs.log_text(caller.session, run.id))
    pipeline = pipelines.get_pipeline(session=caller.session, ctx=caller.ctx, pipeline_id=run.pipeline_id)
    return caller.render("run.html", run=read, pipeline=pipeline, live=read.state not in TERMINAL_STATES)
