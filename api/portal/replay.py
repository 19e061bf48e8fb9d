"""The portal's replay page: move a pipeline's committed offsets in any of the API's ways, in two steps,
a dry run that shows what would change and then applying exactly that change (refused if the offsets
moved in between)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Form
from fastapi.responses import Response

from api.core.errors import DomainError, Forbidden, NotFound, Unauthorized
from api.offsets import service as offsets
from api.offsets.schemas import OffsetsChangeResult
from api.portal import pages
from api.portal.auth import Editor, SignedIn, portal_router
from api.portal.forms import ReplayForm
from api.portal.pipelines import PipelineView, pipeline_view
from api.portal.views import FormErrors

router = portal_router()


def _replay_page(caller: SignedIn, view: PipelineView, form: ReplayForm, *, chosen: set[tuple[str, int]],
                 status: int = 200, errors: FormErrors | None = None,
                 preview: OffsetsChangeResult | None = None, confirm_patch: str = "") -> Response:
    return caller.render("replay.html", status=status, **view.context(), values=form.values(), chosen=chosen,
                         errors=errors or FormErrors(), preview=preview, confirm_patch=confirm_patch,
                         confirm_etag=preview.etag if preview else "")


@router.get("/pipelines/{pipeline_id}/replay")
def replay_form(caller: Editor, pipeline_id: str) -> Response:
    """The replay form, every partition chosen."""
    view = pipeline_view(caller, pages.parse_id(pipeline_id, "Pipeline"))
    return _replay_page(caller, view, ReplayForm.initial(),
                        chosen={(p.topic, p.partition) for p in view.offsets.partitions})


# The form has an offset input per partition and a checkbox per partition chosen: a topic of a few
# hundred partitions passes Starlette's default of 1000 fields.
@router.post("/pipelines/{pipeline_id}/replay", form_limits={"max_fields": 5000})
def replay(caller: Editor, pipeline_id: str, form: Annotated[ReplayForm, Form()]) -> Response:
    """Preview a change of offsets as a dry run, or apply the change previewed."""
    ident = pages.parse_id(pipeline_id, "Pipeline")
    try:
        patch = form.to_patch()
        result = offsets.change_offsets(
            session=caller.session, ctx=caller.ctx, pipeline_id=ident, body=patch, if_match=form.if_match,
            client_factory=caller.kafka_clients.client,
            dry_run=form.dry_run if patch is None else None)
    except (Unauthorized, Forbidden, NotFound):
        raise
    except DomainError as exc:
        caller.start_over(exc)
        view = pipeline_view(caller, ident)
        return _replay_page(caller, view, form, chosen=set(form.chosen()), status=exc.status,
                            errors=form.errors_beside(exc, view.offsets.partitions))
    if form.applies:
        return pages.redirect(f"/portal/pipelines/{pipeline_id}?notice=replayed")
    return _replay_page(caller, pipeline_view(caller, ident), form, chosen=set(form.chosen()), preview=result,
                        confirm_patch=ReplayForm.confirmation(patch))
