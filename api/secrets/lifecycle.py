"""Keeping a secret in step with the row that owns it (a connection, a webhook).

The row is flushed first, so that conflicts fail before anything leaves the process; the secret is
written next, and a rollback of the transaction destroys a secret the request created. A deleted
row's secret is destroyed only after the delete has committed. Where the store cannot be reached at
that moment, the secret is left to the orphan sweep (``api.connections.orphans``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from sqlmodel import Session

from api.core.db import after_commit, on_rollback
from api.secrets.store import SecretBackendRefused, SecretBackendUnavailable, SecretStore

log = logging.getLogger(__name__)


def require_backend(secrets: SecretStore) -> None:
    """Refuse (503) a change that must destroy a secret after its commit while the backend cannot:
    the secret would outlive its row. The check narrows that window; the destroy itself is retried
    by nothing, and a failure of it is logged by the unit of work."""
    state = secrets.health()
    status = state.get("status")
    if status == "ok":
        return
    if status == "refused":
        raise SecretBackendRefused(
            f"The {secrets.backend} secret backend refuses Inlet's credentials; nothing was changed")
    raise SecretBackendUnavailable(
        f"The {secrets.backend} secret backend is {status}; nothing was changed, retry later")


def destroyer(secrets: SecretStore, path: str, why: str) -> Callable[[], None]:
    """Destroy the secret at ``path`` and say so by path; a failure is left to the orphan sweep."""
    def destroy() -> None:
        try:
            secrets.destroy(path)
        except Exception as exc:  # noqa: BLE001 (logged; api.connections.orphans destroys it later)
            log.warning("secret at %s not destroyed (%s): %s; the orphan sweep will destroy it",
                        path, why, getattr(exc, "detail", type(exc).__name__))
            return
        log.info("secret at %s destroyed (%s)", path, why)
    return destroy


def write_new(session: Session, secrets: SecretStore, path: str, data: dict[str, Any], *, unsaved: str) -> int:
    """Write the first version of a row's secret, destroyed again if the row is not saved (``unsaved``
    says so in the log); the version written."""
    # Registered before the write: a write that fails ambiguously (a timeout after Vault applied it)
    # must not leave a secret behind either.
    on_rollback(session, destroyer(secrets, path, unsaved))
    return secrets.write(path, data)


def delete_with_secret(session: Session, secrets: SecretStore, row: object, path: str | None, *, why: str) -> None:
    """Delete ``row`` and, once that has committed, every version of its secret at ``path`` (refused
    with a 503 first while the backend could not destroy it)."""
    if path:
        require_backend(secrets)
    session.delete(row)
    session.flush()
    if path:
        after_commit(session, destroyer(secrets, path, why))
