"""The ``SecretStore`` interface behind which Kafka credentials and webhook signing secrets live
(backends: ``api.secrets.backends``).

Paths are per tenant (``tenants/<tenant>/connections/<connection>``, ``tenants/<tenant>/webhooks/<webhook>``)
so a backend policy can confine each tenant. Every write makes a new version; the database keeps only the path and the version.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from api.core.errors import DomainError, NotFound, ServiceUnavailable


class SecretBackendUnavailable(ServiceUnavailable):
    code, title = "secret-backend-unavailable", "The secret backend is unavailable"


class SecretBackendRefused(DomainError):
    """The backend answered but refused (bad token, policy): an operator must act."""

    status, code, title = 503, "secret-backend-refused", "The secret backend refused Inlet's credentials"


class SecretNotFound(NotFound):
    def __init__(self, path: str, version: int | None = None) -> None:
        super().__init__("Secret", path if version is None else f"{path} version {version}")


@dataclass(frozen=True)
class StoredSecret:
    """What a backend knows of a secret without reading its data."""

    path: str
    updated_at: datetime
    versions: frozenset[int]  # the readable ones: neither deleted nor destroyed


class SecretStore(Protocol):
    backend: str

    def write(self, path: str, data: dict[str, Any]) -> int:
        """Store ``data`` as the newest version at ``path``; return that version (1, 2, …)."""
        ...

    def read(self, path: str, version: int | None = None) -> dict[str, Any]:
        """The data of ``version`` (default: newest); ``SecretNotFound`` if absent."""
        ...

    def destroy(self, path: str) -> None:
        """Delete every version and the metadata at ``path``; a missing path is not an error."""
        ...

    def describe(self, path: str) -> StoredSecret | None:
        """The secret's readable versions and when it last changed; None when nothing is at ``path``."""
        ...

    def list_paths(self, under: str) -> list[str]:
        """Every secret path below the folder ``under`` (e.g. ``tenants``), at any depth."""
        ...

    def health(self) -> dict[str, Any]:
        """``{"status": "ok" | "unavailable" | …, "backend": …}`` without raising."""
        ...


CONNECTIONS_ROOT = "tenants"


def connection_secret_path(tenant_id: uuid.UUID, connection_id: uuid.UUID) -> str:
    return f"{CONNECTIONS_ROOT}/{tenant_id}/connections/{connection_id}"


def webhook_secret_path(tenant_id: uuid.UUID, webhook_id: uuid.UUID) -> str:
    return f"{CONNECTIONS_ROOT}/{tenant_id}/webhooks/{webhook_id}"


def field_key_path(tenant_id: uuid.UUID) -> str:
    """The tenant's field key (``api.tenancy.field_keys``)."""
    return f"{CONNECTIONS_ROOT}/{tenant_id}/field-key"
