"""Connections: create, read, replace, patch, delete. What the write-only secret holds and how a
change merges into it is ``secret_payloads``; how a run or a test reaches the cluster, ``client_configs``.

Write order keeps the database and the secret store in step: the row is flushed first (name
conflicts fail before anything leaves the process), then the secret is written, and a rollback
of the transaction destroys a secret this request created. A deleted connection's secret is
destroyed only after the delete has committed. Where the secret store cannot be reached at that
moment (or a delayed write lands after the compensating destroy), the secret is left to
``api.connections.orphans``, which destroys every secret that belongs to no connection.
"""

from __future__ import annotations

import uuid
from typing import Any

from pydantic import ValidationError
from sqlalchemy import func
from sqlmodel import Session, select

from api.audit.service import record_by
from api.connections.egress import check_addresses
from api.connections.models import Connection
from api.connections.schemas import ConnectionRead, ConnectionSpec, CredentialsStatus, SchemaRegistryRead, SslRead
from api.connections.secret_payloads import (
    WRITE_ONLY_SSL,
    auth_of,
    check_secret_complete,
    credentials_statuses,
    known_shape,
    registry_auth,
    secret_of,
    store_secret,
    touches_secret,
)
from api.core.db import utcnow
from api.core.errors import Conflict, NotFound, ValidationFailed
from api.core.etag import check_if_match, etag_for
from api.core.merge_patch import merge_patch
from api.core.pagination import PageParams, paginate
from api.core.references import restricting_references
from api.core.scoping import get_scoped, scoped_select
from api.core.security import TenantContext
from api.kafka.config import DEFAULT_MAX_FETCH_BYTES, KafkaConfigError, check_option_sizes
from api.secrets.lifecycle import delete_with_secret
from api.secrets.store import SecretNotFound, SecretStore
from api.tenancy.quotas import QuotaLimits, enforce
from spark_jobs.public import EgressPolicy


class ConnectionGone(NotFound):
    """A connection a pipeline refers to is gone (only a deleted pipeline's leftover work sees this)."""


def etag(conn: Connection) -> str:
    return etag_for(conn.id, conn.revision)


def to_read(conn: Connection, credentials_status: CredentialsStatus | None = None) -> ConnectionRead:
    ssl = None
    if conn.ssl is not None:
        ssl = SslRead(
            ca_pem=conn.ssl.get("ca_pem"), certificate_pem=conn.ssl.get("certificate_pem"),
            endpoint_identification=conn.ssl.get("endpoint_identification", "https"),
            has_key=bool(conn.ssl.get("has_key")),
        )
    registry = None
    if conn.schema_registry is not None:
        registry = SchemaRegistryRead.model_validate(conn.schema_registry)
    return ConnectionRead(
        id=conn.id, name=conn.name, bootstrap_servers=conn.bootstrap_servers,
        security_protocol=conn.security_protocol, sasl_mechanism=conn.sasl_mechanism, ssl=ssl,
        options=conn.options, schema_registry=registry,
        has_credentials=bool(conn.secret_path and conn.credentials_version),
        credentials_version=conn.credentials_version, credentials_status=credentials_status,
        created_at=conn.created_at, updated_at=conn.updated_at,
    )


def read_with_status(conn: Connection, secrets: SecretStore) -> ConnectionRead:
    return to_read(conn, credentials_statuses([conn], secrets).get(conn.id))


def _audit_view(conn: Connection) -> dict[str, Any]:
    return to_read(conn).model_dump(mode="json", exclude={"created_at", "updated_at", "credentials_status"})


