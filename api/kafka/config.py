"""``KafkaClientConfig``: a connection's settings turned into a librdkafka configuration.

Security settings come only through typed fields (protocol, SASL mechanism, credentials, inline
PEMs); extra tuning goes through ``options``, limited to ``ALLOWED_CLIENT_OPTIONS``. The allow-list
keeps out what a tenant must not control: file paths and plugins (``ssl.ca.location``,
``plugin.library.paths``: they read or load files on Inlet's hosts), the security settings the typed
fields own, and consumer behaviour the control plane decides (``group.id``, ``auto.offset.reset``,
commits). ``client.dns.lookup`` is kept out too: its ``resolve_canonical_bootstrap_servers_only``
connects to the names a reverse lookup of the bootstrap addresses gives, which the egress policy
never saw.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from api.kafka.errors import KafkaConfigError
from spark_jobs.public import parse_extensions

SecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
SaslMechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]

SECURITY_PROTOCOLS: frozenset[str] = frozenset(get_args(SecurityProtocol))
SASL_MECHANISMS: frozenset[str] = frozenset(get_args(SaslMechanism))

ALLOWED_CLIENT_OPTIONS: frozenset[str] = frozenset(
    {
        "client.id",
        "client.rack",
        "broker.address.family",
        "broker.address.ttl",
        "socket.timeout.ms",
        "socket.keepalive.enable",
        "socket.nagle.disable",
        "socket.send.buffer.bytes",
        "socket.receive.buffer.bytes",
        "socket.connection.setup.timeout.ms",
        "connections.max.idle.ms",
        "reconnect.backoff.ms",
        "reconnect.backoff.max.ms",
        "retry.backoff.ms",
        "retry.backoff.max.ms",
        "metadata.max.age.ms",
        "topic.metadata.refresh.interval.ms",
        "topic.metadata.propagation.max.ms",
        "api.version.request",
        "api.version.request.timeout.ms",
        "broker.version.fallback",
        "message.max.bytes",
        "receive.message.max.bytes",
        "fetch.max.bytes",
        "fetch.min.bytes",
        "fetch.wait.max.ms",
        "max.partition.fetch.bytes",
        "queued.max.messages.kbytes",
        "isolation.level",
        "check.crcs",
        "ssl.cipher.suites",
        "ssl.curves.list",
        "ssl.sigalgs.list",
        "sasl.oauthbearer.extensions",
    }
)

# SASL extensions a provider needs beside the token (Confluent Cloud: logicalCluster, identityPoolId).
EXTENSIONS_OPTION = "sasl.oauthbearer.extensions"
_REDACTED = "[redacted]"
_SECRET_KEYS = frozenset({"sasl.password", "sasl.oauthbearer.client.secret", "ssl.key.pem", "ssl.key.password"})
_PEM_KEYS = frozenset({"ssl.ca.pem", "ssl.certificate.pem"})
_SSL_FIELDS = frozenset({"ca_pem", "certificate_pem", "key_pem", "key_password", "endpoint_identification"})
_PASSWORD_FIELDS = frozenset({"username", "password"})
_OAUTH_FIELDS = frozenset({"client_id", "client_secret", "token_endpoint_url", "scope"})


def _reveal(value: Any) -> str:
    # Accepts pydantic's SecretStr without importing pydantic: the connections domain may pass either.
    getter = getattr(value, "get_secret_value", None)
    return str(getter() if getter else value)


def _option_value(key: str, value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    raise KafkaConfigError(f"option {key!r} must be a string, number or boolean", field="options")


# librdkafka's size settings a tenant may set, under the operator's ceiling (INLET_KAFKA_MAX_FETCH_BYTES,
# default 64 MiB): librdkafka's defaults sit under it (fetch.max.bytes 50 MiB, receive.message.max.bytes
# 100 MB, which must exceed fetch.max.bytes by 512, queued.max.messages.kbytes 64 MiB), its maxima near
# 2 GB a setting. They bound compressed bytes: what a run holds decompressed is spark_jobs.read_budget's.
DEFAULT_MAX_FETCH_BYTES = 64 << 20


def size_ceilings(max_fetch_bytes: int) -> dict[str, int]:
    """Each size setting's ceiling (in its own unit) under an operator's ``max_fetch_bytes``."""
    return {
        "fetch.max.bytes": max_fetch_bytes,
        "max.partition.fetch.bytes": max_fetch_bytes,
        "message.max.bytes": max_fetch_bytes,
        "receive.message.max.bytes": 2 * max_fetch_bytes,
        "queued.max.messages.kbytes": max_fetch_bytes >> 10,
        "socket.receive.buffer.bytes": max_fetch_bytes,
        "socket.send.buffer.bytes": max_fetch_bytes,
    }


def check_option_sizes(options: Mapping[str, Any], max_fetch_bytes: int) -> None:
    """Refuse (``KafkaConfigError`` on ``options``) every size setting of ``options`` past its ceiling."""
    refused = []
    for key, ceiling in size_ceilings(max_fetch_bytes).items():
        if key not in options:
            continue
        value = options[key]
        if isinstance(value, bool) or not str(value).strip().isdigit():
            refused.append(f"{key} must be a whole number")
        elif int(value) > ceiling:
            refused.append(f"{key} is {int(value):,}, past the ceiling of {ceiling:,} (INLET_KAFKA_MAX_FETCH_BYTES)")
    if refused:
        raise KafkaConfigError("; ".join(refused), field="options")


def validate_client_options(options: Mapping[str, Any]) -> dict[str, str]:
    """Return ``options`` as librdkafka strings, or raise naming every key outside the allow-list
    (and what is wrong with ``sasl.oauthbearer.extensions``, see ``spark_jobs.oauth.parse_extensions``)."""
    refused = sorted(key for key in options if key not in ALLOWED_CLIENT_OPTIONS)
    if refused:
        raise KafkaConfigError(f"client option(s) not allowed: {', '.join(refused)}", field="options")
    converted = {key: _option_value(key, value) for key, value in options.items()}
    if EXTENSIONS_OPTION in converted:
        try:
            parse_extensions(converted[EXTENSIONS_OPTION])
        except ValueError as exc:
            raise KafkaConfigError(f"{EXTENSIONS_OPTION}: {exc}", field="options") from None
    return converted


@dataclass(frozen=True)
class KafkaClientConfig:
    """How to reach one Kafka cluster; validated on construction."""

    bootstrap_servers: str
    security_protocol: SecurityProtocol = "PLAINTEXT"
    sasl_mechanism: SaslMechanism | None = None
    credentials: Mapping[str, Any] | None = field(default=None, repr=False)
    ssl: Mapping[str, Any] | None = field(default=None, repr=False)
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        servers = [s.strip() for s in self.bootstrap_servers.split(",") if s.strip()]
        if not servers or any(":" not in s or not s.rsplit(":", 1)[1].isdigit() for s in servers):
            raise KafkaConfigError("bootstrap_servers must be a comma-separated list of host:port",
                                   field="bootstrap_servers")
        if self.security_protocol not in SECURITY_PROTOCOLS:
            raise KafkaConfigError(f"security_protocol must be one of {', '.join(sorted(SECURITY_PROTOCOLS))}",
                                   field="security_protocol")
        uses_sasl = self.security_protocol.startswith("SASL_")
        if uses_sasl and self.sasl_mechanism not in SASL_MECHANISMS:
            raise KafkaConfigError(f"{self.security_protocol} needs sasl_mechanism, one of "
                                   f"{', '.join(sorted(SASL_MECHANISMS))}", field="sasl_mechanism")
        if not uses_sasl and self.sasl_mechanism is not None:
            raise KafkaConfigError("sasl_mechanism is only valid with SASL_PLAINTEXT or SASL_SSL, not "
                                   f"{self.security_protocol}", field="sasl_mechanism")
        if self.ssl and self.security_protocol not in ("SSL", "SASL_SSL"):
            raise KafkaConfigError(f"ssl settings are only valid with SSL or SASL_SSL, not {self.security_protocol}",
                                   field="ssl")
        self._check_credentials()
        self._check_ssl()
        validate_client_options(self.options)
        if EXTENSIONS_OPTION in self.options and self.sasl_mechanism != "OAUTHBEARER":
            raise KafkaConfigError(f"{EXTENSIONS_OPTION} is only used with sasl_mechanism OAUTHBEARER", field="options")

    def _check_credentials(self) -> None:
        creds = dict(self.credentials or {})
        if self.sasl_mechanism is None:
            if creds:
                raise KafkaConfigError("credentials are only valid with a SASL security protocol", field="credentials")
            return
        expected = _OAUTH_FIELDS if self.sasl_mechanism == "OAUTHBEARER" else _PASSWORD_FIELDS
        required = expected - {"scope"}
        unknown = sorted(set(creds) - expected)
        if unknown:
            raise KafkaConfigError(f"unknown credential field(s) for {self.sasl_mechanism}: {', '.join(unknown)}",
                                   field="credentials")
        missing = sorted(k for k in required if not _reveal(creds.get(k) or "").strip())
        if missing:
            raise KafkaConfigError(f"{self.sasl_mechanism} needs credential field(s): {', '.join(missing)}",
                                   field="credentials")

    def _check_ssl(self) -> None:
        ssl = dict(self.ssl or {})
        unknown = sorted(set(ssl) - _SSL_FIELDS)
        if unknown:
            raise KafkaConfigError(f"unknown ssl field(s): {', '.join(unknown)}", field="ssl")
        if bool(ssl.get("certificate_pem")) != bool(ssl.get("key_pem")):
            raise KafkaConfigError("ssl client authentication needs both certificate_pem and key_pem",
                                   field="ssl.key_pem")
        if ssl.get("endpoint_identification") not in (None, True, False, "https", "none"):
            raise KafkaConfigError("ssl endpoint_identification must be true/false (or 'https'/'none')",
                                   field="ssl.endpoint_identification")

    def librdkafka_config(self) -> dict[str, str]:
        """The connection part of a librdkafka configuration (secrets included: never log it)."""
        conf: dict[str, str] = {
            "bootstrap.servers": self.bootstrap_servers,
            "security.protocol": self.security_protocol,
        }
        creds = {k: _reveal(v) for k, v in (self.credentials or {}).items() if v is not None}
        if self.sasl_mechanism == "OAUTHBEARER":
            conf |= {
                "sasl.mechanism": "OAUTHBEARER",
                "sasl.oauthbearer.method": "oidc",
                "sasl.oauthbearer.client.id": creds["client_id"],
                "sasl.oauthbearer.client.secret": creds["client_secret"],
                "sasl.oauthbearer.token.endpoint.url": creds["token_endpoint_url"],
            }
            if creds.get("scope"):
                conf["sasl.oauthbearer.scope"] = creds["scope"]
        elif self.sasl_mechanism is not None:
            conf |= {"sasl.mechanism": self.sasl_mechanism, "sasl.username": creds["username"], "sasl.password": creds["password"]}
        ssl = dict(self.ssl or {})
        for field_name, key in (
            ("ca_pem", "ssl.ca.pem"),
            ("certificate_pem", "ssl.certificate.pem"),
            ("key_pem", "ssl.key.pem"),
            ("key_password", "ssl.key.password"),
        ):
            if ssl.get(field_name):
                conf[key] = _reveal(ssl[field_name])
        if "endpoint_identification" in ssl and ssl["endpoint_identification"] is not None:
            verify = ssl["endpoint_identification"] in (True, "https")
            conf["ssl.endpoint.identification.algorithm"] = "https" if verify else "none"
        conf |= validate_client_options(self.options)
        return conf

    def redacted(self) -> dict[str, str]:
        """``librdkafka_config()`` fit for logs: secrets masked, PEM certificates summarised."""
        shown = {}
        for key, value in self.librdkafka_config().items():
            if key in _SECRET_KEYS:
                shown[key] = _REDACTED
            elif key in _PEM_KEYS:
                shown[key] = f"<PEM, {len(value)} chars>"
            else:
                shown[key] = value
        return shown

    def secret_values(self) -> list[str]:
        """Every secret string of this config, longest first, for scrubbing error texts."""
        conf = self.librdkafka_config()
        return sorted({conf[k] for k in _SECRET_KEYS if conf.get(k)}, key=len, reverse=True)
