"""Portal sessions end: server-side, the cookie an opaque id and never the API key, refused after
sign-out and after the key's revocation, after an idle and an absolute timeout; ``Secure`` behind a
TLS-terminating proxy that ``INLET_FORWARDED_ALLOW_IPS`` trusts.

Row of issue 29: after ``POST /portal/logout`` the saved cookie (the sealed API key) still signed in
for 8 hours, and behind a proxy the cookie was never ``Secure``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from cryptography.fernet import Fernet, InvalidToken
from fastapi.testclient import TestClient
from sqlmodel import Session, col, select

from api.core.config import Settings
from api.main import create_app
from api.portal.session import LOGIN_COOKIE, SESSION_COOKIE
from api.tenancy import portal_sessions
from api.tenancy.models import ApiKey, PortalSession
from tests.factories import PASSWORD, Tenant
from tests.fixtures.dispatch import RecordingDispatcher
from tests.portal.helpers import csrf_of, sign_in

T0 = datetime(2026, 11, 25, 9, 0, tzinfo=UTC)


class Clock:
    """The sessions' clock, moved by the test."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(portal_sessions, "utcnow", fake)
    return fake


def _sessions(app: Any) -> list[PortalSession]:
    with Session(app.state.engine) as session:
        return list(session.exec(select(PortalSession).order_by(col(PortalSession.created_at))).all())


def _key_id(client: TestClient, tenant: Tenant, role: str) -> uuid.UUID:
    keys = client.get("/api-keys", headers=tenant.admin).json()["items"]
    return uuid.UUID(next(k["id"] for k in keys if k["role"] == role))


def _signed_in(client: TestClient) -> bool:
    """Whether the client's cookie still opens a portal page (else it is sent to sign in)."""
    response = client.get("/portal/pipelines", follow_redirects=False)
    if response.status_code == 303:
        assert response.headers["location"] == "/portal/login?next=/portal/pipelines"
        return False
    assert response.status_code == 200, response.text
    return True


def test_after_sign_out_the_saved_cookie_signs_no_one_in(client: TestClient, app: Any, tenant: Tenant) -> None:
    csrf = sign_in(client, tenant.keys["editor"])
    saved = client.cookies[SESSION_COOKIE]
    assert len(_sessions(app)) == 1

    out = client.post("/portal/logout", data={"csrf_token": csrf}, follow_redirects=False)

    assert out.status_code == 303 and out.headers["location"] == "/portal/login?notice=signed-out"
    assert _sessions(app) == []
    client.cookies.set(SESSION_COOKIE, saved, path="/portal")  # the cookie as an attacker copied it
    assert not _signed_in(client)
    client.cookies.set(SESSION_COOKIE, saved, path="/portal")
    write = client.post("/portal/connections", follow_redirects=False, data={
        "csrf_token": csrf, "name": "after-logout", "bootstrap_servers": "broker-1.example.com:9093",
        "security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512", "username": "ingest", "password": PASSWORD})
    assert write.status_code == 303 and write.headers["location"] == "/portal/login?next=/portal/pipelines"
    assert client.get("/connections", headers=tenant.viewer).json()["total"] == 0


def test_revoking_the_key_ends_its_sessions_and_a_revoked_key_is_checked_on_every_request(
    client: TestClient, app: Any, tenant: Tenant
) -> None:
    viewer = TestClient(app)
    sign_in(viewer, tenant.keys["viewer"])
    editor = TestClient(app)
    sign_in(editor, tenant.keys["editor"])
    viewer_id, editor_id = _key_id(client, tenant, "viewer"), _key_id(client, tenant, "editor")
    assert [s.api_key_id for s in _sessions(app)] == [viewer_id, editor_id]

    assert client.delete(f"/api-keys/{viewer_id}", headers=tenant.admin).status_code == 204

    assert [s.api_key_id for s in _sessions(app)] == [editor_id], "the revoked key's session is deleted"
    assert not _signed_in(viewer)
    assert _signed_in(editor)
    # A key revoked behind the service's back (its session left in place) signs no one in either.
    with Session(app.state.engine) as session:
        key = session.get(ApiKey, editor_id)
        assert key is not None
        key.revoked_at = datetime.now(UTC)
        session.add(key)
        session.commit()
    assert [s.api_key_id for s in _sessions(app)] == [editor_id]
    assert not _signed_in(editor)


