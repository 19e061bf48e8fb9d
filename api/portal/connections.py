"""The portal's connections page: the tenant's connections with the state of their stored
credentials, the new-connection form, and a connection test shown on the page."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Annotated

from fastapi import Form
from fastapi.responses import Response

from api.connections import probe
from api.connections import service as connections
from api.connections.models import Connection
from api.connections.schemas import ConnectionTestResult
from api.core.errors import Conflict, DomainError, Forbidden, NotFound, Unauthorized, ValidationFailed
from api.core.pagination import PageParams
from api.portal import pages
from api.portal.auth import Editor, SignedIn, Viewer, portal_router
from api.portal.forms import ConnectionForm
from api.portal.views import FormErrors

router = portal_router()

CHOICES_SHOWN = 500


@dataclass(frozen=True)
class ProbeOutcome:
    """A connection test as the page shows it: what the cluster answered, or why it could not."""

    id: uuid.UUID
    ok: bool
    result: ConnectionTestResult | None = None
    title: str = ""
    detail: str = ""


def all_connections(caller: SignedIn) -> list[Connection]:
    """The tenant's connections by name (the list, and the new-pipeline form's choices)."""
    rows, _ = connections.list_connections(session=caller.session, ctx=caller.ctx,
                                           page=PageParams(limit=CHOICES_SHOWN, offset=0, sort="name"))
    return rows


def _connections_page(caller: SignedIn, *, status: int = 200, form: ConnectionForm | None = None,
                      errors: FormErrors | None = None, test: ProbeOutcome | None = None) -> Response:
    rows = all_connections(caller)
    return caller.render("connections.html", status=status, connections=rows,
                         credentials=connections.credentials_statuses(rows, caller.secrets),
                         values=(form or ConnectionForm.initial()).values(), errors=errors or FormErrors(), test=test)


@router.get("/connections")
def connections_page(caller: Viewer) -> Response:
    """The tenant's connections and, for an editor, the new-connection form."""
    return _connections_page(caller)


@router.post("/connections")
def create_connection(caller: Editor, form: Annotated[ConnectionForm, Form()]) -> Response:
    """Save a connection; its credentials go to the secret store."""
    try:
        connections.create_connection(session=caller.session, ctx=caller.ctx, secrets=caller.secrets,
                                      spec=form.spec())
    except (ValidationFailed, Conflict) as exc:
        caller.start_over(exc)
        return _connections_page(caller, status=exc.status, form=form, errors=form.errors(exc))
    return pages.redirect("/portal/connections?notice=connection-created")


@router.post("/connections/{connection_id}/test")
def test_connection(caller: Editor, connection_id: str) -> Response:
    """Test a connection against its cluster and show what it saw."""
    ident = pages.parse_id(connection_id, "Connection")
    try:
        result = probe.probe_connection(session=caller.session, ctx=caller.ctx, secrets=caller.secrets,
                                        connection_id=ident, timeout_s=caller.settings.kafka_timeout_s)
    except (Unauthorized, Forbidden, NotFound):
        raise
    except DomainError as exc:
        caller.start_over(exc)
        return _connections_page(caller, test=ProbeOutcome(id=ident, ok=False, title=exc.title, detail=exc.detail))
    return _connections_page(caller, test=ProbeOutcome(id=ident, ok=True, result=result))
