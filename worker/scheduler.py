"""The scheduler process: fires due pipelines and sends lost or orphaned runs again.

Each tick, in batches: due pipelines are claimed by compare-and-set (so any number of schedulers
can run) and sent as ``fire_schedule``; runs whose worker's lease expired, and queued runs whose
message may have been lost (a Redis restart), are sent as ``execute_run`` again — harmless twice,
since a run is claimed at most once.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from sqlalchemy import Engine

from api.core.config import Settings
from api.core.db import unit_of_work, utcnow
from api.runs import lifecycle
from api.runs.dispatch import Dispatcher, claim_due

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
        for pipeline_id, slot in due:
            dispatcher.send_schedule(pipeline_id, slot)
        fired += len(due)
        if len(due) < settings.scheduler_batch_size:
            break
    with unit_of_work(engine) as session:
        resend = lifecycle.expired_leases(session, limit=settings.scheduler_batch_size)
        resend += lifecycle.stale_queued(session, older_than_s=max(60.0, settings.run_lease_s),
                                         limit=settings.scheduler_batch_size)
    # Marked only once the broker took them: a run whose send failed (Redis down) stays due and is
    # sent again on the next tick, not a whole staleness period later. A crash in between only
    # means one more harmless send.
    sent = [run_id for run_id in resend if dispatcher.send_run(run_id) is not False]
    if sent:
        with unit_of_work(engine) as session:
            lifecycle.mark_dispatched(session, sent)
    return TickReport(fired=fired, resent=len(sent), seconds=time.perf_counter() - started)


def run_forever(engine: Engine, dispatcher: Dispatcher, settings: Settings, stop: threading.Event) -> None:
    log.info("scheduler started: tick every %.1fs", settings.scheduler_interval_s)
    while not stop.is_set():
        try:
            report = tick(engine, dispatcher, settings)
            if report.fired or report.resent:
                log.info("fired %d schedule(s), resent %d run(s) in %.3fs", report.fired, report.resent, report.seconds)
        except Exception:  # a failed tick (database restarting) is retried on the next one
            log.exception("scheduler tick failed")
        stop.wait(settings.scheduler_interval_s)
