"""``/connections``: a tenant's Kafka clusters, their schema registries, and how to reach them."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Query, Request, Response
from fastapi.responses import JSONResponse

from api.connections import probe, service
from api.connections.clients import KafkaClientCache
from api.connections.models import Connection
from api.connections.schemas import ConnectionRead, ConnectionSpec, ConnectionTestResult
from api.connections.secret_payloads import credentials_statuses
from api.connections.test_slots import connection_test_slot
from api.core.deps import Editor, IfMatch, SessionDep, SettingsDep, Viewer
from api.core.http import resource_headers
from api.core.idempotency import IdempotencyDep
from api.core.pagination import Page, PageParams, page_params
from api.secrets.deps import SecretsDep
from api.secrets.store import SecretStore
from api.tenancy.quotas import QuotaLimits

router = APIRouter(prefix="/connections", tags=["connections"])

ConnectionPage = Annotated[PageParams, Depends(page_params(("created_at", "updated_at", "name")))]
PatchBody = Annotated[dict[str, Any], Body(
    description="JSON Merge Patch (RFC 7396) of the connection; write-only fields: omitted keeps, null removes",
    media_type="application/merge-patch+json",
)]


def _read(conn: Connection, secrets: SecretStore, response: Response, *, created: bool = False) -> ConnectionRead:
    resource_headers(response, etag=service.etag(conn), location=f"/connections/{conn.id}" if created else None)
    return service.read_with_status(conn, secrets)


@router.post("", operation_id="create_connection", status_code=201, response_model=ConnectionRead)
def create_connection(
    body: ConnectionSpec, response: Response, ctx: Editor, session: SessionDep, secrets: SecretsDep,
    settings: SettingsDep, idem: IdempotencyDep,
) -> ConnectionRead | JSONResponse:
    """Register a Kafka connection; its credentials go to the secret store, never the database."""
    return idem.respond(session, f"tenant:{ctx.tenant_id}", lambda: _read(
        service.create_connection(session=session, ctx=ctx, secrets=secrets, spec=body,
                                  quotas=QuotaLimits.defaults(settings), egress=settings.egress_policy,
                                  max_fetch_bytes=settings.kafka_max_fetch_bytes), secrets, response,
        created=True,

    ), response=response, status_code=201)


# Both tests are editor+: they make Inlet open outbound connections (to any host:port, for the body
# variant) and present stored credentials to a cluster, which a read-only role must not trigger.
# ":test" is a custom method on the collection (AIP-136 style): "/connections/test" would sit in
# the "/connections/{connection_id}" space and GET/PUT on it would answer as if "test" were an id.
_TEST_RESPONSES: dict[int | str, dict[str, Any]] = {
    422: {"description": "Settings librdkafka (or the registry's TLS) cannot use, or an address the egress policy "
                         "refuses (egress-denied, naming the field)"},
    502: {"description": "The cluster could not be used (kafka-<kind>: dns, refused, tls, auth, not_found, "
                         "broker_denied or unknown), its OAuth token endpoint (oauth-<kind>: invalid_client, "
                         "unauthorized, token_endpoint_unreachable, ...) or its schema registry "
                         "(schema-registry-<kind>: auth, unreachable or error)"},
    429: {"description": "The tenant already has INLET_CONNECTION_TESTS_PER_TENANT tests in flight (too-many-connection-tests, "
                         "with Retry-After)"},
    503: {"description": "The secret backend is unavailable or refuses Inlet"},
    504: {"description": "The cluster or the schema registry did not answer within kafka_timeout_s (kind timeout)"},
}


@router.post(":test", operation_id="test_connection_spec", response_model=ConnectionTestResult, responses=_TEST_RESPONSES)
def test_connection_spec(body: ConnectionSpec, ctx: Editor, session: SessionDep, settings: SettingsDep) -> ConnectionTestResult:
    """Test a connection before saving it (editor+: Inlet connects out); nothing is stored."""
    session.commit()  # the authentication's transaction: nothing of the database is held while Inlet waits
    with connection_test_slot(ctx, settings):
        return probe.probe_spec(spec=body, timeout_s=settings.kafka_timeout_s, egress=settings.egress_policy)


@router.get("", operation_id="list_connections", response_model=Page[ConnectionRead])
def list_connections(
    ctx: Viewer, session: SessionDep, secrets: SecretsDep, page: ConnectionPage,
    name: Annotated[str | None, Query(max_length=100)] = None,
) -> Page[ConnectionRead]:
    """List the tenant's connections."""
    rows, total = service.list_connections(session=session, ctx=ctx, page=page, name=name)
    statuses = credentials_statuses(rows, secrets)
    return Page(items=[service.to_read(r, statuses.get(r.id)) for r in rows], total=total, limit=page.limit,
                offset=page.offset)


