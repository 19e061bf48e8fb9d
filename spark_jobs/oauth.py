"""OAUTHBEARER tokens that Inlet fetches itself, through the egress policy, for librdkafka.

Left to itself, librdkafka's ``sasl.oauthbearer.method=oidc`` looks the token endpoint up with its
own resolver (no egress check, and a second lookup an attacker's DNS could answer differently) and
reports a refusal with the token server's body. Instead ``with_token_source`` swaps a client config's
OIDC settings for an ``oauth_cb``: a client-credentials POST (RFC 6749 §4.4, the client's id and
secret as HTTP basic auth, as librdkafka sends them) through ``egress.http_client``. The first token
is fetched at once, so a failure is a ``TokenRefused`` named by kind and status before any client
exists, never by the server's body:

- ``token_endpoint_refused``: the egress policy refuses the endpoint's address;
- ``token_endpoint_unreachable``: no connection, a TLS failure or no answer in time;
- an RFC 6749 error code the server answered (``invalid_client``, ``invalid_scope``, ...), the only
  part of its body ever read back, and only when it is one of those codes;
- ``unauthorized``: any other 401 or 403; ``invalid_token``: a 200 without an access token;
  ``token_endpoint_error``: any other status.

A ``TokenSource`` is picklable, so it travels to Spark executors inside a read or write plan with
the token already fetched on the driver; it fetches a new one when that one is near its expiry: in
its last fifth, or its last minute for a token that lives longer than five. A token expires at the
earlier of its ``exp`` claim and the answer's ``expires_in``: a broker refuses a JWT past its
``exp`` whatever the token server said alongside it, so trusting a longer ``expires_in`` would have
librdkafka keep, and re-authenticate with, a token the broker no longer takes.
"""

from __future__ import annotations

import base64
import json
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from spark_jobs.egress import EgressPolicy, EgressRefused, http_client
from spark_jobs.errors import JobError, JobErrorKind
from spark_jobs.outbound import AnswerRefused, read_capped

OIDC_KEYS = frozenset({
    "sasl.oauthbearer.method", "sasl.oauthbearer.client.id", "sasl.oauthbearer.client.secret",
    "sasl.oauthbearer.token.endpoint.url", "sasl.oauthbearer.scope", "sasl.oauthbearer.extensions",
})
RFC6749_ERRORS = frozenset({"invalid_request", "invalid_client", "invalid_grant", "unauthorized_client",
                            "unsupported_grant_type", "invalid_scope"})
REFRESH_MARGIN_S = 60.0  # at most this close to its expiry is a token handed out (a fifth of a short one's life)
DEFAULT_LIFETIME_S = 300.0  # for a token that says nothing of its expiry
_MAX_BODY = 65_536


