"""How Inlet reaches a connection's cluster and its schema registry: the client configurations, with
the credentials of a given secret version (a planned run's), of a saved connection or of a spec not
saved yet (a connection test)."""

from __future__ import annotations

import uuid
from typing import Any

from sqlmodel import Session

from api.connections.models import Connection
from api.connections.schemas import ConnectionSpec, SchemaRegistrySettings
from api.connections.secret_payloads import check_secret_complete, registry_auth, secret_of, stored_secret
from api.connections.service import referenced_connection
from api.core.errors import DomainError
from api.kafka.client import KafkaClient
from api.kafka.config import KafkaClientConfig
from api.secrets.store import SecretStore
from spark_jobs.public import EgressPolicy, RegistryConfig


class RegistryMissing(DomainError):
    """A pipeline reads a registry format through a connection that has no schema registry (any more)."""

    status, code, title = 409, "schema-registry-missing", "The connection has no schema registry"

    def __init__(self, conn: Connection) -> None:
        super().__init__(f"Connection {conn.id} has no schema registry, and the pipeline's formats read their "
                         "schemas from one; add schema_registry to the connection", connection_id=str(conn.id))


def client_config(conn: Connection, secrets: SecretStore, *, version: int | None = None) -> KafkaClientConfig:
    """How to reach the connection's cluster, with its credentials (``version``: a planned run's)."""
    secret = stored_secret(conn, secrets, version)
    ssl = None
    if conn.ssl is not None:
        ssl = {k: v for k, v in conn.ssl.items() if k != "has_key" and v is not None} | secret.get("ssl_key", {})
    return KafkaClientConfig(
        bootstrap_servers=conn.bootstrap_servers, security_protocol=conn.security_protocol,
        sasl_mechanism=conn.sasl_mechanism, credentials=secret.get("credentials"),
        ssl=ssl, options=conn.options,
    )


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
    payload = secret_of(spec, {})
    check_secret_complete(spec, payload)
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
    if registry_auth(conn) != "none":  # a registry without credentials needs no secret read
        credentials = stored_secret(conn, secrets, version).get("registry_credentials", {})
    return _registry_config(conn.schema_registry, credentials)


def spec_registry_config(spec: ConnectionSpec) -> RegistryConfig | None:
    """How to reach the schema registry a not-yet-saved ``spec`` names, with the credentials it carries."""
    registry: SchemaRegistrySettings | None = spec.schema_registry
    if registry is None:
        return None
    public = registry.model_dump(include={"url", "ca_pem", "endpoint_identification"})
    return _registry_config(public, secret_of(spec, {}).get("registry_credentials", {}))