@router.get("/{connection_id}", operation_id="get_connection", response_model=ConnectionRead)
def get_connection(
    connection_id: uuid.UUID, response: Response, ctx: Viewer, session: SessionDep, secrets: SecretsDep
) -> ConnectionRead:
    """Read one connection (credentials are never shown: see has_credentials and credentials_status)."""
    return _read(service.get_connection(session=session, ctx=ctx, connection_id=connection_id), secrets, response)


@router.put("/{connection_id}", operation_id="replace_connection", response_model=ConnectionRead)
def replace_connection(
    connection_id: uuid.UUID, body: ConnectionSpec, response: Response, ctx: Editor, session: SessionDep,
    secrets: SecretsDep, settings: SettingsDep, if_match: IfMatch = None,
) -> ConnectionRead:
    """Replace a connection; sending credentials rotates them (a new secret version)."""
    return _read(service.replace_connection(
        session=session, ctx=ctx, secrets=secrets, connection_id=connection_id, spec=body, if_match=if_match,
        egress=settings.egress_policy,
        max_fetch_bytes=settings.kafka_max_fetch_bytes,
    ), secrets, response)


@router.patch("/{connection_id}", operation_id="patch_connection", response_model=ConnectionRead)
def patch_connection(
    connection_id: uuid.UUID, body: PatchBody, response: Response, ctx: Editor, session: SessionDep,
    secrets: SecretsDep, settings: SettingsDep, if_match: IfMatch = None,
) -> ConnectionRead:
    """Change some fields of a connection (JSON Merge Patch)."""
    return _read(service.patch_connection(
        session=session, ctx=ctx, secrets=secrets, connection_id=connection_id, patch=body, if_match=if_match,
        egress=settings.egress_policy,
        max_fetch_bytes=settings.kafka_max_fetch_bytes,
    ), secrets, response)


@router.post("/{connection_id}/test", operation_id="test_connection", response_model=ConnectionTestResult,
             responses=_TEST_RESPONSES | {409: {"description": "The stored credentials are gone (credentials-missing)"}})
def test_connection(
    connection_id: uuid.UUID, ctx: Editor, session: SessionDep, secrets: SecretsDep, settings: SettingsDep
) -> ConnectionTestResult:
    """Fetch the cluster's metadata, and its schema registry's subjects, with the stored credentials (editor+)."""
    with connection_test_slot(ctx, settings):
        return probe.probe_connection(session=session, ctx=ctx, secrets=secrets, connection_id=connection_id,
                                      timeout_s=settings.kafka_timeout_s, egress=settings.egress_policy)

@router.delete("/{connection_id}", operation_id="delete_connection", status_code=204)
def delete_connection(
    connection_id: uuid.UUID, request: Request, ctx: Editor, session: SessionDep, secrets: SecretsDep,
    if_match: IfMatch = None,
) -> Response:
    """Delete a connection and every version of its secret; refused (409) while a pipeline uses it."""
    service.delete_connection(session=session, ctx=ctx, secrets=secrets, connection_id=connection_id, if_match=if_match)
    clients: KafkaClientCache = request.app.state.kafka_clients
    clients.forget(connection_id)
    return Response(status_code=204)
