"""Quotas: a tenant reads its own (``/quotas``); the operator reads and sets any tenant's
(``/tenants/{id}/quotas``)."""

from __future__ import annotations

import uuid

from fastapi import APIRouter

from api.core.deps import OperatorDep, SessionDep, SettingsDep, Viewer
from api.quotas import service
from api.quotas.schemas import QuotaOverrides, TenantQuotas
from api.tenancy.quotas import QuotaLimits

router = APIRouter(tags=["quotas"])


@router.get("/quotas", operation_id="get_quotas", response_model=TenantQuotas)
def get_quotas(ctx: Viewer, session: SessionDep, settings: SettingsDep) -> TenantQuotas:
    """The caller's tenant's quotas, each limit beside what it uses now."""
    return service.tenant_quotas(session=session, ctx=ctx, defaults=QuotaLimits.defaults(settings))


@router.get("/tenants/{tenant_id}/quotas", operation_id="get_tenant_quotas", response_model=TenantQuotas)
def get_tenant_quotas(
    tenant_id: uuid.UUID, operator: OperatorDep, session: SessionDep, settings: SettingsDep
) -> TenantQuotas:
    """A tenant's quotas and their use (operator only)."""
    return service.operator_quotas(session=session, tenant_id=tenant_id, defaults=QuotaLimits.defaults(settings))


@router.put("/tenants/{tenant_id}/quotas", operation_id="set_tenant_quotas", response_model=TenantQuotas)
def set_tenant_quotas(
    tenant_id: uuid.UUID, body: QuotaOverrides, operator: OperatorDep, session: SessionDep, settings: SettingsDep,
) -> TenantQuotas:
    """Set a tenant's own limits, replacing any set before; an omitted or null one follows the default
    (operator only, audited)."""
    return service.set_overrides(session=session, operator=operator, tenant_id=tenant_id, overrides=body,
                                 defaults=QuotaLimits.defaults(settings))
