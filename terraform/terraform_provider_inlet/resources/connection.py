"""``inlet_connection``: a Kafka cluster, its schema registry (the ``schema_registry_*`` attributes),
and how to reach them.

Credentials (the cluster's and the registry's) and the TLS private key are write-only in Inlet: they
go to its secret store and are never read back. State keeps what the configuration gave; a change to
them rotates the secret (a new version). A rotation made outside Terraform (``credentials_version``
moved) or credentials removed outside it show as drift, and the next apply writes the configured
ones again."""

from __future__ import annotations

import json
import os
from typing import Any

from tf.iface import (
    CreateContext,
    DeleteContext,
    ImportContext,
    PlanContext,
    ReadContext,
    Resource,
    UpdateContext,
    UpgradeContext,
)
from tf.schema import Attribute
from tf.types import Map, Number, String, Unknown
from tf.utils import Diagnostics

from terraform_provider_inlet.base import Declared
from terraform_provider_inlet.values import complete, not_found, option_texts, reported, unknown_when_changed

IMPORT_CREDENTIALS_ENV = "INLET_IMPORT_CREDENTIALS"

SASL = ("sasl_username", "sasl_password")
OAUTH = ("oauth_client_id", "oauth_client_secret", "oauth_token_endpoint_url", "oauth_scope")
SSL_KEY = ("ssl_key_pem", "ssl_key_password")
REGISTRY_BASIC = ("schema_registry_username", "schema_registry_password")
REGISTRY_WRITE_ONLY = (*REGISTRY_BASIC, "schema_registry_token")
WRITE_ONLY = SASL + OAUTH + SSL_KEY + REGISTRY_WRITE_ONLY

ATTRIBUTES = [
    Attribute("id", String(), computed=True, description="The connection's id"),
    Attribute("name", String(), required=True),
    Attribute("bootstrap_servers", String(), required=True, description="host:port[,host:port…]"),
    Attribute("security_protocol", String(), optional=True, computed=True, default="PLAINTEXT",
              description="PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (default PLAINTEXT)"),
    Attribute("sasl_mechanism", String(), optional=True,
              description="PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER"),
    Attribute("sasl_username", String(), optional=True, description="Write-only: kept in Inlet's secret store"),
    Attribute("sasl_password", String(), optional=True, sensitive=True, description="Write-only"),
    Attribute("oauth_client_id", String(), optional=True, description="Write-only (OAUTHBEARER)"),
    Attribute("oauth_client_secret", String(), optional=True, sensitive=True, description="Write-only (OAUTHBEARER)"),
    Attribute("oauth_token_endpoint_url", String(), optional=True, description="Write-only (OAUTHBEARER)"),
    Attribute("oauth_scope", String(), optional=True, description="Write-only (OAUTHBEARER)"),
    Attribute("ssl_ca_pem", String(), optional=True, description="CA bundle that signs the brokers' certificates"),
    Attribute("ssl_certificate_pem", String(), optional=True, description="Client certificate (mutual TLS)"),
    Attribute("ssl_key_pem", String(), optional=True, sensitive=True, description="Write-only client key"),
    Attribute("ssl_key_password", String(), optional=True, sensitive=True, description="Write-only"),
    Attribute("ssl_endpoint_identification", String(), optional=True, computed=True,
              description="https (check the broker's host name, the default) or none"),
    Attribute("options", Map(String()), optional=True, description="Allowed librdkafka client options"),
    Attribute("schema_registry_url", String(), optional=True,
              description="The cluster's Confluent-compatible schema registry (http or https, no credentials in it), "
                          "for Avro, Protobuf and JSON Schema values"),
    Attribute("schema_registry_username", String(), optional=True,
              description="Write-only: HTTP basic auth to the registry, with schema_registry_password"),
    Attribute("schema_registry_password", String(), optional=True, sensitive=True, description="Write-only"),
    Attribute("schema_registry_token", String(), optional=True, sensitive=True,
              description="Write-only: a bearer token for the registry (instead of username and password)"),
    Attribute("schema_registry_ca_pem", String(), optional=True,
              description="CA bundle that signs the registry's certificate"),
    Attribute("schema_registry_endpoint_identification", String(), optional=True,
              description="https (check the registry's host name, the default) or none"),
    Attribute("credentials_version", Number(), computed=True,
              description="Version of the stored secret; moves on every rotation"),
    Attribute("credentials_status", String(), computed=True,
              description="ok, missing (the secret version is gone from the store) or unknown"),
    Attribute("etag", String(), computed=True, description="The ETag Terraform sends back as If-Match"),
]


def _path(ident: str) -> str:
    return f"/connections/{ident}"


def _credentials(state: dict[str, Any]) -> dict[str, Any] | None:
    if any(state.get(name) is not None for name in OAUTH):
        creds = {"client_id": state.get("oauth_client_id"), "client_secret": state.get("oauth_client_secret"),
                 "token_endpoint_url": state.get("oauth_token_endpoint_url")}
        if state.get("oauth_scope") is not None:
            creds["scope"] = state["oauth_scope"]
        return creds
    if any(state.get(name) is not None for name in SASL):
        return {"username": state.get("sasl_username"), "password": state.get("sasl_password")}
    return None


