"""A failed run's fate (``api.runs.retry``): how failures are named, and which are tried again."""

from __future__ import annotations

import uuid
from typing import get_args

import pytest

from api.connections.client_configs import RegistryMissing
from api.connections.models import Connection
from api.connections.secret_payloads import CredentialsMissing
from api.kafka.errors import KafkaAuthError, KafkaTimeout, KafkaUnavailable, TopicNotFound
from api.runs.retry import TRANSIENT_KINDS, RetryPolicy, RunFailure, failure_of
from api.secrets.store import SecretBackendRefused, SecretBackendUnavailable
from spark_jobs.spec import ErrorKind

POLICY = RetryPolicy(max_attempts=3, backoff_s=10.0)


@pytest.mark.parametrize("kind", sorted(TRANSIENT_KINDS))
def test_a_transient_failure_is_retried_with_doubling_backoff_up_to_the_attempt_limit(kind: str) -> None:
    assert [POLICY.retry_in(kind, attempt) for attempt in (1, 2, 3, 4)] == [10.0, 20.0, None, None]


@pytest.mark.parametrize("kind", ["kafka_auth", "kafka_not_found", "credentials_missing", "secret_backend_refused",
                                  "data_loss", "target_write", "target_commit", "invalid_spec", "timeout",
                                  "internal", "offset_conflict", "registry_auth", "schema_not_found",
                                  "schema_incompatible", "table_unsupported"])
def test_a_failure_retrying_cannot_cure_fails_the_run_at_once(kind: str) -> None:
    assert POLICY.retry_in(kind, 1) is None


def test_one_attempt_allowed_means_no_retry() -> None:
    assert RetryPolicy(max_attempts=1, backoff_s=5.0).retry_in("kafka_unavailable", 1) is None


def _connection() -> Connection:
    return Connection(id=uuid.uuid4(), tenant_id=uuid.uuid4(), name="c", bootstrap_servers="b:9092",
                      security_protocol="PLAINTEXT", secret_path="tenants/t/connections/c", credentials_version=2)


@pytest.mark.parametrize(("exc", "expected"), [
    (KafkaUnavailable("broker b:9092 refused", kind="refused"), {"kind": "kafka_unavailable", "message": "broker b:9092 refused"}),
    (KafkaTimeout("no answer in 5s"), {"kind": "kafka_unavailable", "message": "no answer in 5s"}),
    (KafkaAuthError("SASL authentication failed"), {"kind": "kafka_auth", "message": "SASL authentication failed"}),
    (TopicNotFound(["orders"]), {"kind": "kafka_not_found", "message": "not found or not visible to this principal: orders"}),
    (SecretBackendUnavailable("Vault is sealed"), {"kind": "secret_backend_unavailable", "message": "Vault is sealed"}),
    (SecretBackendRefused("permission denied"), {"kind": "secret_backend_refused", "message": "permission denied"}),
    # Anything unforeseen is named by its type only: its text may hold what must not reach a run's record.
    (ValueError("password=hunter2"), {"kind": "internal", "message": "ValueError"}),
])
def test_failures_are_named_for_what_a_user_can_do_about_them(exc: Exception, expected: dict[str, str]) -> None:
    assert failure_of(exc) == RunFailure(**expected)


def test_missing_credentials_name_the_connection_and_version() -> None:
    conn = _connection()
    error = failure_of(CredentialsMissing(conn, 2))
    assert error == RunFailure(kind="credentials_missing", message=(
        f"Connection {conn.id}: version 2 of its credentials is gone from the secret store "
        "(tenants/t/connections/c); send new credentials with PUT or PATCH"))


def test_a_registry_removed_from_under_a_pipeline_names_the_connection() -> None:
    conn = _connection()
    assert failure_of(RegistryMissing(conn)) == RunFailure(kind="registry_missing", message=(
        f"Connection {conn.id} has no schema registry, and the pipeline's formats read their schemas from one; "
        "add schema_registry to the connection"))
    assert POLICY.retry_in("registry_missing", 1) is None


def test_every_kind_retried_is_one_that_something_produces() -> None:
    """A retried kind nothing produces (as ``timeout_lookup`` once was) is dead policy."""
    produced_by_planning = {failure_of(exc).kind for exc in (
        KafkaUnavailable("x"), KafkaTimeout("x"), SecretBackendUnavailable("x"), SecretBackendRefused("x"),
        KafkaAuthError("x"), ValueError("x"))}
    produced_by_jobs = set(get_args(ErrorKind))
    assert TRANSIENT_KINDS <= produced_by_planning | produced_by_jobs
