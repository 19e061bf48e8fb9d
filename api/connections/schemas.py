"""Connections as the API takes and shows them.

Credentials (the cluster's and the schema registry's) and the TLS private key are write-only: they go
to the secret store and never come back. On PUT and PATCH an omitted write-only field keeps its stored
value and ``null`` removes it, so a client that cannot read them back (Terraform) still round-trips
cleanly.
"""

from __future__ import annotations

import ipaddress
import uuid
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationInfo, field_validator, model_validator

from api.core.errors import field_error
from api.core.urls import HOSTNAME, check_http_url
from api.kafka.config import ALLOWED_CLIENT_OPTIONS, EXTENSIONS_OPTION, SaslMechanism, SecurityProtocol
from spark_jobs.public import parse_extensions

CredentialsStatus = Literal["ok", "missing", "unknown"]
RegistryAuth = Literal["none", "basic", "bearer"]

_PEM = Field(default=None, max_length=65_536)


def parse_bootstrap_servers(value: str) -> list[tuple[str, int]]:
    """``host:port[,host:port…]`` (IPv6 as ``[::1]:9092``) → pairs; ``ValueError`` naming the bad entry."""
    entries = value.split(",")
    if len(entries) > 50:
        raise ValueError("at most 50 bootstrap servers")
    out = []
    # Messages name the entry's position, never its text: a password pasted here must not come back.
    for position, raw in enumerate(entries, start=1):
        entry = raw.strip()
        host, sep, port = entry.rpartition(":")
        if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
            raise ValueError(f"entry {position} is not host:port with a port from 1 to 65535")
        if host.startswith("["):
            try:
                ipaddress.IPv6Address(host.strip("[]"))
            except ValueError:
                raise ValueError(f"entry {position}: the bracketed host is not an IPv6 address") from None
        elif not HOSTNAME.match(host):
            raise ValueError(f"entry {position}: the host is not a valid host name or IPv4 address")
        out.append((host, int(port)))
    return out


class SaslCredentials(BaseModel):
    model_config = ConfigDict(extra="forbid")

    username: str = Field(min_length=1, max_length=256)
    password: SecretStr = Field(min_length=1, max_length=1024)


class OAuthCredentials(BaseModel):
    model_config = ConfigDict(extra="forbid")

    client_id: str = Field(min_length=1, max_length=256)
    client_secret: SecretStr = Field(min_length=1, max_length=2048)
    token_endpoint_url: str = Field(min_length=1, max_length=2048, pattern=r"^https?://\S+$")
    scope: str | None = Field(default=None, max_length=1024)

    @field_validator("token_endpoint_url")
    @classmethod
    def _token_endpoint(cls, url: str) -> str:
        check_http_url(url, credentials_hint="send them as client_id and client_secret")
        return url


class SslSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ca_pem: str | None = _PEM
    certificate_pem: str | None = _PEM
    key_pem: SecretStr | None = Field(default=None, max_length=65_536, description="Write-only")
    key_password: SecretStr | None = Field(default=None, max_length=1024, description="Write-only")
    endpoint_identification: Literal["https", "none"] = "https"


def check_registry_url(url: str) -> str:
    """An http(s) URL with a host and no credentials in it; ``ValueError`` saying what is wrong (never
    repeating the URL: a password pasted into it must not come back)."""
    parts = check_http_url(url, credentials_hint="send them as schema_registry.credentials")
    if parts.query or parts.fragment or url.endswith(("?", "#")):
        raise ValueError("the URL must not have a query or a fragment: give the registry's base URL")
    return url


class RegistryBasicAuth(BaseModel):
    model_config = ConfigDict(extra="forbid")

    username: str = Field(min_length=1, max_length=256)
    password: SecretStr = Field(min_length=1, max_length=1024)


class RegistryBearerAuth(BaseModel):
    model_config = ConfigDict(extra="forbid")

    token: SecretStr = Field(min_length=1, max_length=8192)


