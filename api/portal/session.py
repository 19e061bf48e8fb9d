"""Portal sign-in state: an encrypted session cookie and the CSRF token tied to it.

The cookie is a Fernet token (AES-128-CBC + HMAC-SHA256, with its issue time) holding the API key
and the session's CSRF token, so the raw key is never readable from the browser and every request
is authenticated exactly as the API authenticates it (``security.authenticate_tenant``): a revoked
key ends its portal sessions at once. Nothing is stored server-side, so no table is needed; the
Fernet key lives in ``data_dir/portal-session.key`` (0600, created on first use), shared by every
API process of a host like the local secret store's key.

CSRF: a synchronizer token, random per session, rendered into every form and compared in constant
time on every POST. The sign-in form, which has no session yet, gets its own token in a short-lived
encrypted pre-session cookie. Cookies are HttpOnly, SameSite=Strict, scoped to ``/portal`` and
Secure when served over HTTPS.

A flash cookie, encrypted the same way and read once within two minutes, carries what a form's
redirect must show a single time (a new API key): the page it redirects to can then be reloaded
without sending the form again.
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken

SESSION_COOKIE = "inlet_portal"
LOGIN_COOKIE = "inlet_portal_login"
COOKIE_PATH = "/portal"
FLASH_COOKIE = "inlet_portal_flash"
SESSION_TTL_S = 8 * 3600
LOGIN_TTL_S = 3600
FLASH_TTL_S = 120


@dataclass(frozen=True)
class PortalSession:
    api_key: str
    csrf: str
    issued_at: int


class SessionCodec:
    """Seals and opens portal cookies with one Fernet key."""

    def __init__(self, key_file: Path) -> None:
        self._key_file = key_file
        self._fernet: Fernet | None = None

    def _cipher(self) -> Fernet:
        if self._fernet is None:
            self._key_file.parent.mkdir(parents=True, exist_ok=True)
            try:
                fd = os.open(self._key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                pass
            else:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(Fernet.generate_key())
            self._fernet = Fernet(self._key_file.read_bytes().strip())
        return self._fernet

    def seal_session(self, api_key: str) -> tuple[str, PortalSession]:
        session = PortalSession(api_key=api_key, csrf=secrets.token_urlsafe(32), issued_at=int(time.time()))
        payload = json.dumps({"k": session.api_key, "c": session.csrf}).encode()
        return self._cipher().encrypt_at_time(payload, session.issued_at).decode(), session

    def open_session(self, token: str | None) -> PortalSession | None:
        data = self._open(token, SESSION_TTL_S)
        if not data or not isinstance(data.get("k"), str) or not isinstance(data.get("c"), str):
            return None
        return PortalSession(api_key=data["k"], csrf=data["c"], issued_at=data["_t"])

    def seal_login(self) -> tuple[str, str]:
        csrf = secrets.token_urlsafe(32)
        return self._cipher().encrypt(json.dumps({"c": csrf}).encode()).decode(), csrf

    def open_login(self, token: str | None) -> str | None:
        data = self._open(token, LOGIN_TTL_S)
        return data.get("c") if data and isinstance(data.get("c"), str) else None

    def seal_flash(self, data: dict[str, str]) -> str:
        return self._cipher().encrypt(json.dumps({"f": data}).encode()).decode()

    def open_flash(self, token: str | None) -> dict[str, str] | None:
        data = self._open(token, FLASH_TTL_S)
        flash = data.get("f") if data else None
        return flash if isinstance(flash, dict) and all(isinstance(v, str) for v in flash.values()) else None

    def _open(self, token: str | None, ttl: int) -> dict | None:
        if not token:
            return None
        try:
            raw = self._cipher().decrypt(token.encode(), ttl=ttl)
            data = json.loads(raw)
            data["_t"] = self._cipher().extract_timestamp(token.encode())
        except (InvalidToken, ValueError, TypeError):
            return None
        return data if isinstance(data, dict) else None


def tokens_match(sent: str | None, expected: str | None) -> bool:
    """Constant-time comparison; a missing token on either side never matches."""
    if not sent or not expected:
        return False
    return hmac.compare_digest(sent.encode(), expected.encode())
