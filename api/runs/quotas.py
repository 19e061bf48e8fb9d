"""The runs' share of a tenant's quotas: how many runs it may start in an hour (``runs_per_hour``),
checked where a run is created — a trigger (a 429) or a schedule slot (skipped, logged). How many of
its runs execute at once (``concurrent_runs``) is the workers' fair share: ``api.runs.fairness``."""

from __future__ import annotations

import math
import uuid
from datetime import timedelta

from sqlmodel import Session

from api.core.db import utcnow
from api.runs import repository
from api.tenancy.quotas import QuotaExceeded, QuotaLimits, limits_of, lock_tenant

RATE_WINDOW = timedelta(hours=1)


def check_run_rate(session: Session, tenant_id: uuid.UUID, *, quotas: QuotaLimits, lock: bool = True) -> None:
    """Refuse a run over the tenant's ``runs_per_hour`` quota (429, Retry-After: when the oldest run of
    the hour leaves the window), counted under the tenant's row lock unless ``lock`` is false (a look
    ahead that spares a doomed schedule slot its Kafka calls)."""
    if lock:
        lock_tenant(session, tenant_id)
    limit = limits_of(session, tenant_id, quotas).runs_per_hour
    now = utcnow()
    used, oldest = repository.started_since(session, tenant_id, now - RATE_WINDOW)
    if used >= limit:
        wait = (oldest + RATE_WINDOW - now).total_seconds() if oldest is not None else RATE_WINDOW.total_seconds()
        raise QuotaExceeded("runs_per_hour", limit=limit, used=used, retry_after_s=max(1, math.ceil(wait)))
