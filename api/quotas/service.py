"""A tenant's quotas as the API and the portal show them (each limit beside its use), and the
operator's overrides. The limits and their check are ``api.tenancy.quotas``; each count is the
owning domain's, the same one its check uses."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from sqlmodel import Session

from api.audit.service import record
from api.connections import service as connections
from api.core.db import utcnow
from api.core.security import Operator, TenantContext
from api.pipelines import service as pipelines
from api.quotas.schemas import QuotaOverrides, QuotaUsage, TenantQuotas
from api.runs import repository as runs
from api.runs.quotas import RATE_WINDOW
from api.tenancy import service as tenancy
from api.tenancy.models import TenantQuota
from api.tenancy.quotas import QUOTA_NAMES, QuotaLimits, QuotaName, override_of
from api.webhooks import service as webhooks


def _counts(session: Session, tenant_id: uuid.UUID) -> dict[QuotaName, Callable[[], int]]:
    return {
        "pipelines": lambda: pipelines.quota_used(session, tenant_id),
        "connections": lambda: connections.quota_used(session, tenant_id),
        "api_keys": lambda: tenancy.active_key_count(session, tenant_id),
        "webhooks": lambda: webhooks.quota_used(session, tenant_id),
        "runs_per_hour": lambda: runs.started_since(session, tenant_id, utcnow() - RATE_WINDOW)[0],
        "concurrent_runs": lambda: runs.running_count(session, tenant_id),
        "continuous_pipelines": lambda: pipelines.continuous_used(session, tenant_id),
    }


def usage(session: Session, tenant_id: uuid.UUID, defaults: QuotaLimits) -> TenantQuotas:
    override = override_of(session, tenant_id)
    limits = defaults.overridden_by(override)
    counts = _counts(session, tenant_id)
    return TenantQuotas(tenant_id=tenant_id, **{name: QuotaUsage(
        limit=limits.of(name), used=counts[name](), default=defaults.of(name),
        override=getattr(override, name) if override is not None else None,
    ) for name in QUOTA_NAMES})


def tenant_quotas(*, session: Session, ctx: TenantContext, defaults: QuotaLimits) -> TenantQuotas:
    """The caller's own quotas."""
    return usage(session, ctx.tenant_id, defaults)


def operator_quotas(*, session: Session, tenant_id: uuid.UUID, defaults: QuotaLimits) -> TenantQuotas:
    """A tenant's quotas, as the operator reads them; 404 for no such tenant."""
    tenancy.get_tenant(session=session, tenant_id=tenant_id)
    return usage(session, tenant_id, defaults)


def _values(override: TenantQuota | None) -> dict[str, int | None]:
    return {name: getattr(override, name) if override is not None else None for name in QUOTA_NAMES}


def set_overrides(
    *, session: Session, operator: Operator, tenant_id: uuid.UUID, overrides: QuotaOverrides, defaults: QuotaLimits,
) -> TenantQuotas:
    """Replace a tenant's overrides (omitted: the default). A limit set below what the tenant uses
    refuses new objects until it is back under; nothing existing is deleted."""
    tenancy.get_tenant(session=session, tenant_id=tenant_id)
    current = override_of(session, tenant_id)
    before = _values(current)
    after = overrides.model_dump()
    if after != before:
        row = current or TenantQuota(tenant_id=tenant_id)
        for name, value in after.items():
            setattr(row, name, value)
        row.updated_at = utcnow()
        session.add(row)
        session.flush()
        record(session, tenant_id=tenant_id, actor=operator.actor, actor_key_id=None, resource_type="quotas",
               resource_id=tenant_id, action="update", before=before, after=after)
    return usage(session, tenant_id, defaults)