def _apply_public(conn: Connection, spec: ConnectionSpec, payload: dict[str, Any]) -> None:
    conn.name = spec.name
    conn.bootstrap_servers = spec.bootstrap_servers
    conn.security_protocol = spec.security_protocol
    conn.sasl_mechanism = spec.sasl_mechanism
    conn.options = dict(spec.options)
    conn.ssl = None if spec.ssl is None else {
        "ca_pem": spec.ssl.ca_pem, "certificate_pem": spec.ssl.certificate_pem,
        "endpoint_identification": spec.ssl.endpoint_identification, "has_key": "ssl_key" in payload,
    }
    registry = spec.schema_registry
    conn.schema_registry = None if registry is None else {
        "url": registry.url, "ca_pem": registry.ca_pem, "endpoint_identification": registry.endpoint_identification,
        "auth": auth_of(payload.get("registry_credentials")),
    }


def _ensure_name_free(session: Session, ctx: TenantContext, name: str, own_id: uuid.UUID | None = None) -> None:
    stmt = scoped_select(Connection, ctx.tenant_id).where(Connection.name == name)
    existing = session.exec(stmt).first()
    if existing is not None and existing.id != own_id:
        raise Conflict(f"A connection named {name!r} already exists", conflicting_id=str(existing.id))


def _check_sizes(spec: ConnectionSpec, max_fetch_bytes: int) -> None:
    """The options' librdkafka size settings under the operator's ceilings (``api.kafka.config``)."""
    try:
        check_option_sizes(spec.options, max_fetch_bytes)
    except KafkaConfigError as exc:
        raise ValidationFailed.field("options", exc.message) from None


def quota_used(session: Session, tenant_id: uuid.UUID) -> int:
    """The tenant's connections: what its ``connections`` quota counts."""
    return session.exec(select(func.count()).select_from(Connection).where(Connection.tenant_id == tenant_id)).one()


def create_connection(
    *, session: Session, ctx: TenantContext, secrets: SecretStore, spec: ConnectionSpec, quotas: QuotaLimits,
    egress: EgressPolicy, max_fetch_bytes: int = DEFAULT_MAX_FETCH_BYTES,
) -> Connection:
    enforce(session, ctx.tenant_id, "connections", defaults=quotas, count=lambda: quota_used(session, ctx.tenant_id))
    _ensure_name_free(session, ctx, spec.name)
    payload = secret_of(spec, {})
    check_secret_complete(spec, payload)
    check_addresses(spec, egress)
    _check_sizes(spec, max_fetch_bytes)
    conn = Connection(tenant_id=ctx.tenant_id, name=spec.name, bootstrap_servers=spec.bootstrap_servers,
                      security_protocol=spec.security_protocol)
    _apply_public(conn, spec, payload)
    session.add(conn)
    session.flush()
    store_secret(session, secrets, conn, payload, new=True)
    session.flush()
    record_by(session, ctx, resource_type="connection", resource_id=conn.id, action="create", after=_audit_view(conn))
    return conn


def get_connection(*, session: Session, ctx: TenantContext, connection_id: uuid.UUID, lock: bool = False) -> Connection:
    return get_scoped(session, Connection, ctx.tenant_id, connection_id, resource="Connection", lock=lock)


def list_connections(
    *, session: Session, ctx: TenantContext, page: PageParams, name: str | None = None
) -> tuple[list[Connection], int]:
    stmt = scoped_select(Connection, ctx.tenant_id)
    if name:
        stmt = stmt.where(Connection.name == name)
    return paginate(session, stmt, page, Connection)


