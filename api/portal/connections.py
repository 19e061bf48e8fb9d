"""The portal's connection pages: the list with the new-connection form, one connection (its settings,
the state of its stored credentials, the pipelines using it, the connection test and the rotation of
its credentials), the edit form, and the delete confirmation."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Form
from fastapi.responses import Response

from api.connections import probe
from api.connections import service as connections
from api.connections.models import Connection
from api.connections.schemas import ConnectionRead, ConnectionSpec, ConnectionTestResult
from api.connections.secret_payloads import credentials_statuses
from api.connections.test_slots import connection_test_slot
from api.core.errors import (
    Conflict,
    DomainError,
    Forbidden,
    NotFound,
    PreconditionFailed,
    Unauthorized,
    ValidationFailed,
)
from api.core.pagination import PageParams
from api.pipelines import service as pipelines
from api.portal import audit, pages
from api.portal.auth import Editor, SignedIn, Viewer, portal_router
from api.portal.edits import EditConflict, delete_confirmed, edit_conflict
from api.portal.forms import ConnectionForm, DeleteForm, RotationForm
from api.portal.views import FormErrors
from api.tenancy.quotas import QuotaExceeded, QuotaLimits

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
    """The tenant's connections by name (the list, and the pipeline form's choices)."""
    rows, _ = connections.list_connections(session=caller.session, ctx=caller.ctx,
                                           page=PageParams(limit=CHOICES_SHOWN, offset=0, sort="name"))
    return rows


def _public(conn: ConnectionRead | ConnectionSpec) -> dict[str, Any]:
    """What a connection's form shows of it (no credentials): the same shape saved or sent."""
    ssl, registry = conn.ssl, conn.schema_registry
    return {
        "name": conn.name, "bootstrap_servers": conn.bootstrap_servers, "security_protocol": conn.security_protocol,
        "sasl_mechanism": conn.sasl_mechanism, "options": dict(conn.options),
        "ssl": None if ssl is None else {"ca_pem": ssl.ca_pem, "certificate_pem": ssl.certificate_pem,
                                         "endpoint_identification": ssl.endpoint_identification},
        "schema_registry": None if registry is None else {"url": registry.url, "ca_pem": registry.ca_pem,
                                                          "endpoint_identification": registry.endpoint_identification},
    }


def _read(caller: SignedIn, ident: uuid.UUID) -> tuple[Connection, ConnectionRead]:
    conn = connections.get_connection(session=caller.session, ctx=caller.ctx, connection_id=ident)
    return conn, connections.read_with_status(conn, caller.secrets)


def _connections_page(caller: SignedIn, *, status: int = 200, form: ConnectionForm | None = None,
                      errors: FormErrors | None = None) -> Response:
    rows = all_connections(caller)
    return caller.render("connections.html", status=status, connections=rows,
                         credentials=credentials_statuses(rows, caller.secrets),
                         values=(form or ConnectionForm.initial()).values(), errors=errors or FormErrors())


@router.get("/connections")
def connections_page(caller: Viewer) -> Response:
    """The tenant's connections and, for an editor, the new-connection form."""
    return _connections_page(caller)


@router.post("/connections")
def create_connection(caller: Editor, form: Annotated[ConnectionForm, Form()]) -> Response:
    """Save a connection; its credentials go to the secret store."""
    try:
        created = connections.create_connection(session=caller.session, ctx=caller.ctx, secrets=caller.secrets,
                                                spec=form.spec(), quotas=QuotaLimits.defaults(caller.settings),
                                                egress=caller.settings.egress_policy,
                                                max_fetch_bytes=caller.settings.kafka_max_fetch_bytes)
    except (ValidationFailed, Conflict, QuotaExceeded) as exc:
        caller.start_over(exc)
        return _connections_page(caller, status=exc.status, form=form, errors=form.errors(exc))
    return pages.redirect(f"/portal/connections/{created.id}?notice=connection-created")


def _connection_page(caller: SignedIn, ident: uuid.UUID, *, status: int = 200, test: ProbeOutcome | None = None,
                     rotation: RotationForm | None = None, rotation_errors: FormErrors | None = None) -> Response:
    conn, read = _read(caller, ident)
    return caller.render("connection.html", status=status, conn=read, etag=connections.etag(conn),
                         users=pipelines.pipelines_using(session=caller.session, ctx=caller.ctx, connection_id=conn.id),
                         change=audit.last_change(caller, "connection", conn.id), test=test,
                         rotation=(rotation or RotationForm()).values(),
                         rotation_errors=rotation_errors or FormErrors())


@router.get("/connections/{connection_id}")
def connection_page(caller: Viewer, connection_id: str) -> Response:
    """A connection: its settings, its stored credentials, the pipelines using it; for an editor, the
    test, the rotation of its credentials, edit and delete."""
    return _connection_page(caller, pages.parse_id(connection_id, "Connection"))


