"""The connection forms: create and edit (cluster, TLS, credentials, schema registry) and credential
rotation."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from api.connections.schemas import (
    ConnectionRead,
    ConnectionSpec,
    OAuthCredentials,
    RegistryBasicAuth,
    RegistryBearerAuth,
    SaslCredentials,
    SchemaRegistrySettings,
    SslSettings,
)
from api.core.errors import DomainError, ValidationFailed
from api.portal.forms.base import FormInvalid, Parts, PortalForm, option_value, options_text, settings_lines
from api.portal.views import FormErrors

SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
TLS_PROTOCOLS = ("SSL", "SASL_SSL")
_KEEP: Any = object()  # an edit's write-only input left empty: the stored value stays (the key is omitted)


class _CredentialInputs(PortalForm):
    """The inputs of a connection's write-only credentials, the cluster's (a SASL username and password,
    or OAuth client credentials) and its schema registry's, shared by the connection form and the
    rotation form; none is ever sent back to the browser."""

    username: str = ""
    password: str = ""
    oauth_client_id: str = ""
    oauth_client_secret: str = ""
    oauth_token_endpoint_url: str = ""
    oauth_scope: str = ""
    registry_username: str = ""
    registry_password: str = ""
    registry_token: str = ""
    etag: str = ""

    NOT_SHOWN_BACK = frozenset({"password", "oauth_client_secret", "registry_password", "registry_token"})

    @property
    def oauth(self) -> bool:
        """Whether the cluster's credentials are OAuth's (their errors then sit beside the client id)."""
        return bool(self.oauth_client_id.strip() or self.oauth_token_endpoint_url.strip())

    def errors(self, failure: DomainError, fields: Mapping[str, str] | None = None) -> FormErrors:
        if fields is None and self.oauth:
            fields = {**self.FIELDS, "credentials": "oauth_client_id"}
        return super().errors(failure, fields)

    def _sasl_credentials(self) -> dict[str, Any]:
        return {"username": self.username.strip(), "password": self.password}

    def _oauth_credentials(self) -> dict[str, Any]:
        return {"client_id": self.oauth_client_id.strip(), "client_secret": self.oauth_client_secret,
                "token_endpoint_url": self.oauth_token_endpoint_url.strip(), "scope": self.oauth_scope.strip() or None}


class ConnectionForm(_CredentialInputs):
    """The connection form, new and edit: a security protocol and the inputs it uses (a SASL mechanism
    with a username and password or OAuth client credentials, TLS settings), client options, and an
    optional schema registry (basic auth or a bearer token).

    Inputs of parts the chosen protocol does not use (the page hides them) are not sent, as the
    pipeline form leaves out the subject of a format that has none. On an edit, write-only inputs left
    empty keep what is stored, as an omitted write-only field does on PUT; credentials of another kind
    (OAuth instead of a password) must be entered."""

    name: str = ""
    bootstrap_servers: str = ""
    security_protocol: str = ""
    sasl_mechanism: str = ""
    ca_pem: str = ""
    certificate_pem: str = ""
    key_pem: str = ""
    key_password: str = ""
    endpoint_identification: str = ""
    options: str = ""
    registry_url: str = ""
    registry_auth: str = ""
    registry_ca_pem: str = ""
    registry_endpoint_identification: str = ""

    FIELDS = {
        "name": "name", "bootstrap_servers": "bootstrap_servers", "security_protocol": "security_protocol",
        "sasl_mechanism": "sasl_mechanism", "credentials": "username", "credentials.username": "username",
        "credentials.password": "password", "credentials.client_id": "oauth_client_id",
        "credentials.client_secret": "oauth_client_secret",
        "credentials.token_endpoint_url": "oauth_token_endpoint_url", "credentials.scope": "oauth_scope",
        "ssl": "key_pem", "ssl.ca_pem": "ca_pem", "ssl.certificate_pem": "certificate_pem", "ssl.key_pem": "key_pem",
        "ssl.key_password": "key_password", "ssl.endpoint_identification": "endpoint_identification",
        "options": "options",
        "schema_registry": "registry_ca_pem", "schema_registry.url": "registry_url",
        "schema_registry.ca_pem": "registry_ca_pem", "schema_registry.credentials": "registry_auth",
        "schema_registry.credentials.username": "registry_username",
        "schema_registry.credentials.password": "registry_password",
        "schema_registry.credentials.token": "registry_token",
        "schema_registry.endpoint_identification": "registry_endpoint_identification",
    }
    CONFLICT_FIELD = "name"
    # Credentials are write-only: passwords, secrets, keys and tokens are never sent back, even into their own fields.
    NOT_SHOWN_BACK = _CredentialInputs.NOT_SHOWN_BACK | {"key_pem", "key_password"}

    @classmethod
    def initial(cls) -> ConnectionForm:
        return cls(security_protocol="PLAINTEXT", registry_auth="none")

    @classmethod
    def of(cls, conn: ConnectionRead, etag: str) -> ConnectionForm:
        """The edit form of a saved connection (write-only inputs empty: empty keeps them)."""
        ssl, registry = conn.ssl, conn.schema_registry
        return cls(
            name=conn.name, bootstrap_servers=conn.bootstrap_servers, security_protocol=conn.security_protocol,
            sasl_mechanism=conn.sasl_mechanism or "", options=options_text(conn.options),
            ca_pem=(ssl.ca_pem or "") if ssl else "", certificate_pem=(ssl.certificate_pem or "") if ssl else "",
            endpoint_identification=ssl.endpoint_identification if ssl else "https",
            registry_url=registry.url if registry else "", registry_auth=registry.auth if registry else "none",
            registry_ca_pem=(registry.ca_pem or "") if registry else "",
            registry_endpoint_identification=registry.endpoint_identification if registry else "https",
            etag=etag,
        )

    @property
    def oauth(self) -> bool:
        return self.sasl_mechanism.strip() == "OAUTHBEARER"

    def spec(self, stored: ConnectionRead | None = None) -> ConnectionSpec:
        """The connection the form describes, as the API takes it; ``stored``: the connection an edit
        changes (its write-only parts are kept where their inputs are empty)."""
        parts = Parts()
        protocol = self.security_protocol.strip() or "PLAINTEXT"
        mechanism = self.sasl_mechanism.strip() if protocol in SASL_PROTOCOLS else ""
        if protocol in SASL_PROTOCOLS and not mechanism:
            parts.refuse("sasl_mechanism", f"security_protocol {protocol} needs a SASL mechanism")
        body: dict[str, Any] = {
            "name": self.name.strip(), "bootstrap_servers": self.bootstrap_servers.strip(),
            "security_protocol": protocol, "sasl_mechanism": mechanism or None,
            "options": {k: option_value(v) for k, v in settings_lines(self.options, parts, "options",
                                                                         "client.id=inlet").items()},
            "ssl": self._ssl(parts, stored) if protocol in TLS_PROTOCOLS else None,
            "schema_registry": self._registry(parts, stored),
        }
        credentials = self._credentials(parts, mechanism, stored)
        if credentials is not _KEEP:
            body["credentials"] = credentials
        return parts.whole(ConnectionSpec, body, "The connection is not valid")

    def _credentials(self, parts: Parts, mechanism: str, stored: ConnectionRead | None) -> Any:
        """The cluster's credentials for ``mechanism``: None without SASL, ``_KEEP`` on an edit that
        leaves the stored ones of the same kind."""
        if not mechanism:
            return None
        oauth = mechanism == "OAUTHBEARER"
        given = ((self.oauth_client_id, self.oauth_client_secret, self.oauth_token_endpoint_url, self.oauth_scope)
                 if oauth else (self.username, self.password))
        if not any(value.strip() for value in given):
            same_kind = stored is not None and stored.sasl_mechanism is not None and stored.has_credentials \
                and (stored.sasl_mechanism == "OAUTHBEARER") == oauth
            return _KEEP if same_kind else None
        if oauth:
            return parts.check(OAuthCredentials, self._oauth_credentials(), "credentials")
        return parts.check(SaslCredentials, self._sasl_credentials(), "credentials")

    def _ssl(self, parts: Parts, stored: ConnectionRead | None) -> SslSettings | None:
        """TLS settings where the form gives any (or the connection had them); an empty key input keeps
        the stored key while a client certificate is given, and removes it with the certificate."""
        ssl: dict[str, Any] = {"ca_pem": self.ca_pem.strip() or None,
                               "certificate_pem": self.certificate_pem.strip() or None,
                               "endpoint_identification": self.endpoint_identification.strip() or "https"}
        if self.key_pem.strip() or self.key_password:
            ssl.update(key_pem=self.key_pem.strip() or None, key_password=self.key_password or None)
        elif ssl["certificate_pem"] is None and stored is not None and stored.ssl is not None and stored.ssl.has_key:
            ssl.update(key_pem=None, key_password=None)
        had = stored is not None and stored.ssl is not None
        if not had and not any(ssl.get(k) for k in ("ca_pem", "certificate_pem", "key_pem")) \
                and ssl["endpoint_identification"] == "https":
            return None
        return parts.check(SslSettings, ssl, "ssl")

    def _registry(self, parts: Parts, stored: ConnectionRead | None) -> SchemaRegistrySettings | None:
        """The schema registry, where the form names one (a URL, or anything else of the registry's)."""
        auth = self.registry_auth.strip() or "none"
        basic, bearer = (self.registry_username.strip(), self.registry_password), self.registry_token.strip()
        if not any((self.registry_url.strip(), *basic, bearer, self.registry_ca_pem.strip())):
            return None
        registry: dict[str, Any] = {"url": self.registry_url.strip(), "ca_pem": self.registry_ca_pem.strip() or None,
                                    "endpoint_identification": self.registry_endpoint_identification.strip() or "https"}
        kept = stored is not None and stored.schema_registry is not None and stored.schema_registry.auth == auth
        at = "schema_registry.credentials"
        if auth == "basic" and (any(basic) or not kept):
            registry["credentials"] = parts.check(RegistryBasicAuth, {"username": basic[0], "password": basic[1]}, at)
        elif auth == "bearer" and (bearer or not kept):
            registry["credentials"] = parts.check(RegistryBearerAuth, {"token": bearer}, at)
        elif auth == "none":
            registry["credentials"] = None
        elif auth not in ("basic", "bearer"):
            parts.refuse(at, "Choose none, basic (username and password) or bearer (a token)")
        return parts.check(SchemaRegistrySettings, registry, "schema_registry")


class RotationForm(_CredentialInputs):
    """New credentials for a saved connection: the cluster's (of its SASL mechanism's kind) and the
    schema registry's (of its kind), each optional; it becomes the JSON Merge Patch the API's PATCH
    takes, and the secret a new version."""

    FIELDS = {key: value for key, value in ConnectionForm.FIELDS.items()
              if key.startswith(("credentials", "schema_registry.credentials"))}

    def to_patch(self, conn: ConnectionRead) -> dict[str, Any]:
        """The merge patch that writes the new credentials of ``conn`` (secrets as typed: the service
        validates the patched connection with the API's schema)."""
        parts = Parts()
        patch: dict[str, Any] = {}
        if conn.sasl_mechanism == "OAUTHBEARER":
            oauth = self._oauth_credentials()
            if any(oauth.values()) and parts.check(OAuthCredentials, oauth, "credentials") is not None:
                patch["credentials"] = oauth
        elif conn.sasl_mechanism is not None:
            sasl = self._sasl_credentials()
            if any(sasl.values()) and parts.check(SaslCredentials, sasl, "credentials") is not None:
                patch["credentials"] = sasl
        auth = conn.schema_registry.auth if conn.schema_registry else "none"
        registry: dict[str, Any] = {}
        if auth == "basic":
            registry = {"username": self.registry_username.strip(), "password": self.registry_password}
        elif auth == "bearer":
            registry = {"token": self.registry_token.strip()}
        model = RegistryBasicAuth if auth == "basic" else RegistryBearerAuth
        if any(registry.values()) and parts.check(model, registry, "schema_registry.credentials") is not None:
            patch["schema_registry"] = {"credentials": registry}
        if parts.errors:
            raise ValidationFailed("The new credentials are not valid", errors=parts.errors)
        if not patch:
            problems = FormErrors()
            problems.add(None, "Enter the new credentials: nothing was changed")
            raise FormInvalid(problems)
        return patch
