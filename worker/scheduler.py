"""The scheduler process: each tick, a few duties, each standing alone; and the secret sweep.

The duties of a tick, in batches:
- due schedules: due pipelines are claimed by compare-and-set (so any number of schedulers can run)
  and sent as ``fire_schedule``;
- lost runs: runs whose worker's lease expired, and queued runs whose message may have been lost (a
  Redis restart), are sent as ``execute_run`` again;
- lost webhook deliveries: deliveries that stay due (``api.webhooks.delivery.lost_deliveries``) are
  sent again;
- lag alerts: pipelines with a lag alert are evaluated against their observed lag
  (``api.pipelines.alerts``), each change raising its event once;
- portal sessions: timed-out ones are deleted (``api.tenancy.portal_sessions``), so their table holds
  live sessions only;
- retention: what the retention settings no longer keep (old runs, logs, audit and webhook history,
  idempotency keys) is deleted in short batches, for at most ``retention_budget_s`` a tick
  (``api.retention.service``; a pass every ``retention_interval_s``).
- table maintenance: Delta tables whose vacuum is due, whose failed step waits for its retry, or whose
  request's message may be lost get a ``maintain_table`` task (``api.maintenance.triggers.send_due``).

Each duty is its own failure boundary (Prefect's ``late_runs`` service): one that fails (a table
locked, a database restarting) is logged and tried again next tick, and the others still run. Where
a duty fans out a message per entity, the entity's key makes a second message harmless: a schedule
slot is (pipeline, slot), moved on by the claim, so it fires once; a run's id is claimed at most
once, and a delivery's attempt likewise; a run or delivery sent is marked ``dispatched_at`` once the
broker took it, and is not sent again until that is stale.

At start-up and every ``secret_sweep_interval_s`` the scheduler also destroys secrets that belong to
no connection or webhook (``api.connections.orphans``; harmless twice too).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from weakref import WeakKeyDictionary

from sqlalchemy import Engine

from api.connections.orphans import sweep_orphaned_secrets
from api.core.config import Settings
from api.core.db import unit_of_work, utcnow
from api.core.dispatch import Dispatcher
from api.core.enqueue import bind
from api.maintenance.triggers import send_due
from api.pipelines.alerts import evaluate_lag_alerts
from api.pipelines.scheduling import claim_due
from api.retention.service import Retention, RetentionPolicy
from api.runs import repository
from api.secrets.store import SecretStore
from api.tenancy.portal_sessions import SessionLimits, purge_expired
from api.webhooks import delivery

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TickReport:
    fired: int = 0
    resent: int = 0
    seconds: float = 0.0
    deliveries_resent: int = 0
    alerts_changed: int = 0  # lag alerts raised or cleared
    sessions_purged: int = 0
    rows_pruned: int = 0  # by retention
    maintenance_sent: int = 0  # table maintenance tasks sent
    failed: tuple[str, ...] = ()  # the duties that failed this tick (logged; tried again on the next)


def fire_due_schedules(db: Engine, dispatcher: Dispatcher, settings: Settings) -> int:
    """Every due pipeline's slot claimed and sent as ``fire_schedule``; how many."""
    fired = 0
    while True:
        with unit_of_work(db) as session:
            due = claim_due(session, now=utcnow(), limit=settings.scheduler_batch_size)
        dispatcher.send_schedules(due)
        fired += len(due)
        if len(due) < settings.scheduler_batch_size:
            return fired


def resend_lost_runs(db: Engine, dispatcher: Dispatcher, settings: Settings) -> int:
    """Runs whose lease expired, or whose message may be lost, sent again; how many the broker took."""
    with unit_of_work(db) as session:
        resend = repository.expired_leases(session, limit=settings.scheduler_batch_size)
        resend += repository.stale_queued(session, older_than_s=max(60.0, settings.run_lease_s),
                                         limit=settings.scheduler_batch_size)
    # Marked only once the broker took them: a run whose send failed (Redis down) stays due and is
    # sent again on the next tick, not a whole staleness period later. A crash in between only
    # means one more harmless send.
    sent = [run_id for run_id in resend if dispatcher.send_run(run_id) is not False]
    if sent:
        with unit_of_work(db) as session:
            repository.mark_dispatched(session, sent)
    return len(sent)


def resend_lost_deliveries(db: Engine, dispatcher: Dispatcher, settings: Settings) -> int:
    """Webhook deliveries whose message was lost, sent again (marked only once the broker took them)."""
    with unit_of_work(db) as session:
        lost = delivery.lost_deliveries(session, limit=settings.scheduler_batch_size)
    if not lost or dispatcher.send_webhook_deliveries(lost) == 0:
        return 0
    with unit_of_work(db) as session:
        delivery.mark_dispatched(session, lost)
    return len(lost)


