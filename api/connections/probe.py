"""The connection test: fetch a cluster's metadata with a connection's settings and credentials.

One bounded metadata request (``kafka_timeout_s``) through ``api.kafka.KafkaClient``. A failure is a
problem+json saying what failed, with ``kind`` one of ``dns``, ``refused``, ``tls``, ``auth``,
``timeout``, ``not_found``, ``unknown``: 504 for a timeout (the cluster did not answer in time),
502 for everything else the cluster or the network answered with (a gateway's codes: Inlet
stands between the caller and the cluster), 422 for settings librdkafka cannot use. A TLS failure
also says why (``reason``: ``untrusted_certificate``, ``expired_certificate``, ``hostname_mismatch``,
``client_certificate_required``, ``client_certificate_refused``; see ``api.kafka.tls``). A wrong
password and an unknown user are one ``auth`` failure: Kafka answers both alike, by design. Texts
come from ``api.kafka``, which scrubs every configured secret out of them; credentials are never
echoed.

A connection with a schema registry is then tested there too (the cluster first): one ``GET
/subjects`` with the registry's credentials, bounded by the same time. Its failures are problems of
their own, ``schema-registry-<kind>`` with ``kind`` one of ``auth`` (401 or 403: the credentials),
``unreachable`` (refused, DNS, TLS), ``timeout`` (504) and ``error`` (the registry answered, but not
as a registry does: a 5xx, a 404 for a URL that serves none); registry credentials are never echoed.

Every address goes through the egress policy (``spark_jobs.egress``, docs/security.md). An unsaved
connection's addresses are checked first (``api.connections.egress``); at the connection itself, a
bootstrap server, token endpoint or registry whose address is denied is a 422 ``egress-denied``
naming that field, and a cluster that advertises a broker at a denied address a 502
``kafka-broker-denied``. An OAUTHBEARER token endpoint is asked by Inlet itself; a refusal is a 502
``oauth-<kind>`` (``invalid_client``, ``unauthorized``, ``token_endpoint_unreachable``, ...).

The report says only what a tenant needs: the cluster's own answer (its id, brokers and the count of
topics the credentials see), that the registry answered as a registry does, or a kind of failure.
No upstream status, latency, count or body reaches the caller (a test is not a port scanner of the
networks Inlet reaches); the upstream's own message goes to the operator's log.
"""

from __future__ import annotations

import dataclasses
import logging
import ssl
import uuid

from sqlmodel import Session

from api.connections import client_configs, service
from api.connections.egress import check_addresses
from api.connections.schemas import BrokerRead, ConnectionSpec, ConnectionTestResult, SchemaRegistryTestResult
from api.core.egress import EgressDenied
from api.core.errors import DomainError, ValidationFailed
from api.core.security import TenantContext
from api.kafka import KafkaClient, KafkaClientConfig, KafkaClientError, KafkaConfigError
from api.kafka.errors import KafkaEgressDenied, KafkaTokenError
from api.kafka.problems import KafkaProblem
from api.kafka.tls import TlsDiagnosis, diagnose
from api.secrets.store import SecretStore
from spark_jobs.public import EgressPolicy, JobError, RegistryClient, RegistryConfig, RegistryUnavailable, redact

log = logging.getLogger(__name__)

_TITLES = {
    "dns": "The broker host name does not resolve",
    "refused": "The brokers refused the connection",
    "tls": "The TLS handshake with the brokers failed",
    "auth": "The cluster refused the credentials",
    "timeout": "The cluster did not answer in time",
    "not_found": "The cluster did not show what was asked",
    "broker_denied": "The cluster advertises a broker Inlet may not connect to",
}
_EGRESS_FIELDS = {"bootstrap_denied": "bootstrap_servers", "token_endpoint_refused": "credentials.token_endpoint_url"}
_TLS_TITLES = {
    "untrusted_certificate": "The broker's certificate is not trusted",
    "expired_certificate": "The broker's certificate has expired",
    "hostname_mismatch": "The broker's certificate does not match its host name",
    "client_certificate_required": "The broker requires a client certificate",
    "client_certificate_refused": "The broker refused the client certificate",
}


