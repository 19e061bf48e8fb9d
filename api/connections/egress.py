"""A connection's addresses under the egress policy (``spark_jobs.egress``, docs/security.md):
checked when the connection is written or tested unsaved, each refusal naming its field
(``bootstrap_servers``, ``schema_registry.url``, ``credentials.token_endpoint_url``). They are checked
again at every connection: by ``api.kafka.KafkaClient`` (bootstrap servers, advertised brokers, the
token endpoint) and by the registry client."""

from __future__ import annotations

from api.connections.schemas import ConnectionSpec, OAuthCredentials, parse_bootstrap_servers
from api.core.egress import Checks
from spark_jobs.public import EgressPolicy


def check_addresses(spec: ConnectionSpec, egress: EgressPolicy) -> None:
    """Refuse ``spec`` (``EgressDenied``) where one of its addresses is, or resolves now to, a denied one."""
    checks = Checks(egress)
    checks.hosts("bootstrap_servers", [host.strip("[]") for host, _ in parse_bootstrap_servers(spec.bootstrap_servers)])
    if spec.schema_registry is not None:
        checks.url("schema_registry.url", spec.schema_registry.url)
    if isinstance(spec.credentials, OAuthCredentials):
        checks.url("credentials.token_endpoint_url", spec.credentials.token_endpoint_url)