def test_a_session_ends_after_the_idle_timeout_and_last_seen_is_not_written_on_every_request(
    client: TestClient, app: Any, tenant: Tenant, clock: Clock
) -> None:
    sign_in(client, tenant.keys["viewer"])
    [opened] = _sessions(app)
    assert (opened.created_at, opened.last_seen_at, opened.expires_at) == (T0, T0, T0 + timedelta(hours=8))

    clock.advance(seconds=30)
    assert _signed_in(client)
    assert _sessions(app)[0].last_seen_at == T0, "not written within a minute"
    clock.advance(minutes=29)  # 29.5 min after sign-in: inside the idle timeout, and now written
    assert _signed_in(client)
    assert _sessions(app)[0].last_seen_at == T0 + timedelta(minutes=29.5)
    clock.advance(minutes=29)  # 29 min after the last request
    assert _signed_in(client)
    assert _sessions(app)[0].last_seen_at == T0 + timedelta(minutes=58.5)
    clock.advance(minutes=30)  # a whole idle timeout (30 min by default) without a request
    assert not _signed_in(client)


def test_a_session_ends_after_the_absolute_timeout_however_busy(
    settings: Settings, tenant: Tenant, clock: Clock
) -> None:
    short = settings.model_copy(update={"portal_session_idle_s": 120.0, "portal_session_max_s": 600.0})
    app = create_app(short, dispatcher=RecordingDispatcher())  # type: ignore[arg-type]
    try:
        with TestClient(app) as client:
            sign_in(client, tenant.keys["viewer"])
            cookie = next(c for c in client.cookies.jar if c.name == SESSION_COOKIE)
            assert cookie.expires is not None and 595 <= cookie.expires - datetime.now(UTC).timestamp() <= 600
            [opened] = _sessions(app)
            assert opened.expires_at == T0 + timedelta(seconds=600)
            for _ in range(9):  # a request every 65 s: never idle
                clock.advance(seconds=65)
                assert _signed_in(client)
            clock.advance(seconds=15)  # 600 s after sign-in
            assert not _signed_in(client)
            assert [s.id_hash for s in _sessions(app)] == [opened.id_hash], "refused; deleted by the next purge"
            clock.advance(seconds=1)
            sign_in(client, tenant.keys["viewer"])  # a sign-in purges what has timed out
            [again] = _sessions(app)
            assert again.id_hash != opened.id_hash and again.created_at == T0 + timedelta(seconds=601)
    finally:
        app.state.engine.dispose()


def test_the_scheduler_deletes_timed_out_sessions(client: TestClient, app: Any, tenant: Tenant, settings: Settings,
                                                   clock: Clock) -> None:
    from worker.scheduler import tick

    sign_in(client, tenant.keys["viewer"])
    other = TestClient(app)
    clock.advance(minutes=20)
    sign_in(other, tenant.keys["editor"])
    clock.advance(minutes=11)  # the first is 31 min idle, the second 11

    tick(app.state.engine, RecordingDispatcher(), settings)  # type: ignore[arg-type]

    assert [s.api_key_id for s in _sessions(app)] == [_key_id(client, tenant, "editor")]


def _decodings(value: str) -> Iterator[bytes]:
    yield value.encode()
    for decode in (base64.urlsafe_b64decode, base64.b64decode, base64.b32decode, binascii.unhexlify):
        try:
            yield decode(value + "=" * (-len(value) % 4))
        except (ValueError, binascii.Error):
            pass


