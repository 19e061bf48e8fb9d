"""Connections: create, read, replace, patch, delete, and the client configs (Kafka, schema
registry) a run or test uses.

One secret per connection holds everything write-only: the cluster's ``credentials``, the TLS
``ssl_key`` and the schema registry's ``registry_credentials``; a change to any of them is a new
version (``credentials_version``).

Write order keeps the database and the secret store in step: the row is flushed first (name
conflicts fail before anything leaves the process), then the secret is written, and a rollback
of the transaction destroys a secret this request created. A deleted connection's secret is
destroyed only after the delete has committed. Where the secret store cannot be reached at that
moment (or a delayed write lands after the compensating destroy), the secret is left to
``api.connections.orphans``, which destroys every secret that belongs to no connection.

A connection whose secret version is gone from the store (Vault lost it, someone deleted it)
shows ``credentials_status: missing`` and takes new credentials as a fresh version.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from pydantic import ValidationError
from sqlalchemy import func
from sqlmodel import Session, select

from api.audit.service import record_by
from api.connections.egress import check_addresses
from api.connections.models import Connection
from api.connections.schemas import (
    ConnectionRead,
    ConnectionSpec,
    CredentialsStatus,
    RegistryAuth,
    SchemaRegistryRead,
    SchemaRegistrySettings,
    SslRead,
)
from api.core.db import after_commit, utcnow
from api.core.errors import Conflict, DomainError, NotFound, ValidationFailed
from api.core.etag import check_if_match, etag_for
from api.core.merge_patch import merge_patch
from api.core.pagination import PageParams, paginate
from api.core.references import restricting_references
from api.core.scoping import get_scoped, scoped_select
from api.core.security import TenantContext
from api.kafka.client import KafkaClient
from api.kafka.config import KafkaClientConfig
from api.secrets.lifecycle import delete_with_secret, destroyer, require_backend, write_new
from api.secrets.store import (
    SecretBackendRefused,
    SecretBackendUnavailable,
    SecretNotFound,
    SecretStore,
    connection_secret_path,
)
from api.tenancy.quotas import QuotaLimits, enforce
from spark_jobs.public import EgressPolicy, RegistryConfig

_WRITE_ONLY_SSL = ("key_pem", "key_password")


class CredentialsMissing(DomainError):
    """The secret version a connection refers to is gone from the secret store."""

    status, code, title = 409, "credentials-missing", "The connection's stored credentials are missing"

    def __init__(self, conn: Connection, version: int | None) -> None:
        super().__init__(
            f"Connection {conn.id}: version {version} of its credentials is gone from the secret store "
            f"({conn.secret_path}); send new credentials with PUT or PATCH",
            connection_id=str(conn.id),
        )


class RegistryMissing(DomainError):
    """A pipeline reads a registry format through a connection that has no schema registry (any more)."""

    status, code, title = 409, "schema-registry-missing", "The connection has no schema registry"

    def __init__(self, conn: Connection) -> None:
        super().__init__(f"Connection {conn.id} has no schema registry, and the pipeline's formats read their "
                         "schemas from one; add schema_registry to the connection", connection_id=str(conn.id))


class ConnectionGone(NotFound):
    """A connection a pipeline refers to is gone (only a deleted pipeline's leftover work sees this)."""


def etag(conn: Connection) -> str:
    return etag_for(conn.id, conn.revision)


def credentials_statuses(conns: Iterable[Connection], secrets: SecretStore) -> dict[uuid.UUID, CredentialsStatus]:
    """Whether each connection's secret version is still in the store: ``ok``, ``missing`` or
    ``unknown`` (the store cannot tell now). One metadata read each, none once the store failed."""
    statuses: dict[uuid.UUID, CredentialsStatus] = {}
    reachable = True
    for conn in conns:
        if not conn.secret_path:
            continue
        if not reachable:
            statuses[conn.id] = "unknown"
            continue
        try:
            stored = secrets.describe(conn.secret_path)
        except (SecretBackendUnavailable, SecretBackendRefused):
            reachable = False
            statuses[conn.id] = "unknown"
            continue
        statuses[conn.id] = "ok" if stored and conn.credentials_version in stored.versions else "missing"
    return statuses


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


def _registry_auth(conn: Connection) -> RegistryAuth:
    return (conn.schema_registry or {}).get("auth", "none")


def _auth_of(registry_credentials: dict[str, Any] | None) -> RegistryAuth:
    if not registry_credentials:
        return "none"
    return "bearer" if "token" in registry_credentials else "basic"


def _plain(model: Any) -> dict[str, Any]:
    """A credentials model as the secret stores it: secrets revealed, unset fields left out."""
    return {k: (v.get_secret_value() if hasattr(v, "get_secret_value") else v)
            for k, v in model.model_dump().items() if v is not None}


def _secret_of(spec: ConnectionSpec, current: dict[str, Any]) -> dict[str, Any]:
    """The secret the connection should hold: ``current`` changed by what ``spec`` explicitly sets."""
    payload = dict(current)
    if "credentials" in spec.model_fields_set:
        if spec.credentials is None:
            payload.pop("credentials", None)
        else:
            payload["credentials"] = _plain(spec.credentials)
    if spec.ssl is None:
        payload.pop("ssl_key", None)
    else:
        key = dict(payload.get("ssl_key", {}))
        for name in _WRITE_ONLY_SSL:
            if name in spec.ssl.model_fields_set:
                value = getattr(spec.ssl, name)
                if value is None:
                    key.pop(name, None)
                else:
                    key[name] = value.get_secret_value()
        if key:
            payload["ssl_key"] = key
        else:
            payload.pop("ssl_key", None)
    registry = spec.schema_registry
    if registry is None or ("credentials" in registry.model_fields_set and registry.credentials is None):
        payload.pop("registry_credentials", None)
    elif registry.credentials is not None:
        payload["registry_credentials"] = _plain(registry.credentials)
    return payload


def _touches_secret(spec: ConnectionSpec, conn: Connection) -> bool:
    """Whether ``spec`` changes the stored secret (so it must be read and maybe rewritten)."""
    if "credentials" in spec.model_fields_set:
        return True
    if spec.ssl is None:
        if conn.ssl and conn.ssl.get("has_key"):
            return True
    elif any(name in spec.ssl.model_fields_set for name in _WRITE_ONLY_SSL):
        return True
    if spec.schema_registry is None:
        return _registry_auth(conn) != "none"
    return "credentials" in spec.schema_registry.model_fields_set


def _known_shape(conn: Connection) -> dict[str, Any]:
    """Which parts the stored secret has, known without reading it."""
    shape: dict[str, Any] = {}
    if conn.credentials_version and conn.sasl_mechanism:
        shape["credentials"] = True
    if conn.ssl and conn.ssl.get("has_key"):
        shape["ssl_key"] = {"key_pem": True}
    auth = _registry_auth(conn)
    if auth != "none":
        shape["registry_credentials"] = {"token": True} if auth == "bearer" else {"username": True, "password": True}
    return shape


def _check_secret_complete(
    spec: ConnectionSpec, payload: dict[str, Any], *, lost: str = "", stored_registry_auth: RegistryAuth = "none"
) -> None:
    """``lost``: why nothing stored could be kept (the secret version is gone), told with the error;
    ``stored_registry_auth``: which registry credentials the lost version held."""
    if spec.sasl_mechanism is not None and "credentials" not in payload:
        raise ValidationFailed.field("credentials", f"sasl_mechanism {spec.sasl_mechanism} needs credentials{lost}")
    if spec.sasl_mechanism is None and "credentials" in payload:
        raise ValidationFailed.field(
            "credentials", "The stored credentials need a SASL protocol; send \"credentials\": null to remove them"
        )
    if spec.ssl is not None and bool(spec.ssl.certificate_pem) != bool(payload.get("ssl_key", {}).get("key_pem")):
        raise ValidationFailed.field("ssl", f"TLS client authentication needs both certificate_pem and key_pem{lost}")
    # A registry is reachable without credentials, so losing them must not silently mean "none".
    if (lost and stored_registry_auth != "none" and spec.schema_registry is not None
            and "credentials" not in spec.schema_registry.model_fields_set):
        raise ValidationFailed.field(
            "schema_registry.credentials",
            f"The schema registry's {stored_registry_auth} credentials need to be sent again{lost}; "
            "send \"credentials\": null to use the registry without them")


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
        "auth": _auth_of(payload.get("registry_credentials")),
    }


