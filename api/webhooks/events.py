"""Raising an event: ``emit`` in the transaction of the change that caused it (the outbox pattern).

The event is stored with one delivery per enabled endpoint of the tenant that subscribes to its type,
and each delivery is handed to the webhooks' queue once that transaction has committed: a rolled-back
change sends nothing, and a committed one is sent even if the hand-over is lost (the scheduler sends
deliveries that stay due; ``api.webhooks.delivery.lost_deliveries``).

Callers pass plain data: ids, names, counts, offsets, kinds. No secret, credential or record payload
goes into an event, and nothing here imports the domains that raise them.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from sqlmodel import Session, col

from api.core.db import utcnow
from api.core.enqueue import enqueue_webhook_deliveries
from api.core.scoping import scoped_select
from api.webhooks.models import Webhook, WebhookDelivery, WebhookEvent
from api.webhooks.schemas import EventType


def emit(session: Session, tenant_id: uuid.UUID, type_: EventType, data: Mapping[str, Any]) -> WebhookEvent | None:
    """Raise ``type_`` for the tenant's endpoints subscribed to it; None (nothing stored) when there is none."""
    webhooks = session.exec(scoped_select(Webhook, tenant_id).where(col(Webhook.enabled))).all()
    subscribed = [w for w in webhooks if type_ in w.events]
    if not subscribed:
        return None
    event = WebhookEvent(tenant_id=tenant_id, type=type_, data=dict(data))
    session.add(event)
    session.flush()
    add_deliveries(session, event, subscribed)
    return event


def add_deliveries(session: Session, event: WebhookEvent, webhooks: list[Webhook]) -> list[WebhookDelivery]:
    """One pending delivery of ``event`` per endpoint, handed to the queue after the commit."""
    now = utcnow()
    deliveries = [WebhookDelivery(tenant_id=event.tenant_id, webhook_id=w.id, event_id=event.id, event_type=event.type,
                                  next_attempt_at=now, dispatched_at=now) for w in webhooks]
    session.add_all(deliveries)
    session.flush()
    enqueue_webhook_deliveries(session, [d.id for d in deliveries])  # the transaction's, sent as one batch
    return deliveries
