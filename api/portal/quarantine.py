"""The portal's quarantine page: reprocess a pipeline's quarantined records of a time window into its
table, counted first by a dry run, as ``POST /pipelines/{id}/quarantine/reprocess`` does."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import Form
from fastapi.responses import Response

from api.core.errors import DomainError, Forbidden, NotFound, Unauthorized
from api.pipelines import service as pipelines
from api.portal import pages
from api.portal.auth import Editor, SignedIn, portal_router
from api.portal.forms import ReprocessForm
from api.portal.views import FormErrors
from api.quarantine import service as quarantine
from api.tenancy.quotas import QuotaLimits

router = portal_router()


def _page(caller: SignedIn, pipeline_id: uuid.UUID, form: ReprocessForm, *, status: int = 200,
          errors: FormErrors | None = None) -> Response:
    pipeline = pipelines.get_pipeline(session=caller.session, ctx=caller.ctx, pipeline_id=pipeline_id)
    return caller.render("quarantine.html", status=status, pipeline=pipeline, values=form.values(),
                         errors=errors or FormErrors(), reprocessable=quarantine.reprocessable(pipeline))


@router.get("/pipelines/{pipeline_id}/quarantine")
def quarantine_form(caller: Editor, pipeline_id: str) -> Response:
    """The reprocess form, its window open on both ends."""
    return _page(caller, pages.parse_id(pipeline_id, "Pipeline"), ReprocessForm())


@router.post("/pipelines/{pipeline_id}/quarantine")
def reprocess(caller: Editor, pipeline_id: str, form: Annotated[ReprocessForm, Form()]) -> Response:
    """Queue the reprocess (or its dry run) and follow it on its run's page."""
    ident = pages.parse_id(pipeline_id, "Pipeline")
    try:
        run = quarantine.reprocess_quarantine(session=caller.session, ctx=caller.ctx, pipeline_id=ident,
                                              request=form.spec(), quotas=QuotaLimits.defaults(caller.settings))
    except (Unauthorized, Forbidden, NotFound):
        raise
    except DomainError as exc:
        caller.start_over(exc)
        return _page(caller, ident, form, status=exc.status, errors=form.errors(exc))
    return pages.redirect(f"/portal/runs/{run.id}?notice=reprocess-queued")