def _ensure_name_free(session: Session, ctx: TenantContext, name: str, own_id: uuid.UUID | None = None) -> None:
    stmt = scoped_select(Connection, ctx.tenant_id).where(Connection.name == name)
    existing = session.exec(stmt).first()
    if existing is not None and existing.id != own_id:
        raise Conflict(f"A connection named {name!r} already exists", conflicting_id=str(existing.id))


def _store_secret(session: Session, secrets: SecretStore, conn: Connection, payload: dict[str, Any], *, new: bool) -> None:
    path = conn.secret_path or connection_secret_path(conn.tenant_id, conn.id)
    if not payload:
        if conn.secret_path:
            require_backend(secrets)
            after_commit(session, destroyer(secrets, path, "credentials removed"))
        conn.secret_path, conn.credentials_version = None, None
        return
    if new or conn.secret_path is None:
        version = write_new(session, secrets, path, payload, unsaved="its connection was not saved")
    else:
        version = secrets.write(path, payload)
    conn.secret_path, conn.credentials_version = path, version


def quota_used(session: Session, tenant_id: uuid.UUID) -> int:
    """The tenant's connections: what its ``connections`` quota counts."""
    return session.exec(select(func.count()).select_from(Connection).where(Connection.tenant_id == tenant_id)).one()