def _ssl(state: dict[str, Any], *, with_key: bool) -> dict[str, Any] | None:
    ssl: dict[str, Any] = {}
    for name in ("ca_pem", "certificate_pem", "endpoint_identification"):
        value = state.get(f"ssl_{name}")
        if isinstance(value, str):
            ssl[name] = value
    if with_key:
        ssl["key_pem"] = state.get("ssl_key_pem")
        ssl["key_password"] = state.get("ssl_key_password")
    return ssl or None


def _registry_auth(state: dict[str, Any]) -> str:
    """Which registry credentials ``state`` gives: none, basic or bearer (Inlet's names)."""
    if state.get("schema_registry_token") is not None:
        return "bearer"
    return "basic" if any(state.get(name) is not None for name in REGISTRY_BASIC) else "none"


def _registry(planned: dict[str, Any], prior: dict[str, Any] | None) -> dict[str, Any] | None:
    """The ``schema_registry`` Inlet takes; its credentials only when they change (as for the cluster's)."""
    if planned.get("schema_registry_url") is None:
        return None
    registry: dict[str, Any] = {"url": planned["schema_registry_url"]}
    for name in ("ca_pem", "endpoint_identification"):
        if isinstance(planned.get(f"schema_registry_{name}"), str):
            registry[name] = planned[f"schema_registry_{name}"]
    if prior is None or any(planned.get(n) != prior.get(n) for n in REGISTRY_WRITE_ONLY):
        auth = _registry_auth(planned)
        if auth == "bearer":
            registry["credentials"] = {"token": planned["schema_registry_token"]}
        elif auth == "basic":
            registry["credentials"] = {"username": planned.get("schema_registry_username"),
                                       "password": planned.get("schema_registry_password")}
        elif prior is not None:
            registry["credentials"] = None
    return registry


def request_body(planned: dict[str, Any], prior: dict[str, Any] | None) -> dict[str, Any]:
    """The connection as Inlet takes it. Write-only values are sent only when they change (Inlet keeps
    an omitted one, ``null`` removes it), so an unrelated update never rotates the secret."""
    body: dict[str, Any] = {"name": planned["name"], "bootstrap_servers": planned["bootstrap_servers"],
                            "sasl_mechanism": planned.get("sasl_mechanism"),
                            "options": planned.get("options") or {}}
    if isinstance(planned.get("security_protocol"), str):
        body["security_protocol"] = planned["security_protocol"]
    changed = prior is None or any(planned.get(n) != prior.get(n) for n in SASL + OAUTH)
    if changed:
        body["credentials"] = _credentials(planned)
    key_changed = prior is None or any(planned.get(n) != prior.get(n) for n in SSL_KEY)
    key_given = any(planned.get(n) is not None for n in SSL_KEY)
    body["ssl"] = _ssl(planned, with_key=key_changed and (key_given or prior is not None))
    body["schema_registry"] = _registry(planned, prior)
    if prior is None and body["credentials"] is None:
        del body["credentials"]
    return body


def state_from(answer: Any, etag: str | None, known: dict[str, Any]) -> dict[str, Any]:
    """State from Inlet's view of the connection, with the write-only values ``known`` still holds
    unless Inlet says they were removed or replaced outside Terraform."""
    ssl = answer.get("ssl") or {}
    state: dict[str, Any] = {
        "id": answer["id"], "name": answer["name"], "bootstrap_servers": answer["bootstrap_servers"],
        "security_protocol": answer["security_protocol"], "sasl_mechanism": answer.get("sasl_mechanism"),
        "ssl_ca_pem": ssl.get("ca_pem"), "ssl_certificate_pem": ssl.get("certificate_pem"),
        "ssl_endpoint_identification": ssl.get("endpoint_identification"),
        "options": option_texts(answer.get("options")) or None,
        "credentials_version": answer.get("credentials_version"),
        "credentials_status": answer.get("credentials_status"), "etag": etag,
    }
    if state["options"] is None and known.get("options") == {}:
        state["options"] = {}
    same_secret = known.get("credentials_version") in (None, answer.get("credentials_version"))
    for name in SASL + OAUTH:
        state[name] = known.get(name) if same_secret and answer.get("has_credentials") else None
    for name in SSL_KEY:
        state[name] = known.get(name) if same_secret and ssl.get("has_key") else None
    registry = answer.get("schema_registry") or {}
    identification = registry.get("endpoint_identification")
    state |= {
        "schema_registry_url": registry.get("url"), "schema_registry_ca_pem": registry.get("ca_pem"),
        # Not computed, so that removing the registry plans cleanly: Inlet's default reads back as the
        # configuration's null, anything else as itself.
        "schema_registry_endpoint_identification":
            None if identification == "https" and known.get("schema_registry_endpoint_identification") is None
            else identification,
    }
    kept = same_secret and _registry_auth(known) == registry.get("auth")
    for name in REGISTRY_WRITE_ONLY:
        state[name] = known.get(name) if kept else None
    return state


