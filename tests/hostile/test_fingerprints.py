"""Stored idempotency fingerprints are keyed: an HMAC under the server key over the request with every
credential masked, so neither the body nor a credential can be tested against what the database keeps.

Row of issue 29: an ``Idempotency-Key`` request carrying a registry bearer token stored an unsalted
SHA-256 of the body, token included.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import typing
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from fastapi.routing import APIRoute, iter_route_contexts
from fastapi.testclient import TestClient
from pydantic import BaseModel, SecretStr
from sqlalchemy import create_engine, text
from sqlmodel import Session, col, select

from api.core.config import Settings
from api.core.migrate import alembic_config
from api.core.models import IdempotencyRecord
from api.core.redaction import SECRET_FIELDS
from api.main import create_app
from tests.factories import Tenant, assert_problem, connection_body
from tests.fixtures.dispatch import RecordingDispatcher

TOKEN = "sr-bearer-T0ken-hostile-5c1e"
OTHER_TOKEN = "sr-bearer-T0ken-hostile-other-90aa"
SERVER_KEY = "a-server-key-every-replica-shares-0123456789"


def _body(token: str = TOKEN, **overrides: Any) -> dict[str, Any]:
    return connection_body(**{"name": "registry-conn", "schema_registry": {
        "url": "https://registry.example.com:8081", "credentials": {"token": token}}, **overrides})


def _records(app: Any) -> list[IdempotencyRecord]:
    with Session(app.state.engine) as session:
        return list(session.exec(select(IdempotencyRecord).order_by(col(IdempotencyRecord.created_at))).all())


def _canonical(body: dict[str, Any], masked: frozenset[str]) -> bytes:
    def mask(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: "*" if k in masked else mask(v) for k, v in value.items()}
        if isinstance(value, list):
            return [mask(v) for v in value]
        return value
    return json.dumps(mask(body), sort_keys=True, separators=(",", ":")).encode()


def _signed_input(body: dict[str, Any], masked: frozenset[str] = frozenset(SECRET_FIELDS)) -> bytes:
    return b"POST /connections\n" + _canonical(body, masked)


def _hmac(key: bytes, message: bytes) -> str:
    derived = hmac.new(key, b"inlet/idempotency-fingerprint", hashlib.sha256).digest()
    return "hmac:" + base64.urlsafe_b64encode(hmac.new(derived, message, hashlib.sha256).digest()).decode().rstrip("=")


def _server_key_file(settings: Settings) -> bytes:
    return (Path(settings.data_dir) / "server.key").read_text().strip().encode()


def test_the_stored_fingerprint_is_an_hmac_under_the_server_key_not_a_digest_of_the_body(
    client: TestClient, app: Any, settings: Settings, tenant: Tenant
) -> None:
    body = _body()
    created = client.post("/connections", json=body, headers={**tenant.editor, "Idempotency-Key": "reg-1"})
    assert created.status_code == 201, created.text

    [record] = _records(app)
    assert (record.scope, record.key, record.status_code) == (f"tenant:{tenant.id}", "reg-1", 201)
    assert json.loads(record.body) == created.json()
    unkeyed = {
        hashlib.sha256(_signed_input(body, frozenset())).hexdigest(),
        hashlib.sha256(_signed_input(body, frozenset({"password", "client_secret", "key_pem", "key_password"})))
        .hexdigest(),  # today's masking, the token left in
        hashlib.sha256(_signed_input(body)).hexdigest(),
        hashlib.sha256(json.dumps(body).encode()).hexdigest(),
    }
    assert record.fingerprint not in unkeyed
    key = _server_key_file(settings)
    assert len(key) >= 32
    assert record.fingerprint == _hmac(key, _signed_input(body)), "an HMAC under the server key, secrets masked"
    assert record.fingerprint != _hmac(b"another-key" * 4, _signed_input(body))
    for stored in (record.fingerprint, record.body, json.dumps(record.headers)):
        assert TOKEN not in stored and "T0ken" not in stored and body["credentials"]["password"] not in stored


def test_the_token_is_no_input_of_the_fingerprint_and_another_body_is_still_refused(
    client: TestClient, app: Any, tenant: Tenant
) -> None:
    headers = {**tenant.editor, "Idempotency-Key": "reg-2"}
    first = client.post("/connections", json=_body(), headers=headers)
    assert first.status_code == 201, first.text

    replayed = client.post("/connections", json=_body(), headers=headers)
    other_token = client.post("/connections", json=_body(OTHER_TOKEN), headers=headers)

    for again in (replayed, other_token):
        assert (again.status_code, again.headers["idempotent-replayed"]) == (201, "true")
        assert again.json() == first.json()
        assert (again.headers["etag"], again.headers["location"]) == (first.headers["etag"], first.headers["location"])
    other = assert_problem(client.post("/connections", json=_body(name="other-name"), headers=headers), 422,
                           fields={"header.Idempotency-Key"})
    assert other == {"type": other["type"], "title": other["title"], "status": 422, "detail": other["detail"],
                     "instance": "/connections", "errors": [{
                         "field": "header.Idempotency-Key", "type": other["errors"][0]["type"],
                         "message": "This Idempotency-Key was already used with a different request; use a new key"}]}
    assert client.get("/connections", headers=tenant.viewer).json()["total"] == 1
    [record] = _records(app)
    with_other = client.post("/connections", json=_body(OTHER_TOKEN, name="second"),
                             headers={**tenant.editor, "Idempotency-Key": "reg-3"})
    assert with_other.status_code == 201, with_other.text
    second = next(r for r in _records(app) if r.key == "reg-3")
    assert second.fingerprint != record.fingerprint  # the name differs; the token alone would not


def test_digests_stored_unkeyed_leave_the_database(tmp_path: Path) -> None:
    """Migration 0007 scrubs the unkeyed SHA-256 digests earlier releases stored; a retry of such a
    request then matches no fingerprint and is a 422, never a second object."""
    url = f"sqlite:///{tmp_path / 'upgraded.db'}"
    command.upgrade(alembic_config(url), "0006")
    unkeyed = hashlib.sha256(_signed_input(_body(), frozenset({"password", "client_secret", "key_pem"}))).hexdigest()
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO idempotency_records (scope, key, fingerprint, status_code, body, headers, "
                          "created_at) VALUES (:scope, 'old-1', :fp, 201, '{}', '{}', '2026-11-20 10:00:00')"),
                     {"scope": "connections", "fp": unkeyed})
    command.upgrade(alembic_config(url), "head")
    with engine.connect() as conn:
        assert conn.execute(text("SELECT key, fingerprint FROM idempotency_records")).all() == [("old-1", "scrubbed")]
    engine.dispose()


def _replica(settings: Settings, data_dir: Path, server_key: str | None) -> Any:
    replica = Settings(**{**settings.model_dump(), "data_dir": data_dir, "server_key": server_key})
    return create_app(replica, dispatcher=RecordingDispatcher())  # type: ignore[arg-type]


def test_replicas_given_one_server_key_agree_and_others_do_not(
    client: TestClient, settings: Settings, tenant: Tenant, tmp_path: Path
) -> None:
    apps = [_replica(settings, tmp_path / name, key) for name, key in
            (("a", SERVER_KEY), ("b", SERVER_KEY), ("c", None))]
    try:
        a, b, c = (TestClient(x) for x in apps)
        headers = {**tenant.editor, "Idempotency-Key": "replicas-1"}
        first = a.post("/connections", json=_body(), headers=headers)
        assert first.status_code == 201, first.text
        again = b.post("/connections", json=_body(), headers=headers)
        assert (again.status_code, again.headers["idempotent-replayed"], again.json()) == (201, "true", first.json())
        # A replica left to generate its own key does not recognise the request: why the key is a setting.
        assert_problem(c.post("/connections", json=_body(), headers=headers), 422, fields={"header.Idempotency-Key"})
        assert not (tmp_path / "a" / "server.key").exists() and (tmp_path / "c" / "server.key").exists()
    finally:
        for x in apps:
            x.state.engine.dispose()


def test_a_short_server_key_is_refused_at_start_up(settings: Settings) -> None:
    with pytest.raises(ValueError, match="server_key"):
        Settings(**{**settings.model_dump(), "server_key": "short"})


def _secret_fields(model: Any, seen: set[Any]) -> set[str]:
    """Names of the SecretStr fields of ``model`` and of every model inside it."""
    if model in seen:
        return set()
    seen.add(model)
    found: set[str] = set()
    for name, field in model.model_fields.items():
        stack = [field.annotation]
        while stack:
            annotation = stack.pop()
            if annotation is SecretStr:
                found.add(field.alias or name)
            elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
                found |= _secret_fields(annotation, seen)
            else:
                stack.extend(typing.get_args(annotation))
    return found


def test_every_credential_of_every_request_body_is_masked(app: Any) -> None:
    found: set[str] = set()
    bodies = set()
    for context in iter_route_contexts(app.routes):  # FastAPI includes routers lazily: walk the contexts
        route = context.original_route
        if isinstance(route, APIRoute):
            for param in route.dependant.body_params:
                annotation = param.field_info.annotation
                if isinstance(annotation, type) and issubclass(annotation, BaseModel):
                    bodies.add(annotation.__name__)
                    found |= _secret_fields(annotation, set())
    assert {"ConnectionSpec", "WebhookSpec", "PipelineSpec", "ApiKeyCreate"} <= bodies
    assert {"password", "client_secret", "key_pem", "key_password", "token"} <= found
    assert found <= SECRET_FIELDS, f"credential fields the fingerprint would keep: {found - SECRET_FIELDS}"
