"""A tenant's quotas: its limits (the ``INLET_QUOTA_*`` defaults, or the operator's override for that
tenant) and the one check of them.

Each domain counts what it owns and calls ``enforce`` in the transaction that creates the object: the
count is taken under the tenant's row lock, so two concurrent creates cannot both take the last unit
of a limit. Usage beside the limits, for the API and the portal, is ``api.quotas``; how the workers
share out runs under ``concurrent_runs`` is ``api.runs.fairness``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields, replace
from typing import Literal, get_args

from sqlmodel import Session, col, select

from api.core.config import Settings
from api.core.errors import DomainError
from api.tenancy.models import Tenant, TenantQuota

QuotaName = Literal["pipelines", "connections", "api_keys", "webhooks", "runs_per_hour", "concurrent_runs",
                    "continuous_pipelines"]
QUOTA_NAMES: tuple[QuotaName, ...] = get_args(QuotaName)

_WHAT: dict[QuotaName, str] = {
    "pipelines": "pipelines", "connections": "connections", "api_keys": "unrevoked API keys",
    "webhooks": "webhooks", "runs_per_hour": "runs started in an hour", "concurrent_runs": "runs executing at once",
    "continuous_pipelines": "active continuous pipelines",
}
_FREE: dict[QuotaName, str] = {
    "pipelines": "delete one", "connections": "delete one", "api_keys": "revoke one", "webhooks": "delete one",
    "runs_per_hour": "try again later", "concurrent_runs": "wait for one to finish",
    "continuous_pipelines": "pause one or give it a schedule",
}


@dataclass(frozen=True)
class QuotaLimits:
    """A limit per quota: the defaults (``defaults``), or one tenant's (``limits_of``)."""

    pipelines: int
    connections: int
    api_keys: int
    webhooks: int
    runs_per_hour: int
    concurrent_runs: int
    continuous_pipelines: int

    @classmethod
    def defaults(cls, settings: Settings) -> QuotaLimits:
        return cls(**{name: getattr(settings, f"quota_{name}") for name in QUOTA_NAMES})

    def of(self, quota: QuotaName) -> int:
        value: int = getattr(self, quota)
        return value

    def overridden_by(self, override: TenantQuota | None) -> QuotaLimits:
        if override is None:
            return self
        values = {f.name: getattr(override, f.name) for f in fields(self) if getattr(override, f.name) is not None}
        return replace(self, **values)


class QuotaExceeded(DomainError):
    """409 for a count (delete one to free it); 429 with Retry-After for a rate (it frees itself). Not a
    ``Conflict``: no input of a form is at fault, so the portal shows it above the form."""

    status, code, title = 409, "quota-exceeded", "Quota exceeded"

    def __init__(self, quota: QuotaName, *, limit: int, used: int, retry_after_s: int | None = None) -> None:
        super().__init__(
            f"The tenant's quota of {limit} {_WHAT[quota]} is reached ({used} used): {_FREE[quota]}, "
            "or ask the operator to raise it",
            headers={"Retry-After": str(retry_after_s)} if retry_after_s is not None else None,
            quota=quota, limit=limit, used=used,
        )
        if retry_after_s is not None:
            self.status = 429


def override_of(session: Session, tenant_id: uuid.UUID) -> TenantQuota | None:
    return session.get(TenantQuota, tenant_id)


def limits_of(session: Session, tenant_id: uuid.UUID, defaults: QuotaLimits) -> QuotaLimits:
    return defaults.overridden_by(override_of(session, tenant_id))


def limits_by_tenant(
    session: Session, tenant_ids: Iterable[uuid.UUID], defaults: QuotaLimits
) -> dict[uuid.UUID, QuotaLimits]:
    """Each of ``tenant_ids``' limits, in one query."""
    ids = set(tenant_ids)
    if not ids:
        return {}
    found = {q.tenant_id: q for q in session.exec(select(TenantQuota).where(col(TenantQuota.tenant_id).in_(ids)))}
    return {tenant_id: defaults.overridden_by(found.get(tenant_id)) for tenant_id in ids}


def lock_tenant(session: Session, tenant_id: uuid.UUID) -> None:
    """Hold the tenant's row until the transaction ends: counts taken after this see every committed
    create and none can slip in before the commit. ``FOR NO KEY UPDATE`` on PostgreSQL, so inserts that
    merely reference the tenant are not held; SQLite's transactions take the write lock anyway."""
    session.exec(select(Tenant.id).where(Tenant.id == tenant_id).with_for_update(key_share=True)).first()


def enforce(
    session: Session, tenant_id: uuid.UUID, quota: QuotaName, *, defaults: QuotaLimits, count: Callable[[], int],
) -> None:
    """Refuse one more of ``quota`` when the tenant's count, taken under its row lock, has reached its limit."""
    lock_tenant(session, tenant_id)
    limit = limits_of(session, tenant_id, defaults).of(quota)
    used = count()
    if used >= limit:
        raise QuotaExceeded(quota, limit=limit, used=used)
