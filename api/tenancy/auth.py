"""Who is calling: a tenant API key turned into a ``TenantContext`` (the app's ``authenticate_tenant``,
which ``api.core.deps`` calls for every tenant route)."""

from __future__ import annotations

from sqlmodel import Session, col, select

from api.core.errors import Forbidden, Unauthorized
from api.core.security import Role, TenantContext, hash_key, is_operator_token
from api.tenancy.models import ApiKey


def authenticate_tenant(session: Session, token: str, operator_token: str | None) -> TenantContext:
    if is_operator_token(token, operator_token):
        raise Forbidden("The operator token manages tenants; use a tenant API key for tenant resources")
    key = session.exec(
        select(ApiKey).where(ApiKey.key_hash == hash_key(token), col(ApiKey.revoked_at).is_(None))
    ).first()
    if key is None:
        raise Unauthorized("The API key is unknown or revoked")
    return context_of(key)


def context_of(key: ApiKey) -> TenantContext:
    """The caller an active API key makes (here for the API, and for the portal's sessions)."""
    return TenantContext(tenant_id=key.tenant_id, key_id=key.id, role=Role(key.role), actor=f"key:{key.id}")
