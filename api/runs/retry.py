"""A failed run's fate: what kind of failure it was, and whether the same plan is tried again.

A failure is recorded as ``{"kind", "message"}``. Kinds a pause can cure (a cluster or the secret
backend briefly unreachable, a job that crashed) are retried with exponential backoff up to the
attempt limit; every other kind fails the run for good, because retrying cannot help (credentials
refused, a topic missing, data lost).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from api.connections.client_configs import RegistryMissing
from api.connections.secret_payloads import CredentialsMissing
from api.kafka.errors import KafkaClientError, KafkaTimeout, KafkaUnavailable
from api.secrets.store import SecretBackendRefused, SecretBackendUnavailable

# Failures worth the same plan again after a pause.
TRANSIENT_KINDS = frozenset({"kafka_unavailable", "crashed", "secret_backend_unavailable", "storage_unreachable",
                             "registry_unavailable", "schema_changed"})


def error_of(exc: Exception) -> dict[str, Any]:
    """The recorded failure of an exception raised while planning or preparing a run."""
    if isinstance(exc, (KafkaUnavailable, KafkaTimeout)):
        return {"kind": "kafka_unavailable", "message": str(exc)}
    if isinstance(exc, KafkaClientError):
        return {"kind": f"kafka_{exc.kind}", "message": str(exc)}
    if isinstance(exc, SecretBackendUnavailable):
        return {"kind": "secret_backend_unavailable", "message": exc.detail}
    if isinstance(exc, SecretBackendRefused):  # an operator must act: retrying cannot help
        return {"kind": "secret_backend_refused", "message": exc.detail}
    if isinstance(exc, CredentialsMissing):
        return {"kind": "credentials_missing", "message": exc.detail}
    if isinstance(exc, RegistryMissing):
        return {"kind": "registry_missing", "message": exc.detail}
    return {"kind": "internal", "message": type(exc).__name__}


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int
    backoff_s: float

    def retry_in(self, kind: str, attempt: int) -> float | None:
        """Seconds until attempt ``attempt + 1`` of a run whose attempt ``attempt`` failed with
        ``kind``; None when the run fails for good."""
        if kind not in TRANSIENT_KINDS or attempt >= self.max_attempts:
            return None
        return self.backoff_s * 2 ** (attempt - 1)
