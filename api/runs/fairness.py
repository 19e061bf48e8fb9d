"""A fair share of the workers: which queued run a free worker takes next.

The database is the queue. An ``execute_run`` message is a token that lets one worker take one run,
not an order to run the run it names: the worker claims the fairest claimable run at that moment —
among tenants below their ``concurrent_runs`` quota, the one with the fewest runs running, ties to the
one served least recently (its latest claim), then that tenant's oldest queued run. So however many
runs tenant A has queued, tenant B's run is the next one a worker takes. The one exception is a
running run whose worker's lease expired (the scheduler sends it again): its token takes it over
directly, as its tenant's share already counts it.

A claim locks the tenant's row (``api.tenancy.quotas.lock_tenant``) and counts its running runs again
before the compare-and-set, so two workers never both take a tenant's last slot, and a claim lost to
another worker moves on to the next candidate. Each candidate is tried inside a savepoint, whose
rollback releases that tenant's lock before the next is locked: no worker ever holds two.

Tokens are conserved by their senders: a trigger sends one, a run that ends sends one when queued
runs wait (``api.runs.execution.pass_token``), a token that finds nothing claimable (every waiting
tenant at its cap) is dropped, and the scheduler's resend of long-queued runs is the safety net.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from sqlmodel import Session

from api.core.db import utcnow
from api.runs import lifecycle, repository
from api.runs.models import Run
from api.tenancy.quotas import QuotaLimits, limits_by_tenant, limits_of, lock_tenant

NEVER = datetime.min.replace(tzinfo=UTC)
MAX_TRIES = 8  # candidates tried before a token is given up (each loss means another worker took a run)


def fairest_tenants(session: Session, *, defaults: QuotaLimits, now: datetime, skip_runs: set[uuid.UUID],
                    skip_tenants: set[uuid.UUID]) -> list[uuid.UUID]:
    """Tenants with a due queued run and room under their cap, fairest first."""
    waiting = repository.waiting_tenants(session, now=now, skip_runs=skip_runs, skip_tenants=skip_tenants)
    if not waiting:
        return []
    running = repository.running_by_tenant(session, waiting.keys())
    served = repository.last_claimed_by_tenant(session, waiting.keys())
    caps = limits_by_tenant(session, waiting.keys(), defaults)
    open_ = [t for t in waiting if running.get(t, 0) < caps[t].concurrent_runs]
    return sorted(open_, key=lambda t: (running.get(t, 0), served.get(t, NEVER), waiting[t], t))


def claim_fairest(session: Session, *, token: uuid.UUID | None, worker: str, lease_s: float,
                  defaults: QuotaLimits) -> Run | None:
    """Take the fairest claimable run for ``worker``; None when there is none (the token is dropped)."""
    now = utcnow()
    if token is not None and (named := session.get(Run, token)) is not None and lifecycle.lease_expired(named, now):
        return lifecycle.claim(session, token, worker=worker, lease_s=lease_s)
    skip_runs: set[uuid.UUID] = set()
    skip_tenants: set[uuid.UUID] = set()
    for _ in range(MAX_TRIES):
        order = fairest_tenants(session, defaults=defaults, now=now, skip_runs=skip_runs, skip_tenants=skip_tenants)
        if not order:
            return None
        tenant_id = order[0]
        run_id = repository.oldest_due(session, tenant_id, now=now, skip_runs=skip_runs)
        if run_id is None:  # taken since the tenants were counted
            skip_tenants.add(tenant_id)
            continue
        attempt = session.begin_nested()
        lock_tenant(session, tenant_id)
        if repository.running_count(session, tenant_id) >= limits_of(session, tenant_id, defaults).concurrent_runs:
            attempt.rollback()  # another worker took its last slot meanwhile
            skip_tenants.add(tenant_id)
            continue
        run = session.get(Run, run_id, populate_existing=True)
        claimed = lifecycle.claim_queued(session, run, worker=worker, lease_s=lease_s) if run is not None else None
        if claimed is not None:
            attempt.commit()
            return claimed
        attempt.rollback()  # another worker took this run since it was chosen: the next candidate
        skip_runs.add(run_id)
    return None