def raise_and_clear_lag_alerts(db: Engine, dispatcher: Dispatcher, settings: Settings) -> int:
    """Every active pipeline with a lag alert, in batches; how many alerts were raised or cleared (their
    events' deliveries go out through the dispatcher bound to ``db``)."""
    changed, after = 0, None
    while True:
        with unit_of_work(db) as session:
            batch = evaluate_lag_alerts(session, now=utcnow(), after=after, limit=settings.scheduler_batch_size)
        changed += batch.raised + batch.cleared
        if batch.checked < settings.scheduler_batch_size:
            return changed
        after = batch.last_id


def purge_portal_sessions(db: Engine, dispatcher: Dispatcher, settings: Settings) -> int:
    """Timed-out portal sessions deleted (they are refused already; this keeps the table small)."""
    with unit_of_work(db) as session:
        return purge_expired(session=session, limits=SessionLimits.of(settings))


# The process's retention passes, one per database: a pass goes on over ticks until it is done.
RETENTIONS: WeakKeyDictionary[Engine, Retention] = WeakKeyDictionary()


def prune_old_rows(db: Engine, dispatcher: Dispatcher, settings: Settings) -> int:
    """Rows the retention settings no longer keep, deleted in batches within the tick's budget."""
    return RETENTIONS.setdefault(db, Retention()).tick(db, RetentionPolicy.of(settings))
def send_due_maintenance(db: Engine, dispatcher: Dispatcher, settings: Settings) -> int:
    """Tables whose maintenance is due sent to the maintenance queue (once the batch committed)."""
    with unit_of_work(db) as session:
        return send_due(session, now=utcnow(), limit=settings.scheduler_batch_size)


Duty = Callable[[Engine, Dispatcher, Settings], int]

# Each duty by the field of the report that counts what it did, in the order a tick runs them.
DUTIES: dict[str, Duty] = {
    "fired": fire_due_schedules,
    "resent": resend_lost_runs,
    "deliveries_resent": resend_lost_deliveries,
    "sessions_purged": purge_portal_sessions,
    "alerts_changed": raise_and_clear_lag_alerts,
    "rows_pruned": prune_old_rows,
    "maintenance_sent": send_due_maintenance,
}


def tick(db: Engine, dispatcher: Dispatcher, settings: Settings) -> TickReport:
    """Every duty once, each in its own failure boundary."""
    started = time.perf_counter()
    done: dict[str, int] = {}
    failed: list[str] = []
    for field, duty in DUTIES.items():
        try:
            done[field] = duty(db, dispatcher, settings)
        except Exception:  # the others still run; this one is tried again on the next tick
            log.exception("scheduler duty %s failed", duty.__name__)
            failed.append(duty.__name__)
    return TickReport(**done, seconds=time.perf_counter() - started, failed=tuple(failed))


def sweep_secrets(db: Engine, secrets: SecretStore, settings: Settings) -> bool:
    """One orphan sweep, logged; False when it could not finish (retried sooner than usual)."""
    try:
        with unit_of_work(db) as session:
            report = sweep_orphaned_secrets(session=session, secrets=secrets, grace_s=settings.secret_orphan_grace_s)
    except Exception as exc:  # noqa: BLE001 (the secret store or database is down: the next sweep tries)
        log.warning("secret sweep failed: %s", getattr(exc, "detail", type(exc).__name__))
        return False
    log.info("secret sweep: %d secret(s) checked, %d orphan(s) destroyed", report.checked, len(report.destroyed))
    return True


def run_forever(
    db: Engine, dispatcher: Dispatcher, settings: Settings, stop: threading.Event, secrets: SecretStore,
) -> None:
    bind(db, dispatcher)  # lag alerts' webhook deliveries go out through it
    log.info("scheduler started: tick every %.1fs, secret sweep every %.0fs",
             settings.scheduler_interval_s, settings.secret_sweep_interval_s)
    next_sweep = time.monotonic()
    while not stop.is_set():
        report = tick(db, dispatcher, settings)
        if report.fired or report.resent or report.deliveries_resent or report.alerts_changed:
            log.info("fired %d schedule(s), resent %d run(s) and %d webhook delivery(ies), raised or cleared %d "
                     "lag alert(s) in %.3fs", report.fired, report.resent, report.deliveries_resent,
                     report.alerts_changed, report.seconds)
        if time.monotonic() >= next_sweep:
            swept = sweep_secrets(db, secrets, settings)
            interval = settings.secret_sweep_interval_s
            next_sweep = time.monotonic() + (interval if swept else min(interval, 60.0))
        stop.wait(settings.scheduler_interval_s)