class SchemaRegistrySettings(BaseModel):
    """A Confluent-compatible Schema Registry that the cluster's producers register their schemas in."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(min_length=1, max_length=2048, examples=["https://registry.example.com:8081"],
                     description="The registry's base URL (http or https), without credentials")
    credentials: RegistryBasicAuth | RegistryBearerAuth | None = Field(
        default=None, description="Write-only: username and password (HTTP basic auth), or a bearer token")
    ca_pem: str | None = Field(default=None, max_length=65_536,
                               description="CA bundle that signs the registry's certificate (https)")
    endpoint_identification: Literal["https", "none"] = Field(
        default="https", description="https: check the registry's host name against its certificate; none: do not")

    @field_validator("url")
    @classmethod
    def _url(cls, url: str) -> str:
        return check_registry_url(url)

    @field_validator("credentials", mode="before")
    @classmethod
    def _one_kind(cls, value: Any) -> Any:
        # Said once, at ``credentials``, rather than once per member of the union.
        if isinstance(value, dict) and "token" in value and ({"username", "password"} & set(value)):
            raise ValueError("give username and password (basic auth) or a token (bearer), not both")
        return value

    @model_validator(mode="after")
    def _tls_for_https(self) -> SchemaRegistrySettings:
        if self.ca_pem is not None and not self.url.startswith("https://"):
            raise field_error("ca_pem", "ca_pem is only used with an https:// url")
        return self


class ConnectionSpec(BaseModel):
    """The writable shape of a connection (POST, PUT)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    bootstrap_servers: str = Field(min_length=1, max_length=2048, examples=["broker-1:9092,broker-2:9092"])
    security_protocol: SecurityProtocol = "PLAINTEXT"
    sasl_mechanism: SaslMechanism | None = None
    credentials: SaslCredentials | OAuthCredentials | None = Field(default=None, description="Write-only")
    ssl: SslSettings | None = None
    options: dict[str, str | int | bool] = Field(default_factory=dict, max_length=64)
    schema_registry: SchemaRegistrySettings | None = Field(
        default=None, description="The schema registry of the cluster's Avro, Protobuf and JSON Schema records")

    @field_validator("bootstrap_servers")
    @classmethod
    def _bootstrap(cls, value: str) -> str:
        parse_bootstrap_servers(value)
        return value

    @field_validator("options")
    @classmethod
    def _options(cls, value: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        refused = sorted(set(value) - ALLOWED_CLIENT_OPTIONS)
        if refused:
            raise ValueError(f"options not allowed: {', '.join(refused)} (see the client options allow-list)")
        if any(isinstance(v, str) and len(v) > 1024 for v in value.values()):
            raise ValueError("option values are at most 1024 characters")
        if EXTENSIONS_OPTION in value:
            if info.data.get("sasl_mechanism") != "OAUTHBEARER":  # fields are checked in order: it is known here
                raise ValueError(f"{EXTENSIONS_OPTION} is only used with sasl_mechanism OAUTHBEARER")
            try:
                parse_extensions(str(value[EXTENSIONS_OPTION]))
            except ValueError as exc:
                raise ValueError(f"{EXTENSIONS_OPTION}: {exc}") from None
        return value

    @model_validator(mode="after")
    def _consistent(self) -> ConnectionSpec:
        sasl = self.security_protocol.startswith("SASL_")
        if sasl and self.sasl_mechanism is None:
            raise field_error("sasl_mechanism", f"security_protocol {self.security_protocol} needs a sasl_mechanism")
        if not sasl and self.sasl_mechanism is not None:
            raise field_error("sasl_mechanism", "sasl_mechanism is only used with SASL_PLAINTEXT or SASL_SSL, "
                                                f"not {self.security_protocol}")
        if self.ssl is not None and not self.security_protocol.endswith("SSL"):
            raise field_error("ssl", f"ssl settings are only used with SSL or SASL_SSL, not {self.security_protocol}")
        if self.credentials is not None:
            if not sasl:
                raise field_error("credentials", "credentials are only used with SASL_PLAINTEXT or SASL_SSL")
            wants_oauth = self.sasl_mechanism == "OAUTHBEARER"
            if wants_oauth != isinstance(self.credentials, OAuthCredentials):
                kind = "client_id, client_secret, token_endpoint_url" if wants_oauth else "username and password"
                raise field_error("credentials", f"sasl_mechanism {self.sasl_mechanism} takes credentials with {kind}")
        return self


class SslRead(BaseModel):
    ca_pem: str | None
    certificate_pem: str | None
    endpoint_identification: Literal["https", "none"]
    has_key: bool


class SchemaRegistryRead(BaseModel):
    url: str
    ca_pem: str | None
    endpoint_identification: Literal["https", "none"]
    auth: RegistryAuth = Field(description="Which credentials are stored (never shown): none, basic or bearer")


class ConnectionRead(BaseModel):
    id: uuid.UUID
    name: str
    bootstrap_servers: str
    security_protocol: SecurityProtocol
    sasl_mechanism: SaslMechanism | None
    ssl: SslRead | None
    options: dict[str, str | int | bool]
    schema_registry: SchemaRegistryRead | None
    has_credentials: bool
    credentials_version: int | None = Field(description="Version of the stored secret; moves on every rotation")
    credentials_status: CredentialsStatus | None = Field(default=None, description=(
        "Whether that version is still in the secret store: missing means runs and tests cannot use the "
        "connection until new credentials are sent; unknown, that the store cannot be asked now; null "
        "without credentials"))
    created_at: datetime
    updated_at: datetime


class BrokerRead(BaseModel):
    id: int
    host: str
    port: int


class SchemaRegistryTestResult(BaseModel):
    """The registry answered as a schema registry does (its subjects, to these credentials)."""

    url: str


class ConnectionTestResult(BaseModel):
    """What a successful connection test saw (a failure is a problem+json instead)."""

    ok: Literal[True] = True
    cluster_id: str | None
    brokers: list[BrokerRead]
    topics_visible: int = Field(description="Topics the credentials can see (Kafka's internal topics excluded)")
    schema_registry: SchemaRegistryTestResult | None = Field(
        default=None, description="What the connection's schema registry answered; null without one")