def create_connection(
    *, session: Session, ctx: TenantContext, secrets: SecretStore, spec: ConnectionSpec, quotas: QuotaLimits,
    egress: EgressPolicy,
) -> Connection:
    enforce(session, ctx.tenant_id, "connections", defaults=quotas, count=lambda: quota_used(session, ctx.tenant_id))
    _ensure_name_free(session, ctx, spec.name)
    payload = _secret_of(spec, {})
    _check_secret_complete(spec, payload)
    check_addresses(spec, egress)
    conn = Connection(tenant_id=ctx.tenant_id, name=spec.name, bootstrap_servers=spec.bootstrap_servers,
                      security_protocol=spec.security_protocol)
    _apply_public(conn, spec, payload)
    session.add(conn)
    session.flush()
    _store_secret(session, secrets, conn, payload, new=True)
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
    spec: ConnectionSpec, if_match: str | None, egress: EgressPolicy,
) -> Connection:
    conn = get_connection(session=session, ctx=ctx, connection_id=connection_id, lock=True)
    check_if_match(if_match, etag(conn))
    _ensure_name_free(session, ctx, spec.name, own_id=conn.id)
    before = _audit_view(conn)
    stored_registry_auth = _registry_auth(conn)
    current: dict[str, Any] | None = None
    lost = ""
    if _touches_secret(spec, conn):
        try:
            current = secrets.read(conn.secret_path, conn.credentials_version) if conn.secret_path else {}
        except SecretNotFound:
            # The version is gone: nothing stored can be kept, what this request sends is written afresh.
            current = {}
            lost = f" (the stored ones, version {conn.credentials_version}, are gone from the secret store)"
        payload = _secret_of(spec, current)
    else:
        payload = _known_shape(conn)
    _check_secret_complete(spec, payload, lost=lost, stored_registry_auth=stored_registry_auth)
    check_addresses(spec, egress)
    _apply_public(conn, spec, payload)
    rewritten = current is not None and (payload != current or bool(lost))
    if rewritten:
        _store_secret(session, secrets, conn, payload, new=False)
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
    patch: dict[str, Any], if_match: str | None, egress: EgressPolicy,
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
    for part, names in (("ssl", _WRITE_ONLY_SSL), ("schema_registry", ("credentials",))):
        for name in names:
            if isinstance(patch.get(part), dict) and name in patch[part] and isinstance(merged.get(part), dict):
                merged[part][name] = patch[part][name]
    try:
        spec = ConnectionSpec.model_validate(merged)
    except ValidationError as exc:
        raise ValidationFailed.of(exc, "The patched connection is not valid") from None
    return replace_connection(session=session, ctx=ctx, secrets=secrets, connection_id=connection_id,
                              spec=spec, if_match=if_match, egress=egress)


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