@router.post("/connections/{connection_id}/test")
def test_connection(caller: Editor, connection_id: str) -> Response:
    """Test a connection against its cluster (and schema registry) and show what it saw."""
    ident = pages.parse_id(connection_id, "Connection")
    try:
        with connection_test_slot(caller.ctx, caller.settings):
            result = probe.probe_connection(session=caller.session, ctx=caller.ctx, secrets=caller.secrets,
                                            connection_id=ident, timeout_s=caller.settings.kafka_timeout_s,
                                            egress=caller.settings.egress_policy)
    except (Unauthorized, Forbidden, NotFound):
        raise
    except DomainError as exc:
        caller.start_over(exc)
        failed = ProbeOutcome(id=ident, ok=False, title=exc.title, detail=exc.detail)
        return _connection_page(caller, ident, test=failed)
    return _connection_page(caller, ident, test=ProbeOutcome(id=ident, ok=True, result=result))


@router.post("/connections/{connection_id}/rotate")
def rotate_credentials(caller: Editor, connection_id: str, form: Annotated[RotationForm, Form()]) -> Response:
    """Write new credentials (a new version of the connection's secret), as a PATCH of them does."""
    ident = pages.parse_id(connection_id, "Connection")
    _, read = _read(caller, ident)
    try:
        connections.patch_connection(session=caller.session, ctx=caller.ctx, secrets=caller.secrets,
                                     connection_id=ident, patch=form.to_patch(read), if_match=form.etag or None,
                                     egress=caller.settings.egress_policy,
                                     max_fetch_bytes=caller.settings.kafka_max_fetch_bytes)
    except (ValidationFailed, PreconditionFailed) as exc:
        caller.start_over(exc)
        return _connection_page(caller, ident, status=exc.status, rotation=form, rotation_errors=form.errors(exc))
    return pages.redirect(f"/portal/connections/{ident}?notice=rotated")


def _edit_page(caller: SignedIn, read: ConnectionRead, form: ConnectionForm, *, status: int = 200,
               errors: FormErrors | None = None, conflict: EditConflict | None = None) -> Response:
    return caller.render("connection_edit.html", status=status, conn=read, values=form.values(),
                         errors=errors or FormErrors(), conflict=conflict)


@router.get("/connections/{connection_id}/edit")
def edit_connection_form(caller: Editor, connection_id: str) -> Response:
    """The edit form of a connection (credentials write-only: empty inputs keep them)."""
    conn, read = _read(caller, pages.parse_id(connection_id, "Connection"))
    return _edit_page(caller, read, ConnectionForm.of(read, connections.etag(conn)))


@router.post("/connections/{connection_id}/edit")
def edit_connection(caller: Editor, connection_id: str, form: Annotated[ConnectionForm, Form()]) -> Response:
    """Save an edited connection, as ``PUT /connections/{id}`` with If-Match does; a change saved by
    someone else since the form was shown is a conflict that shows both."""
    ident = pages.parse_id(connection_id, "Connection")
    conn, read = _read(caller, ident)
    before = connections.etag(conn)
    spec: ConnectionSpec | None = None
    try:
        spec = form.spec(stored=read)
        saved = connections.replace_connection(session=caller.session, ctx=caller.ctx, secrets=caller.secrets,
                                               connection_id=ident, spec=spec, if_match=form.etag or None,
                                               egress=caller.settings.egress_policy,
                                               max_fetch_bytes=caller.settings.kafka_max_fetch_bytes)
    except (ValidationFailed, Conflict, PreconditionFailed) as exc:
        caller.start_over(exc)
        conn, read = _read(caller, ident)
        if isinstance(exc, PreconditionFailed) and spec is not None:
            conflict = edit_conflict(caller, "connection", ident, _public(read), _public(spec))
            # Saving again now replaces what is saved with this form: a choice made knowing both.
            retry = form.model_copy(update={"etag": connections.etag(conn)})
            return _edit_page(caller, read, retry, status=exc.status, conflict=conflict)
        return _edit_page(caller, read, form, status=exc.status, errors=form.errors(exc))
    notice = "connection-saved" if connections.etag(saved) != before else "unchanged"
    return pages.redirect(f"/portal/connections/{ident}?notice={notice}")


def _delete_page(caller: SignedIn, ident: uuid.UUID, *, status: int = 200,
                 errors: FormErrors | None = None) -> Response:
    conn, read = _read(caller, ident)
    return caller.render("connection_delete.html", status=status, conn=read, etag=connections.etag(conn),
                         users=pipelines.pipelines_using(session=caller.session, ctx=caller.ctx, connection_id=conn.id),
                         errors=errors or FormErrors())


@router.get("/connections/{connection_id}/delete")
def delete_connection_form(caller: Editor, connection_id: str) -> Response:
    """What deleting a connection loses, and the confirmation (or the pipelines that keep it)."""
    return _delete_page(caller, pages.parse_id(connection_id, "Connection"))


@router.post("/connections/{connection_id}/delete")
def delete_connection(caller: Editor, connection_id: str, form: Annotated[DeleteForm, Form()]) -> Response:
    """Delete a connection and every version of its credentials, as ``DELETE /connections/{id}`` does."""
    ident = pages.parse_id(connection_id, "Connection")
    conn = connections.get_connection(session=caller.session, ctx=caller.ctx, connection_id=ident)

    def delete(if_match: str | None) -> None:
        connections.delete_connection(session=caller.session, ctx=caller.ctx, secrets=caller.secrets,
                                      connection_id=ident, if_match=if_match)
        caller.kafka_clients.forget(ident)

    return delete_confirmed(caller, form, name=conn.name, delete=delete, done="/portal/connections?notice=connection-deleted",
                            page_again=lambda status, errors: _delete_page(caller, ident, status=status, errors=errors))