class ConnectionTestFailed(KafkaProblem):
    """The cluster could not be reached or refused the connection; ``kind`` says how."""

    code = "connection-test-failed"

    def __init__(self, error: KafkaClientError, tls: TlsDiagnosis | None = None) -> None:
        if error.kind not in _TITLES:
            error.kind = "unknown"
        kind = error.kind
        if tls is None:
            super().__init__(f"Connection test failed ({kind}): {error.message}", error)
        else:
            super().__init__(f"Connection test failed (tls): {tls.message}", error, reason=tls.reason)
        self.title = _TLS_TITLES.get(tls.reason, _TITLES["tls"]) if tls else _TITLES.get(kind, self.title)
        self.code = f"kafka-{kind.replace('_', '-')}"


_TOKEN_TITLES = {
    "invalid_client": "The token endpoint refused the client credentials",
    "unauthorized_client": "The token endpoint refused the client credentials",
    "unauthorized": "The token endpoint refused the client credentials",
    "invalid_scope": "The token endpoint refused the scope",
    "invalid_token": "The token endpoint gave no usable token",
    "token_endpoint_unreachable": "The token endpoint cannot be reached",
}


class TokenFetchFailed(DomainError):
    """No OAUTHBEARER token from the connection's token endpoint: ``kind`` says why."""

    status, code, title = 502, "oauth-token-endpoint-error", "The token endpoint answered with an error"

    def __init__(self, error: KafkaTokenError) -> None:
        title = _TOKEN_TITLES.get(error.kind, self.title)
        super().__init__(f"Connection test failed ({error.kind}): {_lower(title)}", kind=error.kind)
        self.code = f"oauth-{error.kind.replace('_', '-')}"
        self.title = title


_REGISTRY_TITLES = {
    "auth": "The schema registry refused the credentials",
    "unreachable": "The schema registry cannot be reached",
    "tls": "The TLS handshake with the schema registry failed",
    "timeout": "The schema registry did not answer in time",
    "error": "The schema registry answered with an error",
}


class SchemaRegistryTestFailed(DomainError):
    """The connection's schema registry could not be used; ``kind`` says how."""

    status, code, title = 502, "schema-registry-error", _REGISTRY_TITLES["error"]

    def __init__(self, error: JobError) -> None:
        kind, tls = _registry_kind(error)
        title = _REGISTRY_TITLES["tls" if tls else kind]
        reason = _registry_tls_reason(error.message) if tls else None
        detail = f"Schema registry test failed ({kind}): {_lower(title)}"
        if reason is None:
            super().__init__(detail, kind=kind)
        else:
            super().__init__(f"{detail}: {_REGISTRY_TLS_REASONS[reason]}", kind=kind, reason=reason)
        self.status = 504 if kind == "timeout" else 502
        self.code = f"schema-registry-{kind}"
        self.title = title


_REGISTRY_TLS_REASONS = {
    "hostname_mismatch": "its certificate does not match its host name",
    "expired_certificate": "its certificate has expired",
    "untrusted_certificate": "its certificate is not trusted",
}


def _registry_tls_reason(message: str) -> str | None:
    """The handshake's failure in the vocabulary of ``api.kafka.tls``, where Python's ssl names it."""
    if "Hostname mismatch" in message or "IP address mismatch" in message:
        return "hostname_mismatch"
    if "certificate has expired" in message:
        return "expired_certificate"
    if "not trusted" in message or "CERTIFICATE_VERIFY_FAILED" in message:
        return "untrusted_certificate"
    return None


def _lower(title: str) -> str:
    return title[0].lower() + title[1:]


def _registry_kind(error: JobError) -> tuple[str, bool]:
    """The kind of a registry failure, and whether it was the TLS handshake."""
    if error.kind == "registry_auth":
        return "auth", False
    if isinstance(error, RegistryUnavailable) and error.how != "error":
        return ("unreachable", True) if error.how == "tls" else (error.how, False)
    return "error", False


