"""A connection's write-only secret: what it holds, how a spec's write-only fields change it, whether
it is complete, and where it is written and read (by version).

One secret per connection holds everything write-only: the cluster's ``credentials``, the TLS
``ssl_key`` and the schema registry's ``registry_credentials``; a change to any of them is a new
version (``credentials_version``). On PUT and PATCH an omitted write-only field keeps what is stored
and ``null`` removes it (``secret_of``). A connection whose secret version is gone from the store
(Vault lost it, someone deleted it) shows ``credentials_status: missing`` and takes new credentials
as a fresh version.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from sqlmodel import Session

from api.connections.models import Connection
from api.connections.schemas import ConnectionSpec, CredentialsStatus, RegistryAuth
from api.core.db import after_commit
from api.core.errors import DomainError, ValidationFailed
from api.secrets.lifecycle import destroyer, require_backend, write_new
from api.secrets.store import (
    SecretBackendRefused,
    SecretBackendUnavailable,
    SecretNotFound,
    SecretStore,
    connection_secret_path,
)

WRITE_ONLY_SSL = ("key_pem", "key_password")


class CredentialsMissing(DomainError):
    """The secret version a connection refers to is gone from the secret store."""

    status, code, title = 409, "credentials-missing", "The connection's stored credentials are missing"

    def __init__(self, conn: Connection, version: int | None) -> None:
        super().__init__(
            f"Connection {conn.id}: version {version} of its credentials is gone from the secret store "
            f"({conn.secret_path}); send new credentials with PUT or PATCH",
            connection_id=str(conn.id),
        )


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


def registry_auth(conn: Connection) -> RegistryAuth:
    return (conn.schema_registry or {}).get("auth", "none")


def auth_of(registry_credentials: dict[str, Any] | None) -> RegistryAuth:
    if not registry_credentials:
        return "none"
    return "bearer" if "token" in registry_credentials else "basic"


def _plain(model: Any) -> dict[str, Any]:
    """A credentials model as the secret stores it: secrets revealed, unset fields left out."""
    return {k: (v.get_secret_value() if hasattr(v, "get_secret_value") else v)
            for k, v in model.model_dump().items() if v is not None}


def secret_of(spec: ConnectionSpec, current: dict[str, Any]) -> dict[str, Any]:
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
        for name in WRITE_ONLY_SSL:
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


def touches_secret(spec: ConnectionSpec, conn: Connection) -> bool:
    """Whether ``spec`` changes the stored secret (so it must be read and maybe rewritten)."""
    if "credentials" in spec.model_fields_set:
        return True
    if spec.ssl is None:
        if conn.ssl and conn.ssl.get("has_key"):
            return True
    elif any(name in spec.ssl.model_fields_set for name in WRITE_ONLY_SSL):
        return True
    if spec.schema_registry is None:
        return registry_auth(conn) != "none"
    return "credentials" in spec.schema_registry.model_fields_set


def known_shape(conn: Connection) -> dict[str, Any]:
    """Which parts the stored secret has, known without reading it."""
    shape: dict[str, Any] = {}
    if conn.credentials_version and conn.sasl_mechanism:
        shape["credentials"] = True
    if conn.ssl and conn.ssl.get("has_key"):
        shape["ssl_key"] = {"key_pem": True}
    auth = registry_auth(conn)
    if auth != "none":
        shape["registry_credentials"] = {"token": True} if auth == "bearer" else {"username": True, "password": True}
    return shape


def check_secret_complete(
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
        absent = "ssl.key_pem" if spec.ssl.certificate_pem else "ssl.certificate_pem"
        raise ValidationFailed.field(absent, f"TLS client authentication needs both certificate_pem and key_pem{lost}")
    # A registry is reachable without credentials, so losing them must not silently mean "none".
    if (lost and stored_registry_auth != "none" and spec.schema_registry is not None
            and "credentials" not in spec.schema_registry.model_fields_set):
        raise ValidationFailed.field(
            "schema_registry.credentials",
            f"The schema registry's {stored_registry_auth} credentials need to be sent again{lost}; "
            "send \"credentials\": null to use the registry without them")


def store_secret(session: Session, secrets: SecretStore, conn: Connection, payload: dict[str, Any], *, new: bool) -> None:
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


def stored_secret(conn: Connection, secrets: SecretStore, version: int | None) -> dict[str, Any]:
    """The connection's secret at ``version`` (default: its current one); {} without a secret."""
    wanted = version or conn.credentials_version
    try:
        return secrets.read(conn.secret_path, wanted) if conn.secret_path else {}
    except SecretNotFound:
        raise CredentialsMissing(conn, wanted) from None
