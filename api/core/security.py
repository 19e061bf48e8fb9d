"""Who is calling: the platform operator (``INLET_ADMIN_TOKEN``) or a tenant's API key with a role.

Keys are shown once and stored as SHA-256 digests; they carry 256 bits of randomness, so a
plain digest is as strong as a slow hash here and keeps lookups to one indexed query.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import uuid
from dataclasses import dataclass
from enum import StrEnum

from api.core.errors import Forbidden, Unauthorized

KEY_PREFIX = "inlet_"


class Role(StrEnum):
    viewer = "viewer"
    editor = "editor"
    admin = "admin"

    @property
    def rank(self) -> int:
        return {"viewer": 0, "editor": 1, "admin": 2}[self.value]


@dataclass(frozen=True)
class TenantContext:
    """The caller of a tenant route: every service call is scoped by it."""

    tenant_id: uuid.UUID
    key_id: uuid.UUID | None
    role: Role
    actor: str

    def require(self, role: Role) -> None:
        if self.role.rank < role.rank:
            raise Forbidden(f"This action needs the {role.value} role; the key has {self.role.value}")


@dataclass(frozen=True)
class Operator:
    """The platform operator: manages tenants and their first keys, never a tenant's objects."""

    actor: str = "operator"


def new_api_key() -> tuple[str, str, str]:
    """A fresh key: (the key shown once, its display prefix, its digest)."""
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    return key, key[: len(KEY_PREFIX) + 6], hash_key(key)


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def bearer_token(authorization: str | None) -> str:
    if not authorization:
        raise Unauthorized("Send an API key as 'Authorization: Bearer <key>'")
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized("The Authorization header must be 'Bearer <key>'")
    return token.strip()


def is_operator_token(token: str, admin_token: str | None) -> bool:
    return admin_token is not None and hmac.compare_digest(token.encode(), admin_token.encode())


def authenticate_operator(token: str, admin_token: str | None) -> Operator:
    if admin_token is None:
        raise Forbidden("Operator routes are disabled: INLET_ADMIN_TOKEN is not set")
    if not is_operator_token(token, admin_token):
        if token.startswith(KEY_PREFIX):
            raise Forbidden("This route needs the operator token, not a tenant API key")
        raise Unauthorized("The operator token is wrong")
    return Operator()
