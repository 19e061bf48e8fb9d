"""A failed run's fate: what kind of failure it was, and whether the same plan is tried again.

A failure is a ``RunFailure``: its kind and message (and the partition it concerns, where one does),
recorded on the run as ``error``. Kinds a pause can cure (a cluster or the secret backend briefly
unreachable, a job that crashed) are retried with exponential backoff up to the attempt limit; every
other kind fails the run for good, because retrying cannot help (credentials refused, a topic
missing, data lost).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from api.connections.client_configs import RegistryMissing
from api.connections.secret_payloads import CredentialsMissing
from api.kafka.errors import KafkaClientError, KafkaTimeout, KafkaUnavailable
from api.secrets.store import SecretBackendRefused, SecretBackendUnavailable

# Failures worth the same plan again after a pause.
TRANSIENT_KINDS = frozenset({"kafka_unavailable", "crashed", "secret_backend_unavailable", "storage_unreachable",
                             "registry_unavailable", "schema_changed", "target_conflict"})


@dataclass(frozen=True)
class RunFailure:
    """Why an attempt of a run ended without success (``kind`` decides a retry), in words a user can act
    on, and the partition it concerns where it concerns one."""

    kind: str
    message: str
    topic: str | None = None
    partition: int | None = None

    def to_json(self) -> dict[str, Any]:
        """As a run's ``error`` column keeps it."""
        return asdict(self)


def failure_of(exc: Exception) -> RunFailure:
    """The failure of an exception raised while planning or preparing a run."""
    if isinstance(exc, (KafkaUnavailable, KafkaTimeout)):
        return RunFailure("kafka_unavailable", str(exc))
    if isinstance(exc, KafkaClientError):
        return RunFailure(f"kafka_{exc.kind}", str(exc))
    if isinstance(exc, SecretBackendUnavailable):
        return RunFailure("secret_backend_unavailable", exc.detail)
    if isinstance(exc, SecretBackendRefused):  # an operator must act: retrying cannot help
        return RunFailure("secret_backend_refused", exc.detail)
    if isinstance(exc, CredentialsMissing):
        return RunFailure("credentials_missing", exc.detail)
    if isinstance(exc, RegistryMissing):
        return RunFailure("registry_missing", exc.detail)
    return RunFailure("internal", type(exc).__name__)


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
