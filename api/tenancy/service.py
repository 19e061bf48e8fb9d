"""Tenants and API keys: created by the operator; keys also managed by a tenant's admins."""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from sqlalchemy import func
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from api.audit.service import record, record_by
from api.core.db import utcnow
from api.core.errors import Conflict, NotFound
from api.core.etag import check_if_match, etag_for
from api.core.pagination import PageParams, paginate
from api.core.scoping import get_scoped, scoped_select
from api.core.security import Operator, Role, TenantContext, new_api_key
from api.tenancy.models import ApiKey, Tenant
from api.tenancy.portal_sessions import end_sessions_of_key
from api.tenancy.quotas import QuotaLimits, enforce


def tenant_etag(tenant: Tenant) -> str:
    return etag_for(tenant.id, tenant.name)


def key_etag(api_key: ApiKey) -> str:
    return etag_for(api_key.id, api_key.revoked_at)


def create_tenant(*, session: Session, operator: Operator, name: str) -> Tenant:
    if session.exec(select(Tenant).where(Tenant.name == name)).first() is not None:
        raise Conflict(f"A tenant named {name!r} already exists")
    tenant = Tenant(name=name)
    session.add(tenant)
    try:
        session.flush()
    except IntegrityError as exc:
        raise Conflict(f"A tenant named {name!r} already exists") from exc
    record(session, tenant_id=tenant.id, actor=operator.actor, actor_key_id=None, resource_type="tenant",
           resource_id=tenant.id, action="create", after={"name": name})
    return tenant


def get_tenant(*, session: Session, tenant_id: uuid.UUID) -> Tenant:
    tenant = session.get(Tenant, tenant_id)
    if tenant is None:
        raise NotFound("Tenant", tenant_id)
    return tenant


def list_tenants(*, session: Session, page: PageParams) -> tuple[list[Tenant], int]:
    return paginate(session, select(Tenant), page, Tenant)


def _issue_key(session: Session, tenant_id: uuid.UUID, name: str, role: Role,
               quotas: QuotaLimits) -> tuple[ApiKey, str]:
    enforce(session, tenant_id, "api_keys", defaults=quotas, count=lambda: active_key_count(session, tenant_id))
    key, prefix, digest = new_api_key()
    api_key = ApiKey(tenant_id=tenant_id, name=name, role=role.value, prefix=prefix, key_hash=digest)
    session.add(api_key)
    session.flush()
    return api_key, key


def _key_audit(api_key: ApiKey) -> dict[str, object]:
    return {"name": api_key.name, "role": api_key.role, "prefix": api_key.prefix}


def active_key_count(session: Session, tenant_id: uuid.UUID) -> int:
    """The tenant's unrevoked keys: what its ``api_keys`` quota counts."""
    return session.exec(select(func.count()).select_from(ApiKey).where(
        ApiKey.tenant_id == tenant_id, col(ApiKey.revoked_at).is_(None))).one()


def create_key_as_operator(
    *, session: Session, operator: Operator, tenant_id: uuid.UUID, name: str, role: Role, quotas: QuotaLimits,
) -> tuple[ApiKey, str]:
    get_tenant(session=session, tenant_id=tenant_id)
    api_key, key = _issue_key(session, tenant_id, name, role, quotas)
    record(session, tenant_id=tenant_id, actor=operator.actor, actor_key_id=None, resource_type="api_key",
           resource_id=api_key.id, action="create", after=_key_audit(api_key))
    return api_key, key


def create_key(
    *, session: Session, ctx: TenantContext, name: str, role: Role, quotas: QuotaLimits
) -> tuple[ApiKey, str]:
    api_key, key = _issue_key(session, ctx.tenant_id, name, role, quotas)
    record_by(session, ctx, resource_type="api_key", resource_id=api_key.id, action="create", after=_key_audit(api_key))
    return api_key, key


def list_keys(*, session: Session, ctx: TenantContext, page: PageParams) -> tuple[list[ApiKey], int]:
    return paginate(session, scoped_select(ApiKey, ctx.tenant_id), page, ApiKey)


def get_key(*, session: Session, ctx: TenantContext, key_id: uuid.UUID) -> ApiKey:
    return get_scoped(session, ApiKey, ctx.tenant_id, key_id, resource="API key")


def keys_by_id(*, session: Session, ctx: TenantContext, key_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, ApiKey]:
    """The tenant's keys among ``key_ids``, in one query (another tenant's ids find nothing)."""
    ids = set(key_ids)
    if not ids:
        return {}
    return {k.id: k for k in session.exec(scoped_select(ApiKey, ctx.tenant_id).where(col(ApiKey.id).in_(ids))).all()}


def revoke_key(*, session: Session, ctx: TenantContext, key_id: uuid.UUID, if_match: str | None = None) -> ApiKey:
    api_key = get_key(session=session, ctx=ctx, key_id=key_id)
    check_if_match(if_match, key_etag(api_key))
    if api_key.revoked_at is None:
        api_key.revoked_at = utcnow()
        session.add(api_key)
        end_sessions_of_key(session=session, key_id=api_key.id)
        record_by(session, ctx, resource_type="api_key", resource_id=api_key.id, action="revoke",
                  before=_key_audit(api_key))
    return api_key
