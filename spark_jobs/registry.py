"""A Confluent-compatible Schema Registry, as Inlet reads it: schemas by subject and version or by id.

One small HTTP client (``RegistryClient``) used by the control plane (the connection test) and by a
run (the driver resolves the subject's version; executors fetch the writer schemas their records
name). Registered schemas never change, so ``by_id`` answers from a process-wide cache after the
first fetch: a schema id costs one request per process and set of credentials, never one per record.
The cache is keyed by the credentials that fetched each schema: a registry may let one tenant read a
schema it refuses another, and one worker process serves many tenants. Each request has a total
deadline and its answer a size cap (``outbound``).

Every request goes through the egress policy (``spark_jobs.egress``): the registry's host is
resolved and checked, and the connection made to the checked address.

Failures are ``JobError``s a user can act on: ``registry_unavailable`` (unreachable, timed out, a
5xx, refused by the egress policy), ``registry_auth`` (401/403: the credentials), ``schema_not_found``
(no such subject or version). Messages name the URL's host, the path asked and the status, never the
credentials nor the registry's own words: its body is read for schemas only (a registry error's
numeric ``error_code`` aside), so whatever answers at that URL cannot make Inlet repeat it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import ssl
import threading
from dataclasses import dataclass, field
from typing import Any, Literal, Self
from urllib.parse import quote, urlsplit

import httpx

from spark_jobs.egress import EgressPolicy, EgressRefused, http_client
from spark_jobs.errors import JobError
from spark_jobs.outbound import AnswerRefused, read_capped

SchemaType = Literal["AVRO", "PROTOBUF", "JSON"]


@dataclass(frozen=True)
class RegistryConfig:
    """How to reach a registry: its URL, basic-auth or bearer credentials, and TLS trust."""

    url: str
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    token: str | None = field(default=None, repr=False)
    ca_pem: str | None = None
    verify_hostname: bool = True
    egress: EgressPolicy = field(default_factory=EgressPolicy)

    def secret_values(self) -> list[str]:
        return [s for s in (self.password, self.token) if s]

    @property
    def host(self) -> str:
        """The URL without credentials or path, for messages."""
        parts = urlsplit(self.url)
        return f"{parts.scheme}://{parts.hostname}{f':{parts.port}' if parts.port else ''}"


@dataclass(frozen=True)
class Reference:
    name: str
    subject: str
    version: int


@dataclass(frozen=True)
class RegisteredSchema:
    """A schema as the registry keeps it; ``subject``/``version`` where it was asked by subject."""

    id: int
    schema_type: SchemaType
    schema: str
    references: tuple[Reference, ...] = ()
    subject: str | None = None
    version: int | None = None


class RegistryUnavailable(JobError):
    """``registry_unavailable``, saying how: ``timeout``, ``unreachable`` (refused, DNS), ``tls`` (the
    handshake failed), ``error`` (a 5xx, or an answer that is not a registry's) or ``denied`` (the
    egress policy refuses the registry's address)."""

    def __init__(self, how: Literal["timeout", "unreachable", "tls", "error", "denied"], message: str) -> None:
        super().__init__("registry_unavailable", message)
        self.how = how


# Each keyed by who asked (``_principal_of``): a schema one tenant's credentials may read is never
# answered to another's, which the registry may refuse it (one process serves many tenants' runs).
_cache: dict[tuple[str, int], RegisteredSchema | None] = {}
_serialized: dict[tuple[str, int], bytes] = {}
_subject_versions: dict[tuple[str, int], list[tuple[str, int]]] = {}
_lock = threading.Lock()


# A registry's answer past this is refused: a schema is kilobytes, a subject list at most a few MiB.
MAX_ANSWER_BYTES = 16 << 20


class RegistryClient:
    """``timeout_s`` is each request's whole budget, from its send to its body's end (``outbound``):
    a registry that trickles its answer fails as ``timeout`` then, not when it pleases."""

    def __init__(self, config: RegistryConfig, *, timeout_s: float = 10.0, max_answer_bytes: int = MAX_ANSWER_BYTES) -> None:
        self.config = config
        self.max_answer_bytes = max_answer_bytes
        self._principal = _principal_of(config)
        auth: httpx.Auth | None = None
        headers = {"Accept": "application/vnd.schemaregistry.v1+json, application/json"}
        if config.username is not None and config.password is not None:
            auth = httpx.BasicAuth(config.username, config.password)
        elif config.token:
            headers["Authorization"] = f"Bearer {config.token}"
        verify: ssl.SSLContext | bool = True
        if config.ca_pem or not config.verify_hostname:
            context = ssl.create_default_context(cadata=config.ca_pem) if config.ca_pem else ssl.create_default_context()
            context.check_hostname = config.verify_hostname
            verify = context
        self._http = http_client(config.egress, verify=verify, base_url=config.url.rstrip("/"), auth=auth,
                                 headers=headers, timeout=timeout_s, total_s=timeout_s)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- what Inlet asks ---------------------------------------------------------------------------

    def subjects(self) -> list[str]:
        return list(self._get("/subjects") or [])

    def versions(self, subject: str) -> list[int]:
        found = self._get(f"/subjects/{quote(subject, safe='')}/versions", missing=f"subject {subject!r}")
        return sorted(int(v) for v in found)

    def version(self, subject: str, version: int | Literal["latest"]) -> RegisteredSchema:
        """A subject's schema at ``version`` (a number or ``latest``)."""
        what = f"version {version} of subject {subject!r}" if version != "latest" else f"subject {subject!r}"
        body = self._get(f"/subjects/{quote(subject, safe='')}/versions/{version}", missing=what)
        schema = _registered(body)
        with _lock:
            _cache.setdefault((self._principal, schema.id), schema)
        return schema

    def by_id(self, schema_id: int) -> RegisteredSchema | None:
        """The schema registered under ``schema_id``, or None where the registry knows no such id."""
        key = (self._principal, schema_id)
        with _lock:
            if key in _cache and _cache[key] is not None:
                return _cache[key]
        body = self._get(f"/schemas/ids/{schema_id}", missing=None)
        schema = None if body is None else _registered({**body, "id": schema_id})
        with _lock:
            if schema is not None:
                _cache[key] = schema
        return schema

    def subject_versions_of(self, schema_id: int) -> list[tuple[str, int]]:
        """The (subject, version) pairs that registered ``schema_id`` (asked once per process)."""
        key = (self._principal, schema_id)
        with _lock:
            if key in _subject_versions:
                return _subject_versions[key]
        body = self._get(f"/schemas/ids/{schema_id}/versions", missing=None) or []
        found = [(item["subject"], int(item["version"])) for item in body]
        with _lock:
            _subject_versions[key] = found
        return found

    def serialized_protobuf(self, schema_id: int) -> bytes:
        """A Protobuf schema as a serialized ``FileDescriptorProto`` (``?format=serialized``)."""
        key = (self._principal, schema_id)
        with _lock:
            if key in _serialized:
                return _serialized[key]
        body = self._get(f"/schemas/ids/{schema_id}", params={"format": "serialized"}, missing=f"schema id {schema_id}")
        raw = base64.b64decode(body["schema"])
        with _lock:
            _serialized[key] = raw
        return raw

    # --- HTTP ----------------------------------------------------------------------------------------

    def _get(self, path: str, *, params: dict[str, str] | None = None, missing: str | None = "") -> Any:
        """GET ``path`` as JSON. A 404 is None when ``missing`` is None, else ``schema_not_found``
        naming ``missing``."""
        where = f"schema registry {self.config.host}"
        try:
            with self._http.stream("GET", path, params=params) as response:
                status, body = response.status_code, read_capped(response, self.max_answer_bytes)
        except AnswerRefused as exc:
            raise RegistryUnavailable("error", f"{where} answered {path}, and {exc}: not a registry's answer") from None
        except EgressRefused as exc:
            raise RegistryUnavailable("denied", f"{where} is refused by the egress policy: {exc.message}") from None
        except httpx.TimeoutException:
            raise RegistryUnavailable("timeout", f"{where} did not answer {path} in time") from None
        except httpx.HTTPError as exc:
            tls = isinstance(exc.__context__, ssl.SSLError) or "CERTIFICATE" in str(exc) or "SSL" in str(exc)
            raise RegistryUnavailable("tls" if tls else "unreachable", f"{where} cannot be reached: {_reason(exc)}") from None
        if status in (401, 403):
            raise JobError("registry_auth", f"{where} refused the credentials ({status} on {path})")
        if status == 404:
            if missing is None:
                return None
            raise JobError("schema_not_found", f"{where} has no {missing or path} ({_answer(status, body)})")
        if status >= 500:
            raise RegistryUnavailable("error", f"{where} answered {_answer(status, body)} on {path}")
        if status != 200:
            redirect = " (redirects are not followed)" if 300 <= status < 400 else ""
            raise JobError("invalid_spec", f"{where} answered {_answer(status, body)} on {path}{redirect}")
        try:
            return json.loads(body)
        except ValueError:
            raise RegistryUnavailable("error", f"{where} answered {path} with something other than JSON") from None


_SALT = secrets.token_bytes(32)  # this process's: the keys below prove nothing outside it


def _principal_of(config: RegistryConfig) -> str:
    """Who a client asks as: its URL and credentials (and the CA it trusts), as a keyed hash."""
    who = "\0".join(v or "" for v in (config.url.rstrip("/"), config.username, config.password, config.token,
                                      config.ca_pem))
    return hmac.new(_SALT, who.encode(), hashlib.sha256).hexdigest()


def _registered(body: dict[str, Any]) -> RegisteredSchema:
    return RegisteredSchema(
        id=int(body["id"]),
        schema_type=body.get("schemaType") or "AVRO",
        schema=body["schema"],
        references=tuple(Reference(r["name"], r["subject"], int(r["version"])) for r in body.get("references") or ()),
        subject=body.get("subject"),
        version=int(body["version"]) if "version" in body else None,
    )


def _answer(status: int, body: bytes) -> str:
    """The status, with the registry's numeric ``error_code`` where it gives one: never its text."""
    try:
        code = json.loads(body).get("error_code")
    except (ValueError, AttributeError):
        code = None
    shown = f", error code {code}" if isinstance(code, int) and not isinstance(code, bool) else ""
    return f"{status}{shown}"


def _reason(exc: httpx.HTTPError) -> str:
    text = str(exc) or type(exc).__name__
    if "CERTIFICATE_VERIFY_FAILED" in text:
        return f"TLS: the registry's certificate is not trusted ({text[:200]})"
    return text[:300]
