"""Bounded growth of Inlet's own data: passes of pruning that delete what the retention settings no
longer keep, in short batches, spread over the scheduler's ticks.

This module decides when and in what order; what each table keeps is decided beside the table, by the
module that owns it (one module owns each table):

| what | rule | where |
|---|---|---|
| run logs | chunks written before the cutoff, of runs ended before it | ``api.runs.retention.prune_run_logs`` |
| runs (with their ranges) | ended before the cutoff; never a pipeline's newest run, nor one the offsets ledger needs | ``api.runs.retention.prune_runs``, ``api.ledger.retention`` |
| webhook deliveries | succeeded or failed (given up) before the cutoff; never a pending one | ``api.webhooks.retention.prune_deliveries`` |
| webhook events | older than the cutoff, with no delivery left | ``api.webhooks.retention.prune_events`` |
| audit events | older than the cutoff | ``api.audit.service.prune_events`` |
| idempotency keys | stored before the cutoff (their replay window) | ``api.core.idempotency.prune_records`` |

A pass fixes each table's cutoff when it starts (now minus the table's retention), then works through
the tables in that order, one batch per transaction (the next ``INLET_RETENTION_BATCH_SIZE`` rows
older than the cutoff, oldest first from where the last batch stopped, of which those the table's
owner lets go are deleted, skipping rows another transaction holds: ``api.core.pruning``), for at most ``INLET_RETENTION_BUDGET_S`` per tick; a
pass with more to do goes on at the next tick. When it is done it is audited: one event per tenant it
deleted rows of (``resource_type`` ``retention``, the counts per table and the cutoffs), never one per
row, and one log line with the totals. The next pass starts ``INLET_RETENTION_INTERVAL_S`` after this
one started. Several schedulers may prune at once: each skips the rows the other holds.

Usage (``api.usage``) is never pruned: it is not derived from runs, and its counters only grow.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import Engine
from sqlmodel import Session, col, select

from api.audit import service as audit
from api.core import idempotency
from api.core.config import Settings
from api.core.db import unit_of_work, utcnow
from api.core.pruning import Batch, Pruned, Resume
from api.runs import retention as runs
from api.tenancy.models import Tenant
from api.webhooks import retention as webhooks

log = logging.getLogger(__name__)

ACTOR = "retention"
RESOURCE_TYPE = "retention"

Prune = Callable[[Session, datetime, Resume, int], Batch]


@dataclass(frozen=True)
class PrunedTable:
    name: str  # as the audit event and the log name it
    setting: str  # the retention setting (days) that sets its cutoff
    prune: Prune  # one batch: (session, cutoff, resume after, batch size)


# In the order a pass works through them: logs before their runs, deliveries before their events.
TABLES: tuple[PrunedTable, ...] = (
    PrunedTable("run_logs", "retention_run_logs_days",
          lambda s, before, after, n: runs.prune_run_logs(s, written_before=before, after=after, limit=n)),
    PrunedTable("runs", "retention_runs_days",
          lambda s, before, after, n: runs.prune_runs(s, finished_before=before, after=after, limit=n)),
    PrunedTable("continuous_runs", "retention_continuous_runs_days",
          lambda s, before, after, n: runs.prune_runs(s, finished_before=before, after=after, limit=n,
                                                      trigger="continuous")),
    PrunedTable("webhook_deliveries", "retention_webhooks_days",
          lambda s, before, after, n: webhooks.prune_deliveries(s, finished_before=before, after=after, limit=n)),
    PrunedTable("webhook_events", "retention_webhooks_days",
          lambda s, before, after, n: webhooks.prune_events(s, created_before=before, after=after, limit=n)),
    PrunedTable("audit_events", "retention_audit_days",
          lambda s, before, after, n: audit.prune_events(s, before=before, after=after, limit=n)),
    PrunedTable("idempotency_keys", "retention_idempotency_days",
          lambda s, before, after, n: idempotency.prune_records(s, before=before, after=after, limit=n)),
)


@dataclass(frozen=True)
class RetentionPolicy:
    """How long each table keeps its rows (None: forever), and how a pass paces itself."""

    keep: dict[str, timedelta | None]
    batch_size: int
    budget_s: float
    interval_s: float

    @classmethod
    def of(cls, settings: Settings) -> RetentionPolicy:
        keep = {}
        for table in TABLES:
            days: float = getattr(settings, table.setting)
            keep[table.name] = timedelta(days=days) if days > 0 else None
        return cls(keep=keep, batch_size=settings.retention_batch_size, budget_s=settings.retention_budget_s,
                   interval_s=settings.retention_interval_s)


@dataclass
class Pass:
    """One pass: its cutoffs, what it deleted so far (per table, and per tenant and table), and the
    tables it is done with."""

    id: uuid.UUID
    started_at: datetime
    cutoffs: dict[str, datetime]
    deleted: Counter[str] = field(default_factory=Counter)
    by_tenant: dict[uuid.UUID, Counter[str]] = field(default_factory=dict)
    done: set[str] = field(default_factory=set)
    resume: dict[str, Resume] = field(default_factory=dict)  # where each table's next batch starts
    batches: int = 0
    seconds: dict[str, float] = field(default_factory=dict)  # spent on each table

    @classmethod
    def start(cls, policy: RetentionPolicy, now: datetime) -> Pass:
        cutoffs = {name: now - keep for name, keep in policy.keep.items() if keep is not None}
        return cls(id=uuid.uuid4(), started_at=now, cutoffs=cutoffs)

    @property
    def finished(self) -> bool:
        return self.done >= set(self.cutoffs)

    def add(self, table: str, pruned: Pruned) -> None:
        for tenant_id, count in pruned.items():
            if not count:
                continue
            self.deleted[table] += count
            if tenant_id is not None:
                self.by_tenant.setdefault(tenant_id, Counter())[table] += count


def prune_for(db: Engine, policy: RetentionPolicy, running: Pass, deadline: float) -> int:
    """Batches of ``running``'s tables, in order, until each is done or ``deadline`` (monotonic) passes
    (one batch at least, so every tick gets on); how many rows were deleted."""
    deleted, batches = 0, 0
    for table in TABLES:
        if table.name not in running.cutoffs or table.name in running.done:
            continue
        while True:
            if batches and time.monotonic() >= deadline:
                return deleted
            batches += 1
            began = time.perf_counter()
            with unit_of_work(db) as session:
                batch = table.prune(session, running.cutoffs[table.name], running.resume.get(table.name),
                                    policy.batch_size)
            running.seconds[table.name] = running.seconds.get(table.name, 0.0) + time.perf_counter() - began
            running.add(table.name, batch.by_tenant())
            running.batches += 1
            deleted += len(batch.rows)
            running.resume[table.name] = batch.resume_after
            if batch.resume_after is None:
                running.done.add(table.name)
                break
    return deleted


def audit_pass(session: Session, done: Pass) -> int:
    """One audit event per tenant whose rows ``done`` deleted (tenants deleted meanwhile aside); how many."""
    existing = set(session.exec(select(Tenant.id).where(col(Tenant.id).in_(list(done.by_tenant)))).all())
    cutoffs = {name: at.isoformat() for name, at in done.cutoffs.items() if name != "idempotency_keys"}
    for tenant_id in sorted(existing, key=str):
        audit.record(session, tenant_id=tenant_id, actor=ACTOR, actor_key_id=None, resource_type=RESOURCE_TYPE,
                     resource_id=done.id, action="prune",
                     after={"deleted": dict(sorted(done.by_tenant[tenant_id].items())), "older_than": cutoffs})
    return len(existing)


class Retention:
    """The passes of one scheduler process: which one is under way, and when the next one starts."""

    def __init__(self) -> None:
        self.running: Pass | None = None
        self.last: Pass | None = None  # the newest pass done
        self.next_at: datetime | None = None

    def tick(self, db: Engine, policy: RetentionPolicy, *, now: datetime | None = None) -> int:
        """Go on with the pass under way, or start one if it is time, for at most the policy's budget;
        how many rows this tick deleted."""
        now = now or utcnow()
        if self.running is None:
            if self.next_at is not None and now < self.next_at:
                return 0
            self.running = Pass.start(policy, now)
            self.next_at = now + timedelta(seconds=policy.interval_s)
        began = time.monotonic()
        deleted = prune_for(db, policy, self.running, began + policy.budget_s)
        if self.running.finished:
            self._finish(db, self.running)
            self.last, self.running = self.running, None
        return deleted

    @staticmethod
    def _finish(db: Engine, done: Pass) -> None:
        if not done.deleted:
            return
        with unit_of_work(db) as session:
            tenants = audit_pass(session, done)
        took = (utcnow() - done.started_at).total_seconds()
        log.info("retention pass %s: deleted %s in %d batch(es) over %.1fs; audited for %d tenant(s)", done.id,
                 ", ".join(f"{n} {name} ({done.seconds.get(name, 0.0):.1f}s)" for name, n in sorted(done.deleted.items())),
                 done.batches, took, tenants)