def replace_connection(
    *, session: Session, ctx: TenantContext, secrets: SecretStore, connection_id: uuid.UUID,
    spec: ConnectionSpec, if_match: str | None, egress: EgressPolicy, max_fetch_bytes: int = DEFAULT_MAX_FETCH_BYTES,
) -> Connection:
    conn = get_connection(session=session, ctx=ctx, connection_id=connection_id, lock=True)
    check_if_match(if_match, etag(conn))
    _ensure_name_free(session, ctx, spec.name, own_id=conn.id)
    before = _audit_view(conn)
    stored_registry_auth = registry_auth(conn)
    current: dict[str, Any] | None = None
    lost = ""
    if touches_secret(spec, conn):
        try:
            current = secrets.read(conn.secret_path, conn.credentials_version) if conn.secret_path else {}
        except SecretNotFound:
            # The version is gone: nothing stored can be kept, what this request sends is written afresh.
            current = {}
            lost = f" (the stored ones, version {conn.credentials_version}, are gone from the secret store)"
        payload = secret_of(spec, current)
    else:
        payload = known_shape(conn)
    check_secret_complete(spec, payload, lost=lost, stored_registry_auth=stored_registry_auth)
    check_addresses(spec, egress)
    _check_sizes(spec, max_fetch_bytes)
    _apply_public(conn, spec, payload)
    rewritten = current is not None and (payload != current or bool(lost))
    if rewritten:
        store_secret(session, secrets, conn, payload, new=False)
    # A rewritten secret is a change even where the view is the same (Vault restarted empty can
    # hand out the old version number again): it gets a revision and an audit event.
    if rewritten or _audit_view(conn) != before:
        conn.revision += 1
        conn.updated_at = utcnow()
        session.add(conn)
        session.flush()
        record_by(session, ctx, resource_type="connection", resource_id=conn.id, action="update",
                  before=before, after=_audit_view(conn))
    return conn


def patch_connection(
    *, session: Session, ctx: TenantContext, secrets: SecretStore, connection_id: uuid.UUID,
    patch: dict[str, Any], if_match: str | None, egress: EgressPolicy, max_fetch_bytes: int = DEFAULT_MAX_FETCH_BYTES,
) -> Connection:
    conn = get_connection(session=session, ctx=ctx, connection_id=connection_id, lock=True)
    public = to_read(conn).model_dump(
        mode="json", exclude={"id", "has_credentials", "credentials_version", "credentials_status", "created_at", "updated_at"}
    )
    if public["ssl"] is not None:
        public["ssl"].pop("has_key")
    if public["schema_registry"] is not None:
        public["schema_registry"].pop("auth")
    merged = merge_patch(public, {k: v for k, v in patch.items() if k != "credentials"})
    if "credentials" in patch:
        merged["credentials"] = patch["credentials"]
    # Write-only fields are taken as sent: an explicit null means "remove", and a new value replaces the
    # stored one whole (it is never merged into what cannot be read).
    for part, names in (("ssl", WRITE_ONLY_SSL), ("schema_registry", ("credentials",))):
        for name in names:
            if isinstance(patch.get(part), dict) and name in patch[part] and isinstance(merged.get(part), dict):
                merged[part][name] = patch[part][name]
    try:
        spec = ConnectionSpec.model_validate(merged)
    except ValidationError as exc:
        raise ValidationFailed.of(exc, "The patched connection is not valid") from None
    return replace_connection(session=session, ctx=ctx, secrets=secrets, connection_id=connection_id,
                              spec=spec, if_match=if_match, egress=egress, max_fetch_bytes=max_fetch_bytes)


def delete_connection(
    *, session: Session, ctx: TenantContext, secrets: SecretStore, connection_id: uuid.UUID, if_match: str | None
) -> None:
    conn = get_connection(session=session, ctx=ctx, connection_id=connection_id, lock=True)
    check_if_match(if_match, etag(conn))
    users = restricting_references(session, Connection, conn.id).get("pipelines", [])
    if users:
        raise Conflict(
            f"Connection {conn.id} is used by {len(users)} pipeline(s); delete or repoint them first",
            pipeline_ids=[str(p) for p in users],
        )
    before = _audit_view(conn)
    delete_with_secret(session, secrets, conn, conn.secret_path, why="connection deleted")
    record_by(session, ctx, resource_type="connection", resource_id=connection_id, action="delete", before=before)


def referenced_connection(session: Session, connection_id: uuid.UUID) -> Connection:
    """A connection a pipeline refers to. The pipeline was found in its caller's tenant, and a
    connection in use cannot be deleted (a RESTRICT foreign key), so it is there."""
    conn = session.get(Connection, connection_id)
    if conn is None:
        raise ConnectionGone("Connection", str(connection_id))
    return conn


