"""Retention of webhook deliveries and events (``api.retention`` runs the batches).

A delivery may go once it ended (``succeeded``, or ``failed`` when its retries ran out) before the
cutoff; a pending one, due or waiting for its next attempt, never goes. An event may go once it is
older than the cutoff and no delivery of it is left, so an event outlives every delivery that still
has to send it. What the deleted deliveries counted is added to ``webhook_delivery_totals`` in the same
transaction, so ``/metrics``' delivery counters never go down.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Select, exists
from sqlalchemy import select as sa_select
from sqlalchemy.dialects import postgresql, sqlite
from sqlmodel import Session, col, select

from api.core.pruning import Batch, Resume, prune_batch
from api.webhooks.models import WebhookDelivery, WebhookDeliveryTotal, WebhookEvent

ENDED = ("succeeded", "failed")


def prune_deliveries(session: Session, *, finished_before: datetime, after: Resume, limit: int) -> Batch:
    """Of the next ``limit`` deliveries that finished before ``finished_before``, delete those that ended,
    counting them into the totals."""
    def pick(in_window: ColumnElement[bool]) -> Select[*tuple[Any, ...]]:
        return sa_select(col(WebhookDelivery.id), col(WebhookDelivery.tenant_id), col(WebhookDelivery.state),
                         col(WebhookDelivery.event_type), col(WebhookDelivery.attempts)).where(
            in_window, col(WebhookDelivery.state).in_(ENDED))

    batch = prune_batch(session, WebhookDelivery, col(WebhookDelivery.finished_at), before=finished_before,
                        after=after, limit=limit, pick=pick)
    counted: Counter[tuple[str, str]] = Counter()
    attempts: Counter[tuple[str, str]] = Counter()
    for row in batch.rows:
        counted[(row.state, row.event_type)] += 1
        attempts[(row.state, row.event_type)] += row.attempts
    for (state, event_type), deliveries in counted.items():
        _add_to_totals(session, state, event_type, deliveries, attempts[(state, event_type)])
    return batch


def prune_events(session: Session, *, created_before: datetime, after: Resume, limit: int) -> Batch:
    """Of the next ``limit`` events raised before ``created_before``, delete those with no delivery left."""
    undelivered = exists().where(col(WebhookDelivery.event_id) == col(WebhookEvent.id))
    return prune_batch(session, WebhookEvent, col(WebhookEvent.created_at), before=created_before, after=after,
                       limit=limit, pick=lambda in_window: sa_select(col(WebhookEvent.id), col(WebhookEvent.tenant_id))
                       .where(in_window, ~undelivered))


def _add_to_totals(session: Session, state: str, event_type: str, deliveries: int, attempts: int) -> None:
    insert = postgresql.insert if session.get_bind().dialect.name == "postgresql" else sqlite.insert
    table = WebhookDeliveryTotal.__table__  # type: ignore[attr-defined]  # a table model has one
    statement = insert(table).values(state=state, event_type=event_type, deliveries=deliveries, attempts=attempts)
    session.execute(statement.on_conflict_do_update(index_elements=["state", "event_type"], set_={
        "deliveries": table.c.deliveries + statement.excluded.deliveries,
        "attempts": table.c.attempts + statement.excluded.attempts}))


def pruned_totals(session: Session) -> tuple[dict[tuple[str, str], int], int]:
    """What retention deleted: deliveries by (outcome, event type), and their attempts in all."""
    rows = session.exec(select(WebhookDeliveryTotal)).all()
    by_kind = {(row.state, row.event_type): row.deliveries for row in rows}
    return by_kind, sum(row.attempts for row in rows)

