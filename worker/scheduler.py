"""The scheduler process: fires due pipelines, sends lost or orphaned runs again, sweeps secrets.

Each tick, in batches: due pipelines are claimed by compare-and-set (so any number of schedulers
can run) and sent as ``fire_schedule``; runs whose worker's lease expired, and queued runs whose
message may have been lost (a Redis restart), are sent as ``execute_run`` again — harmless twice,
since a run is claimed at most once. At start-up and every ``secret_sweep_interval_s`` it
destroys secrets that belong to no connection (``api.connections.orphans``; harmless twice too).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from sqlalchemy import Engine

from api.connections.orphans import sweep_orphaned_secrets
from api.core.config import Settings
from api.core.db import unit_of_work, utcnow
from api.core.dispatch import Dispatcher
from api.pipelines.scheduling import claim_due
from api.runs import repository
from api.secrets.store import SecretStore

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TickReport:
    fired: int
    resent: int
    seconds: float


def tick(engine: Engine, dispatcher: Dispatcher, settings: Settings) -> TickReport:
    started = time.perf_counter()
    fired = 0
    while True:
        with unit_of_work(engine) as session:
            due = claim_due(session, now=utcnow(), limit=settings.scheduler_batch_size)
        dispatcher.send_schedules(due)
        fired += len(due)
        if len(due) < settings.scheduler_batch_size:
            break
    with unit_of_work(engine) as session:
        resend = repository.expired_leases(session, limit=settings.scheduler_batch_size)
        resend += repository.stale_queued(session, older_than_s=max(60.0, settings.run_lease_s),
                                         limit=settings.scheduler_batch_size)
    # Marked only once the broker took them: a run whose send failed (Redis down) stays due and is
    # sent again on the next tick, not a whole staleness period later. A crash in between only
    # means one more harmless send.
    sent = [run_id for run_id in resend if dispatcher.send_run(run_id) is not False]
    if sent:
        with unit_of_work(engine) as session:
            repository.mark_dispatched(session, sent)
    return TickReport(fired=fired, resent=len(sent), seconds=time.perf_counter() - started)


def sweep_secrets(engine: Engine, secrets: SecretStore, settings: Settings) -> bool:
    """One orphan sweep, logged; False when it could not finish (retried sooner than usual)."""
    try:
        with unit_of_work(engine) as session:
            report = sweep_orphaned_secrets(session=session, secrets=secrets, grace_s=settings.secret_orphan_grace_s)
    except Exception as exc:  # noqa: BLE001 (the secret store or database is down: the next sweep tries)
        log.warning("secret sweep failed: %s", getattr(exc, "detail", type(exc).__name__))
        return False
    log.info("secret sweep: %d secret(s) checked, %d orphan(s) destroyed", report.checked, len(report.destroyed))
    return True


def run_forever(
    engine: Engine, dispatcher: Dispatcher, settings: Settings, stop: threading.Event, secrets: SecretStore,
) -> None:
    log.info("scheduler started: tick every %.1fs, secret sweep every %.0fs",
             settings.scheduler_interval_s, settings.secret_sweep_interval_s)
    next_sweep = time.monotonic()
    while not stop.is_set():
        try:
            report = tick(engine, dispatcher, settings)
            if report.fired or report.resent:
                log.info("fired %d schedule(s), resent %d run(s) in %.3fs", report.fired, report.resent, report.seconds)
        except Exception:  # a failed tick (database restarting) is retried on the next one
            log.exception("scheduler tick failed")
        if time.monotonic() >= next_sweep:
            swept = sweep_secrets(engine, secrets, settings)
            interval = settings.secret_sweep_interval_s
            next_sweep = time.monotonic() + (interval if swept else min(interval, 60.0))
        stop.wait(settings.scheduler_interval_s)
