"""What the portal's edit and delete forms of connections and pipelines share: an edit saved over
someone else's change becomes a conflict shown with both (who changed it, and where the saved object
and the form differ), and a delete needs the name typed again and the ETag its page showed."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from fastapi.responses import Response

from api.core.errors import Conflict, PreconditionFailed, ValidationFailed
from api.portal import audit, pages, views
from api.portal.auth import SignedIn
from api.portal.forms import DeleteForm
from api.portal.views import FormErrors


@dataclass(frozen=True)
class EditConflict:
    """Someone saved the object after the form was opened: who, and where the saved one and the form differ."""

    change: audit.Change | None
    differences: list[views.Difference]


def edit_conflict(caller: SignedIn, resource_type: str, ident: uuid.UUID, saved: Mapping[str, Any],
                  yours: Mapping[str, Any]) -> EditConflict:
    return EditConflict(change=audit.last_change(caller, resource_type, ident),
                        differences=views.differences(saved, yours))


def delete_confirmed(caller: SignedIn, form: DeleteForm, *, name: str, delete: Callable[[str | None], None],
                     page_again: Callable[[int, FormErrors], Response], done: str) -> Response:
    """``delete`` (given the If-Match) what ``form`` confirms by ``name``, and go to ``done``; refused
    (a wrong name, in use, changed since), the confirmation page again with the reason."""
    try:
        form.check(name)
        delete(form.etag or None)
    except (ValidationFailed, Conflict, PreconditionFailed) as exc:
        caller.start_over(exc)
        return page_again(exc.status, form.errors(exc))
    return pages.redirect(done)
