"""The ``SecretStore`` interface behind which Kafka credentials live, and the choice of backend.

Paths are per tenant (``tenants/<tenant>/connections/<connection>``) so a backend policy can confine
each tenant. Every write makes a new version; the database keeps only the path and the version.
"""

from __future__ import annotations

import uuid
from typing import Any, Protocol

from api.core.config import Settings
from api.core.errors import DomainError, NotFound, ServiceUnavailable


class SecretBackendUnavailable(ServiceUnavailable):
    code, title = "secret-backend-unavailable", "The secret backend is unavailable"


class SecretBackendRefused(DomainError):
    """The backend answered but refused (bad token, policy): an operator must act."""

    status, code, title = 503, "secret-backend-refused", "The secret backend refused Inlet's credentials"


class SecretNotFound(NotFound):
    def __init__(self, path: str, version: int | None = None) -> None:
        super().__init__("Secret", path if version is None else f"{path} version {version}")


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

    def health(self) -> dict[str, Any]:
        """``{"status": "ok" | "unavailable" | …, "backend": …}`` without raising."""
        ...


def connection_secret_path(tenant_id: uuid.UUID, connection_id: uuid.UUID) -> str:
    return f"tenants/{tenant_id}/connections/{connection_id}"


def build_secret_store(settings: Settings) -> SecretStore:
    if settings.secret_backend == "vault":
        from api.secrets.vault import VaultSecretStore

        return VaultSecretStore.from_settings(settings)
    from api.secrets.local import LocalSecretStore

    return LocalSecretStore(root=settings.data_dir / "secrets", key_file=settings.resolved_secret_key_file)