def test_the_cookie_is_an_opaque_id_that_holds_no_api_key(client: TestClient, app: Any, settings: Settings,
                                                          tenant: Tenant) -> None:
    key = tenant.keys["admin"]
    sign_in(client, key)
    cookie = client.cookies[SESSION_COOKIE]

    assert len(cookie) == 43 and set(cookie) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    secret_part = key.removeprefix("inlet_").encode()
    for decoded in _decodings(cookie):
        assert key.encode() not in decoded and secret_part not in decoded and secret_part[:16] not in decoded
    sealing_key = settings.data_dir / "portal-session.key"
    if sealing_key.exists():  # the cookie is no sealed token either: nothing on the server opens it into a key
        with pytest.raises(InvalidToken):
            Fernet(sealing_key.read_bytes().strip()).decrypt(cookie.encode())
    [stored] = _sessions(app)
    assert stored.id_hash == hashlib.sha256(cookie.encode()).hexdigest()
    assert (stored.tenant_id, stored.api_key_id) == (uuid.UUID(tenant.id), _key_id(client, tenant, "admin"))
    assert cookie not in repr(stored.model_dump()) and key not in repr(stored.model_dump())


def _cookie_line(response: Any, name: str) -> str:
    line: str = next(c for c in response.headers.get_list("set-cookie") if c.startswith(name + "="))
    return line


def _sign_in_from(app: Any, address: str, key: str, headers: dict[str, str]) -> tuple[str, str]:
    """Sign in as a browser at ``address`` would through a proxy sending ``headers``; the Set-Cookie
    lines of the login page's and the session's cookies (sent back by hand: a client over plain HTTP
    would keep a Secure cookie to itself)."""
    with TestClient(app, client=(address, 41000)) as browser:
        login = browser.get("/portal/login", headers=headers)
        login_cookie = _cookie_line(login, LOGIN_COOKIE)
        done = browser.post("/portal/login", headers={**headers, "cookie": login_cookie.split(";")[0]},
                            data={"api_key": key, "csrf_token": csrf_of(login.text), "next": "/portal/pipelines"},
                            follow_redirects=False)
        assert done.status_code == 303, done.text
        return login_cookie, _cookie_line(done, SESSION_COOKIE)


@pytest.mark.parametrize(("mode", "allowed", "address", "headers", "secure"), [
    ("auto", ["10.0.0.0/8"], "10.1.2.3", {"x-forwarded-proto": "https"}, True),
    ("auto", ["10.0.0.0/8"], "10.1.2.3", {"x-forwarded-proto": "http, https"}, True),
    ("auto", ["10.0.0.5"], "::ffff:10.0.0.5", {"x-forwarded-proto": "https"}, True),
    ("auto", ["*"], "203.0.113.9", {"x-forwarded-proto": "https"}, True),
    ("auto", ["10.0.0.0/8"], "192.0.2.7", {"x-forwarded-proto": "https"}, False),  # not the proxy: not believed
    ("auto", ["10.0.0.0/8"], "10.1.2.3", {}, False),
    ("always", ["127.0.0.1"], "192.0.2.7", {}, True),
    ("never", ["10.0.0.0/8"], "10.1.2.3", {"x-forwarded-proto": "https"}, False),
])
def test_cookies_are_secure_behind_a_trusted_tls_proxy(
    settings: Settings, tenant: Tenant, mode: str, allowed: list[str], address: str, headers: dict[str, str],
    secure: bool,
) -> None:
    configured = Settings(**{**settings.model_dump(), "portal_secure_cookies": mode, "forwarded_allow_ips": allowed})
    app = create_app(configured, dispatcher=RecordingDispatcher())  # type: ignore[arg-type]
    try:
        for line in _sign_in_from(app, address, tenant.keys["viewer"], headers):
            attributes = [a.strip().lower() for a in line.split(";")[1:]]
            assert ("secure" in attributes) is secure, line
            assert "httponly" in attributes and "samesite=strict" in attributes and "path=/portal" in attributes
    finally:
        app.state.engine.dispose()


def test_the_forwarded_setting_is_validated_at_start_up(settings: Settings) -> None:
    with pytest.raises(ValueError, match="INLET_FORWARDED_ALLOW_IPS: 'proxy.internal' is not an address"):
        Settings(**{**settings.model_dump(), "forwarded_allow_ips": "10.0.0.0/8,proxy.internal"})
    assert Settings(**{**settings.model_dump(), "forwarded_allow_ips": "10.0.0.1, fd00::/8"}).forwarded_allow_ips == [
        "10.0.0.1", "fd00::/8"]