def _stored_secret(conn: Connection, secrets: SecretStore, version: int | None) -> dict[str, Any]:
    """The connection's secret at ``version`` (default: its current one); {} without a secret."""
    wanted = version or conn.credentials_version
    try:
        return secrets.read(conn.secret_path, wanted) if conn.secret_path else {}
    except SecretNotFound:
        raise CredentialsMissing(conn, wanted) from None


def client_config(conn: Connection, secrets: SecretStore, *, version: int | None = None) -> KafkaClientConfig:
    """How to reach the connection's cluster, with its credentials (``version``: a planned run's)."""
    secret = _stored_secret(conn, secrets, version)
    ssl = None
    if conn.ssl is not None:
        ssl = {k: v for k, v in conn.ssl.items() if k != "has_key" and v is not None} | secret.get("ssl_key", {})
    return KafkaClientConfig(
        bootstrap_servers=conn.bootstrap_servers, security_protocol=conn.security_protocol,
        sasl_mechanism=conn.sasl_mechanism, credentials=secret.get("credentials"),
        ssl=ssl, options=conn.options,
    )


def referenced_connection(session: Session, connection_id: uuid.UUID) -> Connection:
    """A connection a pipeline refers to. The pipeline was found in its caller's tenant, and a
    connection in use cannot be deleted (a RESTRICT foreign key), so it is there."""
    conn = session.get(Connection, connection_id)
    if conn is None:
        raise ConnectionGone("Connection", str(connection_id))
    return conn


def kafka_client(
    session: Session, connection_id: uuid.UUID, secrets: SecretStore, *, timeout_s: float, egress: EgressPolicy,
    client_id: str = "inlet", version: int | None = None,
) -> KafkaClient:
    """A client of the connection's cluster, with its credentials (``version``: a planned run's)."""
    conn = referenced_connection(session, connection_id)
    return KafkaClient(client_config(conn, secrets, version=version), egress=egress, timeout_s=timeout_s,
                       client_id=client_id)


def spec_client_config(spec: ConnectionSpec) -> KafkaClientConfig:
    """How to reach the cluster a not-yet-saved ``spec`` describes, with the credentials it carries."""
    payload = _secret_of(spec, {})
    _check_secret_complete(spec, payload)
    ssl = None
    if spec.ssl is not None:
        ssl = {k: v for k, v in (("ca_pem", spec.ssl.ca_pem), ("certificate_pem", spec.ssl.certificate_pem),
                                 ("endpoint_identification", spec.ssl.endpoint_identification)) if v is not None}
        ssl |= payload.get("ssl_key", {})
    return KafkaClientConfig(
        bootstrap_servers=spec.bootstrap_servers, security_protocol=spec.security_protocol,
        sasl_mechanism=spec.sasl_mechanism, credentials=payload.get("credentials"), ssl=ssl, options=dict(spec.options),
    )


def _registry_config(registry: dict[str, Any], credentials: dict[str, Any]) -> RegistryConfig:
    return RegistryConfig(
        url=registry["url"], username=credentials.get("username"), password=credentials.get("password"),
        token=credentials.get("token"), ca_pem=registry.get("ca_pem"),
        verify_hostname=registry.get("endpoint_identification", "https") == "https",
    )


def registry_config(conn: Connection, secrets: SecretStore, *, version: int | None = None) -> RegistryConfig | None:
    """How to reach the connection's schema registry, with its credentials (``version``: a planned
    run's, as for ``client_config``); None where the connection has no registry."""
    if conn.schema_registry is None:
        return None
    credentials: dict[str, Any] = {}
    if _registry_auth(conn) != "none":  # a registry without credentials needs no secret read
        credentials = _stored_secret(conn, secrets, version).get("registry_credentials", {})
    return _registry_config(conn.schema_registry, credentials)


def spec_registry_config(spec: ConnectionSpec) -> RegistryConfig | None:
    """How to reach the schema registry a not-yet-saved ``spec`` names, with the credentials it carries."""
    registry: SchemaRegistrySettings | None = spec.schema_registry
    if registry is None:
        return None
    public = registry.model_dump(include={"url", "ca_pem", "endpoint_identification"})
    return _registry_config(public, _secret_of(spec, {}).get("registry_credentials", {}))
