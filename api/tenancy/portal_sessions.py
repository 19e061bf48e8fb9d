"""Portal sessions, kept server-side: opened by signing in with an API key, ended by signing out, by
the key's revocation, after ``idle_s`` without a request and ``max_s`` after sign-in.

The browser holds a random 256-bit id (its cookie); the table holds only that id's SHA-256, so
neither the database nor the cookie gives anyone the API key, and a copied cookie stops working when
the session ends. A session is resumed only while its key is active, even where a revocation left its
row behind.
``last_seen_at`` is written at most every ``touch_interval`` (a minute, or half the idle timeout if
shorter), not on every request. Ended sessions are deleted: at sign-out, at revocation, and by
``purge_expired`` (each sign-in, and the scheduler's tick), so the table holds live sessions only.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete, or_
from sqlmodel import Session, col, select

from api.core.config import Settings
from api.core.db import rows_changed, utcnow
from api.core.errors import Unauthorized
from api.core.security import TenantContext
from api.tenancy.auth import context_of
from api.tenancy.models import ApiKey, PortalSession

TOUCH_INTERVAL_S = 60.0


class SessionEnded(Unauthorized):
    code, title = "session-ended", "The portal session has ended"

    def __init__(self) -> None:
        super().__init__("The portal session has ended (signed out, timed out or its key revoked); sign in again")


@dataclass(frozen=True)
class SessionLimits:
    idle_s: float
    max_s: float

    @classmethod
    def of(cls, settings: Settings) -> SessionLimits:
        return cls(idle_s=settings.portal_session_idle_s, max_s=settings.portal_session_max_s)

    @property
    def touch_interval(self) -> timedelta:
        return timedelta(seconds=min(TOUCH_INTERVAL_S, self.idle_s / 2))


def _id_hash(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


def csrf_token(session_id: str) -> str:
    """The session's CSRF token: derived from its id (never from the stored hash), so it needs no column
    and cannot be read from the database."""
    digest = hashlib.sha256(b"inlet-portal-csrf\0" + session_id.encode()).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def open_session(*, session: Session, ctx: TenantContext, limits: SessionLimits) -> str:
    """A new session for the authenticated ``ctx``; returns its id, for the cookie and nowhere else."""
    if ctx.key_id is None:
        raise Unauthorized("Sign in with a tenant API key")
    purge_expired(session=session, limits=limits)
    session_id = secrets.token_urlsafe(32)
    now = utcnow()
    session.add(PortalSession(id_hash=_id_hash(session_id), tenant_id=ctx.tenant_id, api_key_id=ctx.key_id,
                              created_at=now, last_seen_at=now, expires_at=now + timedelta(seconds=limits.max_s)))
    session.flush()
    return session_id


def resume_session(*, session: Session, session_id: str, limits: SessionLimits) -> TenantContext:
    """The caller of a live session, its last-seen time moved on if it is a while old; ``SessionEnded``
    for an unknown, ended or timed-out session, or one whose key is revoked."""
    found = session.exec(
        select(PortalSession, ApiKey).join(ApiKey, col(ApiKey.id) == col(PortalSession.api_key_id))
        .where(PortalSession.id_hash == _id_hash(session_id))
    ).first()
    if found is None:
        raise SessionEnded()
    portal_session, key = found
    now = utcnow()
    if (key.revoked_at is not None or key.tenant_id != portal_session.tenant_id or now >= portal_session.expires_at
            or now >= portal_session.last_seen_at + timedelta(seconds=limits.idle_s)):
        raise SessionEnded()  # the row goes with the next purge: this request's work may be rolled back
    if now - portal_session.last_seen_at >= limits.touch_interval:
        portal_session.last_seen_at = now
        session.add(portal_session)
    return context_of(key)


def end_session(*, session: Session, session_id: str) -> None:
    """Sign out: the session's row is deleted, so its cookie signs no one in again."""
    session.execute(delete(PortalSession).where(col(PortalSession.id_hash) == _id_hash(session_id)))


def end_sessions_of_key(*, session: Session, key_id: uuid.UUID) -> None:
    session.execute(delete(PortalSession).where(col(PortalSession.api_key_id) == key_id))


def purge_expired(*, session: Session, limits: SessionLimits, now: datetime | None = None) -> int:
    """Delete every session past its absolute or idle timeout; how many were deleted."""
    now = now or utcnow()
    return rows_changed(session, delete(PortalSession).where(or_(
        col(PortalSession.expires_at) <= now,
        col(PortalSession.last_seen_at) <= now - timedelta(seconds=limits.idle_s),
    )))