class TokenRefused(Exception):
    """No token: ``kind`` says why (see the module), ``status`` is the endpoint's answer if any."""

    def __init__(self, kind: str, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.kind, self.message, self.status = kind, message, status


@dataclass(frozen=True)
class Token:
    value: str
    expires_at: float  # seconds since the epoch
    principal: str
    fetched_at: float = 0.0

    def fresh(self, now: float) -> bool:
        """Whether the token may still be handed out at ``now`` (see the module on the margin)."""
        margin = min(REFRESH_MARGIN_S, (self.expires_at - self.fetched_at) / 5)
        return now < self.expires_at - margin


def _jwt_claims(token: str) -> dict[str, Any]:
    """The claims of a JWT, unverified (the broker verifies it): only ``sub`` and ``exp`` are read."""
    try:
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (IndexError, ValueError):
        return {}
    return claims if isinstance(claims, dict) else {}


@dataclass
class TokenSource:
    """Client credentials for one token endpoint; called by librdkafka as its ``oauth_cb``."""

    client_id: str
    client_secret: str = field(repr=False)
    token_endpoint_url: str
    egress: EgressPolicy
    scope: str | None = None
    extensions: dict[str, str] = field(default_factory=dict)
    timeout_s: float = 10.0
    _token: Token | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_lock"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, _lock=threading.Lock())

    def token(self) -> Token:
        """The current token, fetched anew when there is none or it is near its expiry."""
        with self._lock:
            if self._token is None or not self._token.fresh(time.time()):
                self._token = self.fetch()
            return self._token

    def __call__(self, _oauthbearer_config: str) -> tuple[str, float, str, dict[str, str]]:
        token = self.token()
        return token.value, token.expires_at, token.principal, dict(self.extensions)

    def fetch(self) -> Token:
        """One client-credentials request; ``TokenRefused`` naming the failure, never the body."""
        form = {"grant_type": "client_credentials", **({"scope": self.scope} if self.scope else {})}
        try:
            # timeout_s is the request's whole budget, its answer's end included (``outbound``).
            with http_client(self.egress, timeout=self.timeout_s, total_s=self.timeout_s) as client, client.stream(
                    "POST", self.token_endpoint_url, data=form, auth=(self.client_id, self.client_secret),
                    headers={"accept": "application/json"}) as response:
                status, body = response.status_code, read_capped(response, _MAX_BODY)
        except AnswerRefused as exc:
            raise TokenRefused("token_endpoint_error", f"the token endpoint answered, and {exc}") from None
        except EgressRefused as exc:
            raise TokenRefused("token_endpoint_refused", f"the token endpoint is refused by the egress policy: "
                                                         f"{exc.message}") from None
        except httpx.TimeoutException:
            raise TokenRefused("token_endpoint_unreachable", "the token endpoint did not answer in time") from None
        except httpx.HTTPError as exc:
            reason = "the TLS handshake failed" if "SSL" in str(exc) or "CERTIFICATE" in str(exc) else type(exc).__name__
            raise TokenRefused("token_endpoint_unreachable", f"the token endpoint could not be reached ({reason})") from None
        try:
            answer = json.loads(body)
        except ValueError:
            answer = None
        answer = answer if isinstance(answer, dict) else {}
        if status == 200:
            return self._token_of(answer)
        error = answer.get("error")
        if isinstance(error, str) and error in RFC6749_ERRORS:
            raise TokenRefused(error, f"the token endpoint refused the request: {error} ({status})", status)
        if status in (401, 403):
            raise TokenRefused("unauthorized", f"the token endpoint refused the client credentials ({status})", status)
        redirect = " (redirects are not followed)" if 300 <= status < 400 else ""
        raise TokenRefused("token_endpoint_error", f"the token endpoint answered {status}{redirect}", status)

    def _token_of(self, answer: dict[str, Any]) -> Token:
        value = answer.get("access_token")
        if not isinstance(value, str) or not value or any(c.isspace() for c in value):
            raise TokenRefused("invalid_token", "the token endpoint answered 200 without an access token", 200)
        claims = _jwt_claims(value)
        now = time.time()
        ends = []
        expires_in = answer.get("expires_in")
        if isinstance(expires_in, (int, float)) and not isinstance(expires_in, bool) and expires_in > 0:
            ends.append(now + float(expires_in))
        exp = claims.get("exp")
        if isinstance(exp, (int, float)) and not isinstance(exp, bool):
            ends.append(float(exp))
        expires_at = min(ends) if ends else now + DEFAULT_LIFETIME_S
        sub = claims.get("sub")
        return Token(value, expires_at, sub if isinstance(sub, str) and sub else self.client_id, fetched_at=now)


_EXTENSION_KEY = re.compile(r"[A-Za-z]+\Z")
_EXTENSION_VALUE = re.compile(r"[\x21-\x7E \t\r\n]+\Z")


def parse_extensions(text: str) -> dict[str, str]:
    """``key=value,key=value`` (librdkafka's ``sasl.oauthbearer.extensions``) as a map, checked as
    KIP-342 / RFC 7628 §3.1 have them: a key of letters only and never ``auth``, a value of printable
    ASCII, spaces and tabs; ``ValueError`` naming the pair by position (values are never repeated)."""
    extensions: dict[str, str] = {}
    for position, pair in enumerate(text.split(","), start=1):
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not _EXTENSION_KEY.match(key):
            raise ValueError(f"SASL extension {position} is not key=value with a key of letters only (A-Z, a-z)")
        if key == "auth":
            raise ValueError(f"SASL extension {position}: the key auth is reserved for the token itself")
        if not _EXTENSION_VALUE.match(value.strip()):
            raise ValueError(f"SASL extension {position} ({key}): the value must be printable ASCII, not empty")
        if key in extensions:
            raise ValueError(f"SASL extension {position}: the key {key} is given twice")
        extensions[key] = value.strip()
    return extensions


def uses_oidc(config: Mapping[str, Any]) -> bool:
    return config.get("sasl.oauthbearer.method") == "oidc"


def with_token_source(config: Mapping[str, Any], egress: EgressPolicy, *, timeout_s: float = 10.0) -> dict[str, Any]:
    """``config`` with its OIDC settings (if any) replaced by an ``oauth_cb`` that fetches through
    ``egress``; the first token is fetched now (``TokenRefused`` if it cannot be had)."""
    if not uses_oidc(config):
        return dict(config)
    text = str(config.get("sasl.oauthbearer.extensions") or "").strip()
    extensions = parse_extensions(text) if text else {}
    source = TokenSource(
        client_id=str(config["sasl.oauthbearer.client.id"]), client_secret=str(config["sasl.oauthbearer.client.secret"]),
        token_endpoint_url=str(config["sasl.oauthbearer.token.endpoint.url"]), egress=egress,
        scope=str(config["sasl.oauthbearer.scope"]) if config.get("sasl.oauthbearer.scope") else None,
        extensions=extensions, timeout_s=timeout_s,
    )
    source.token()
    return {**{k: v for k, v in config.items() if k not in OIDC_KEYS}, "oauth_cb": source}


_JOB_KINDS: Mapping[str, JobErrorKind] = {"token_endpoint_refused": "invalid_spec", "token_endpoint_unreachable":
                                         "kafka_unavailable", "token_endpoint_error": "kafka_unavailable"}


def job_client_config(config: Mapping[str, Any], egress: EgressPolicy) -> dict[str, Any]:
    """``with_token_source`` in a run: a token that cannot be had fails it as a ``JobError``
    (``kafka_auth`` for refused credentials, ``kafka_unavailable`` for an unreachable endpoint,
    ``invalid_spec`` for one the egress policy refuses)."""
    try:
        return with_token_source(config, egress)
    except ValueError as exc:  # SASL extensions that were stored before they were checked
        raise JobError("invalid_spec", f"sasl.oauthbearer.extensions: {exc}") from None
    except TokenRefused as exc:
        raise JobError(_JOB_KINDS.get(exc.kind, "kafka_auth"), f"no OAuth token ({exc.kind}): {exc.message}") from None
