"""Portal cookies: the session cookie, the CSRF token tied to it, and the short-lived sealed cookies.

The session cookie holds only a random session id: the session itself (tenant, API key, timeouts) is
kept server-side (``api.tenancy.portal_sessions``), so signing out or revoking the key ends it for
every copy of the cookie, and the API key never leaves the sign-in form's request.

CSRF: a synchronizer token per session (derived from its id), rendered into every form and compared
in constant time on every POST. The sign-in form, which has no session yet, gets its own token in a
short-lived encrypted pre-session cookie. Cookies are HttpOnly, SameSite=Strict, scoped to
``/portal`` and Secure as ``INLET_PORTAL_SECURE_COOKIES`` says (``auth.set_cookie``).

The pre-session cookie and a flash cookie are Fernet tokens (AES-128-CBC + HMAC-SHA256, with their
issue time) under a key in ``data_dir/portal-session.key`` (0600, created on first use). The flash
cookie, read once within two minutes, carries what a form's redirect must show a single time (a new
API key): the page it redirects to can then be reloaded without sending the form again.
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken

SESSION_COOKIE = "inlet_portal"
LOGIN_COOKIE = "inlet_portal_login"
COOKIE_PATH = "/portal"
FLASH_COOKIE = "inlet_portal_flash"
LOGIN_TTL_S = 3600
FLASH_TTL_S = 120


class SessionCodec:
    """Seals and opens the pre-session and flash cookies with one Fernet key."""

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
            data = json.loads(self._cipher().decrypt(token.encode(), ttl=ttl))
        except (InvalidToken, ValueError, TypeError):
            return None
        return data if isinstance(data, dict) else None


def tokens_match(sent: str | None, expected: str | None) -> bool:
    """Constant-time comparison; a missing token on either side never matches."""
    if not sent or not expected:
        return False
    return hmac.compare_digest(sent.encode(), expected.encode())