def probe_connection(
    *, session: Session, ctx: TenantContext, secrets: SecretStore, connection_id: uuid.UUID, timeout_s: float,
    egress: EgressPolicy,
) -> ConnectionTestResult:
    conn = service.get_connection(session=session, ctx=ctx, connection_id=connection_id)
    config, registry = client_configs.client_config(conn, secrets), client_configs.registry_config(conn, secrets)
    # Nothing of the database is held across the outbound calls, which go at the pace of a server the
    # tenant names: the read's transaction ends here and its connection goes back to the pool.
    session.commit()
    return _with_registry(_probe(config, timeout_s, egress), registry, timeout_s, egress)


def probe_spec(*, spec: ConnectionSpec, timeout_s: float, egress: EgressPolicy) -> ConnectionTestResult:
    try:
        config = client_configs.spec_client_config(spec)
    except KafkaConfigError as exc:
        raise _unusable(exc) from None
    check_addresses(spec, egress)
    registry = client_configs.spec_registry_config(spec)
    return _with_registry(_probe(config, timeout_s, egress), registry, timeout_s, egress)


def _with_registry(
    result: ConnectionTestResult, registry: RegistryConfig | None, timeout_s: float, egress: EgressPolicy
) -> ConnectionTestResult:
    """The cluster's ``result``, with the registry's test where the connection has a registry."""
    if registry is None:
        return result
    checked = dataclasses.replace(registry, egress=egress)
    return result.model_copy(update={"schema_registry": _probe_registry(checked, timeout_s)})


def _probe_registry(config: RegistryConfig, timeout_s: float) -> SchemaRegistryTestResult:
    try:
        client = RegistryClient(config, timeout_s=timeout_s)
    except (ssl.SSLError, ValueError):
        raise ValidationFailed.field("schema_registry.ca_pem", "ca_pem is not a PEM CA certificate bundle") from None
    try:
        with client:
            client.subjects()
    except JobError as exc:
        log.info("schema registry test of %s failed: %s", config.host, redact(exc.message, config.secret_values()))
        if isinstance(exc, RegistryUnavailable) and exc.how == "denied":
            raise EgressDenied("schema_registry.url", exc.message) from None
        raise SchemaRegistryTestFailed(exc) from None
    return SchemaRegistryTestResult(url=config.url)


def _unusable(exc: KafkaClientError) -> ValidationFailed:
    """Settings no client can be made of: by their field where Inlet's own checks name it."""
    detail = f"The connection settings cannot make a Kafka client: {exc.message}"
    if isinstance(exc, KafkaConfigError):
        return ValidationFailed.field(exc.field, detail)
    return ValidationFailed(detail)


def _probe(config: KafkaClientConfig, timeout_s: float, egress: EgressPolicy) -> ConnectionTestResult:
    try:
        with KafkaClient(config, egress=egress, timeout_s=timeout_s, client_id="inlet-connection-test") as client:
            metadata = client.cluster_metadata()
    except KafkaConfigError as exc:
        raise _unusable(exc) from None
    except KafkaEgressDenied as exc:
        if exc.kind in _EGRESS_FIELDS:
            raise EgressDenied(_EGRESS_FIELDS[exc.kind], exc.message) from None
        raise ConnectionTestFailed(exc) from None
    except KafkaTokenError as exc:
        log.info("connection test: no token from the token endpoint: %s", exc.message)
        raise TokenFetchFailed(exc) from None
    except KafkaClientError as exc:
        if exc.kind == "config":  # librdkafka refused a setting
            raise _unusable(exc) from None
        log.info("connection test to %s failed: %s", config.bootstrap_servers, exc.kind)
        tls = None
        if config.security_protocol.endswith("SSL") and exc.kind in ("tls", "timeout"):
            tls = diagnose(config, timeout_s=timeout_s, egress=egress)
        if tls is not None:
            exc.kind = "tls"  # what looked like a silent cluster was a refused handshake
        raise ConnectionTestFailed(exc, tls) from None
    return ConnectionTestResult(
        ok=True, cluster_id=metadata.cluster_id,
        brokers=[BrokerRead(id=b.id, host=b.host, port=b.port) for b in metadata.brokers],
        topics_visible=metadata.topic_count,
    )