def check_registry(diags: Diagnostics, config: dict[str, Any]) -> None:
    """What Inlet would refuse in the ``schema_registry_*`` attributes, said before it is asked."""
    given = {name for name in REGISTRY_WRITE_ONLY if config.get(name) is not None}
    others = [f"schema_registry_{n}" for n in ("ca_pem", "endpoint_identification")] + list(REGISTRY_WRITE_ONLY)
    if config.get("schema_registry_url") is None and any(config.get(name) is not None for name in others):
        diags.add_error("The schema_registry_* attributes need schema_registry_url", path=["schema_registry_url"])
    if "schema_registry_token" in given and given & set(REGISTRY_BASIC):
        diags.add_error("Give schema_registry_username and schema_registry_password, or schema_registry_token, "
                        "not both", path=["schema_registry_token"])
    elif len(given & set(REGISTRY_BASIC)) == 1 and Unknown not in (config.get(n) for n in REGISTRY_BASIC):
        diags.add_error("Registry basic auth needs both schema_registry_username and schema_registry_password",
                        path=["schema_registry_password"])
    identification = config.get("schema_registry_endpoint_identification")
    if isinstance(identification, str) and identification not in ("https", "none"):
        diags.add_error("schema_registry_endpoint_identification must be https or none",
                        path=["schema_registry_endpoint_identification"])


class ConnectionResource(Declared, Resource):
    name = "connection"
    attributes = ATTRIBUTES
    schema_version = 2  # 2: the schema_registry_* attributes
    description = "A Kafka connection; credentials go to Inlet's secret store and never come back"

    def validate(self, diags: Diagnostics, type_name: str, config: dict[str, Any]) -> None:
        super().validate(diags, type_name, config)
        check_registry(diags, config)

    def upgrade(self, ctx: UpgradeContext, version: int, old: dict[str, Any]) -> dict[str, Any]:
        """Version 1 states had no schema registry: every attribute of it is null there."""
        return {a.name: None for a in ATTRIBUTES if a.name.startswith("schema_registry_")} | old

    def plan(self, ctx: PlanContext, current: dict[str, Any] | None, planned: dict[str, Any]) -> dict[str, Any]:
        return unknown_when_changed(planned, ctx.changed_fields, "etag", "credentials_version", "credentials_status")

    def create(self, ctx: CreateContext, planned: dict[str, Any]) -> dict[str, Any] | None:
        with reported(ctx.diagnostics, "Creating the connection"):
            answer = self.provider.client.create("/connections", request_body(planned, None))
            return complete(ATTRIBUTES, state_from(answer.body, answer.etag, planned | {"credentials_version": None}))
        return None

    def read(self, ctx: ReadContext, current: dict[str, Any]) -> dict[str, Any] | None:
        with reported(ctx.diagnostics, "Reading the connection"):
            answer = self.provider.client.find(_path(current["id"]))
            if answer is None:
                return None
            return complete(ATTRIBUTES, state_from(answer.body, answer.etag, current))
        return current

    def update(self, ctx: UpdateContext, current: dict[str, Any], planned: dict[str, Any]) -> dict[str, Any] | None:
        with reported(ctx.diagnostics, "Updating the connection"):
            answer = self.provider.client.put(_path(current["id"]), request_body(planned, current),
                                              etag=current.get("etag"))
            return complete(ATTRIBUTES, state_from(answer.body, answer.etag, planned | {"credentials_version": None}))
        return current

    def delete(self, ctx: DeleteContext, current: dict[str, Any]) -> None:
        with reported(ctx.diagnostics, "Deleting the connection"):
            self.provider.client.delete(_path(current["id"]), etag=current.get("etag"))

    def import_(self, ctx: ImportContext, id: str) -> dict[str, Any] | None:
        """Import by id. Write-only values cannot be read back: give the ones the configuration
        holds in ``INLET_IMPORT_CREDENTIALS`` (a JSON object of sasl_*/oauth_*/ssl_key_*/
        schema_registry_{username,password,token} attributes) and the first plan after the import
        shows no change."""
        supplied: dict[str, Any] = {}
        raw = os.environ.get(IMPORT_CREDENTIALS_ENV)
        if raw:
            try:
                supplied = json.loads(raw)
            except ValueError:
                supplied = None  # type: ignore[assignment]
            if not isinstance(supplied, dict) or set(supplied) - set(WRITE_ONLY):
                ctx.diagnostics.add_error(
                    f"{IMPORT_CREDENTIALS_ENV} is not a JSON object of write-only attributes",
                    f"Its keys can be: {', '.join(WRITE_ONLY)}.")
                return None
        with reported(ctx.diagnostics, "Importing the connection"):
            answer = self.provider.client.find(_path(id))
            if answer is None:
                not_found(ctx.diagnostics, "connection", id)
                return None
            return complete(ATTRIBUTES, state_from(answer.body, answer.etag, supplied))
        return None
