"""Work for the workers, enqueued in a unit of work and sent once it commits (the shape of Polar's
``polar/worker/_enqueue.py``): the one way a service hands a task over.

A service calls ``enqueue_run(session, run_id)`` (or a sibling) wherever it decides, deep inside a
call as readily as at its top: no dispatcher is passed down. What a unit of work enqueued waits in
its session and goes out once the transaction has committed, with the dispatcher each process binds
to its database once (``bind``: the API app, the worker, the scheduler); a rolled-back unit of work
sends nothing. Webhook deliveries go out as one batch per transaction. A database with no dispatcher
bound (a script's own) sends nothing now: the scheduler sends what stays due.

Ids only, never objects: a task loads what it names.
"""

from __future__ import annotations

import uuid
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import Engine
from sqlmodel import Session

from api.core.db import after_commit, on_rollback
from api.core.dispatch import Dispatcher

_ENQUEUED = "enqueued_jobs"

# The dispatcher of each database's process (one database and one dispatcher per process; tests make several apps).
_bound: weakref.WeakKeyDictionary[Engine, Dispatcher] = weakref.WeakKeyDictionary()


def bind(db: Engine, dispatcher: Dispatcher) -> None:
    """Send the work enqueued in ``db``'s units of work with ``dispatcher``."""
    _bound[db] = dispatcher


def enqueue_run(session: Session, run_id: uuid.UUID) -> None:
    """``execute_run``: a worker takes the run (or the fairest claimable one) once this commits."""
    _jobs(session).runs.append(run_id)


def enqueue_continuation(session: Session, pipeline_id: uuid.UUID, slot: datetime, delay_s: float) -> None:
    """A continuous pipeline's next look at ``slot`` (``delay_s`` from now) once this commits."""
    _jobs(session).continuations.append((pipeline_id, slot, delay_s))


def enqueue_group_mirror(session: Session, pipeline_id: uuid.UUID) -> None:
    """Copy the pipeline's committed offsets to its consumer group once this commits."""
    _jobs(session).group_mirrors.append(pipeline_id)


def enqueue_group_delete(session: Session, connection_id: uuid.UUID, group: str) -> None:
    """Delete a mirrored consumer group once this commits."""
    _jobs(session).group_deletes.append((connection_id, group))


def enqueue_webhook_deliveries(session: Session, delivery_ids: Sequence[uuid.UUID]) -> None:
    """Deliver these webhook events (on the webhooks' queue) once this commits."""
    _jobs(session).webhook_deliveries.extend(delivery_ids)


def enqueue_table_maintenance(session: Session, pipeline_id: uuid.UUID) -> None:
    """Maintain the pipeline's Delta table (on the maintenance queue) once this commits."""
    _jobs(session).table_maintenance.append(pipeline_id)


@dataclass
class _Jobs:
    """What one unit of work enqueued, in order within each kind."""

    runs: list[uuid.UUID] = field(default_factory=list)
    continuations: list[tuple[uuid.UUID, datetime, float]] = field(default_factory=list)
    group_mirrors: list[uuid.UUID] = field(default_factory=list)
    group_deletes: list[tuple[uuid.UUID, str]] = field(default_factory=list)
    webhook_deliveries: list[uuid.UUID] = field(default_factory=list)
    table_maintenance: list[uuid.UUID] = field(default_factory=list)

    def send(self, dispatcher: Dispatcher) -> None:
        for run_id in self.runs:
            dispatcher.send_run(run_id)
        for pipeline_id, slot, delay_s in self.continuations:
            dispatcher.send_continuation(pipeline_id, slot, delay_s)
        for pipeline_id in self.group_mirrors:
            dispatcher.send_group_mirror(pipeline_id)
        for connection_id, group in self.group_deletes:
            dispatcher.send_group_delete(connection_id, group)
        if self.webhook_deliveries:
            dispatcher.send_webhook_deliveries(self.webhook_deliveries)
        for pipeline_id in self.table_maintenance:
            dispatcher.send_table_maintenance(pipeline_id)


def _jobs(session: Session) -> _Jobs:
    jobs: _Jobs | None = session.info.get(_ENQUEUED)
    if jobs is None:
        jobs = session.info[_ENQUEUED] = _Jobs()
        after_commit(session, lambda: _send(session))
        on_rollback(session, lambda: session.info.pop(_ENQUEUED, None))
    return jobs


def _send(session: Session) -> None:
    jobs: _Jobs | None = session.info.pop(_ENQUEUED, None)
    dispatcher = _bound.get(session.get_bind())  # type: ignore[arg-type]  # a unit of work is bound to an Engine
    if jobs is not None and dispatcher is not None:
        jobs.send(dispatcher)
