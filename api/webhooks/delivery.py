"""Delivering an event to one endpoint: one attempt in three steps, so that no transaction is open
while a receiver is called (on SQLite a transaction holds the write lock, and runs must never wait
for a receiver):

1. ``claim_attempt``, in a unit of work: a compare-and-set on the delivery's attempt count takes the
   attempt (two copies of the task never both send), and says what it needs; never the secret.
2. ``send``, outside any transaction: read the signing secret, sign (``api.webhooks.signing``) and
   POST with a short timeout and no redirects, through the webhooks' egress policy (the receiver's
   host resolved and checked, the connection made to the checked address). The receiver's body is
   never read.
3. ``record_attempt``, in a unit of work: 2xx is ``succeeded``; anything else is tried again after
   ``DeliveryRetryPolicy.delay`` (30 s doubling to 1 h apart by default) until ``for_s`` after the event
   (a day), then ``failed``.

Every attempt carries the event's id as ``webhook-id``: at least once, and a repeat is recognisable.
While an attempt is under way ``next_attempt_at`` is when it counts as lost; the scheduler sends
again the deliveries that stay due (``lost_deliveries``), as it does with runs.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from sqlalchemy import or_, update
from sqlmodel import Session, col, select

from api.core.config import Settings
from api.core.db import rows_changed, utcnow
from api.core.errors import DomainError
from api.secrets.store import SecretNotFound, SecretStore
from api.webhooks import signing
from api.webhooks.destinations import host_allowed
from api.webhooks.models import Webhook, WebhookDelivery, WebhookEvent
from api.webhooks.schemas import TEST_EVENT
from spark_jobs.public import EgressRefused

USER_AGENT = "Inlet-Webhooks/1"
ATTEMPT_LEASE_S = 120.0  # an attempt not recorded by then is lost (its worker died): the scheduler sends it again
EARLY_S = 1.0  # a countdown may fire this much before the delivery's due time
LOST_AFTER_S = 60.0  # a delivery due this long and not sent since is sent again by the scheduler


@dataclass(frozen=True)
class DeliveryRetryPolicy:
    base_s: float
    max_s: float
    for_s: float

    @classmethod
    def of(cls, settings: Settings) -> DeliveryRetryPolicy:
        return cls(base_s=settings.webhook_retry_base_s, max_s=settings.webhook_retry_max_s,
                   for_s=settings.webhook_retry_for_s)

    def delay(self, attempts: int) -> float:
        """Seconds from the end of attempt ``attempts`` (1, 2, …) to the next one."""
        return min(self.base_s * 2 ** (attempts - 1), self.max_s)


@dataclass(frozen=True)
class Attempt:
    """What one claimed attempt sends, and to which secret versions it signs with (newest first)."""

    delivery_id: uuid.UUID
    number: int
    url: str
    message_id: str
    body: bytes
    secret_path: str | None
    secret_versions: tuple[int, ...]
    event_at: datetime


@dataclass(frozen=True)
class AttemptResult:
    status: int | None
    latency_ms: float | None
    error: str | None

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


@dataclass(frozen=True)
class DeliveryOutcome:
    """Where an attempt left the delivery: ``succeeded``, ``pending`` (again after ``retry_in_s``),
    ``failed``; or why nothing was sent: ``not-due`` (another copy has it, or its time has not
    come), ``gone`` (its webhook was deleted), ``lost-lease``."""

    state: str
    retry_in_s: float | None = None


def body_of(event: WebhookEvent) -> bytes:
    """The JSON body every attempt of ``event`` sends, byte for byte the same."""
    timestamp = event.created_at.astimezone(UTC).isoformat().replace("+00:00", "Z")
    return json.dumps({"type": event.type, "timestamp": timestamp, "data": event.data}, separators=(",", ":"),
                      ensure_ascii=False).encode()


def _finish(session: Session, delivery: WebhookDelivery, state: str, **values: Any) -> bool:
    """End ``delivery`` (compare-and-set on the attempt seen)."""
    return rows_changed(session, update(WebhookDelivery).where(
        col(WebhookDelivery.id) == delivery.id, col(WebhookDelivery.state) == "pending",
        col(WebhookDelivery.attempts) == delivery.attempts,
    ).values(state=state, next_attempt_at=None, finished_at=utcnow(), **values)) == 1


def claim_attempt(*, session: Session, delivery_id: uuid.UUID, allowed_hosts: list[str]) -> Attempt | DeliveryOutcome:
    """Take the delivery's next attempt, if it is pending and due and no other copy took it."""
    now = utcnow()
    delivery = session.get(WebhookDelivery, delivery_id)
    if delivery is None:
        return DeliveryOutcome("gone")
    if delivery.state != "pending":
        return DeliveryOutcome(delivery.state)
    if delivery.next_attempt_at is not None and delivery.next_attempt_at > now + timedelta(seconds=EARLY_S):
        return DeliveryOutcome("not-due")
    webhook, event = session.get(Webhook, delivery.webhook_id), session.get(WebhookEvent, delivery.event_id)
    assert webhook is not None and event is not None  # deliveries are deleted with either (cascade)
    refused = None
    if not webhook.enabled and event.type != TEST_EVENT:
        refused = "the webhook is disabled"
    elif not host_allowed(webhook.url, allowed_hosts):
        refused = "the URL's host is not one webhooks may be sent to (INLET_WEBHOOK_ALLOWED_HOSTS)"
    if refused is not None:
        return DeliveryOutcome("failed" if _finish(session, delivery, "failed", last_error=refused) else "not-due")
    number = delivery.attempts + 1
    won = rows_changed(session, update(WebhookDelivery).where(
        col(WebhookDelivery.id) == delivery.id, col(WebhookDelivery.state) == "pending",
        col(WebhookDelivery.attempts) == number - 1,
    ).values(attempts=number, last_attempt_at=now, next_attempt_at=now + timedelta(seconds=ATTEMPT_LEASE_S))) == 1
    if not won:
        return DeliveryOutcome("not-due")
    versions: tuple[int, ...] = (webhook.secret_version,) if webhook.secret_version is not None else ()
    if (webhook.previous_secret_version is not None and webhook.previous_secret_until is not None
            and webhook.previous_secret_until > now):
        versions += (webhook.previous_secret_version,)
    return Attempt(delivery_id=delivery.id, number=number, url=webhook.url, message_id=str(event.id),
                   body=body_of(event), secret_path=webhook.secret_path, secret_versions=versions,
                   event_at=event.created_at)


def _keys(attempt: Attempt, secrets: SecretStore) -> list[str]:
    if attempt.secret_path is None or not attempt.secret_versions:
        raise SecretNotFound("(none)")
    return [secrets.read(attempt.secret_path, version)["secret"] for version in attempt.secret_versions]


def send(attempt: Attempt, *, secrets: SecretStore, client: httpx.Client) -> AttemptResult:
    """Sign and POST the attempt; what the receiver answered, or why it could not be asked. Errors
    name a kind or a status, never the URL (its query may hold the receiver's token) or a body."""
    try:
        keys = _keys(attempt, secrets)
    except SecretNotFound:
        return AttemptResult(None, None, "the signing secret is gone from the secret store; rotate it")
    except DomainError as exc:  # the secret backend is down or refuses Inlet: tried again later
        return AttemptResult(None, None, f"the signing secret could not be read ({exc.code})")
    headers = {"content-type": "application/json", "user-agent": USER_AGENT,
               **signing.headers(keys, attempt.message_id, int(time.time()), attempt.body)}
    started = time.perf_counter()
    status, error = None, None
    try:
        # Streamed and closed unread: only the status matters, and a large or endless body costs nothing.
        with client.stream("POST", attempt.url, content=attempt.body, headers=headers) as response:
            status = response.status_code
    except EgressRefused as exc:  # nothing was sent: no latency to report
        return AttemptResult(None, None, f"the receiver's address is refused by the egress policy: {exc.message}")
    except httpx.TimeoutException:
        error = "the receiver did not answer in time"
    except httpx.ConnectError:
        error = "could not connect to the receiver"
    except httpx.HTTPError as exc:
        error = f"the request failed ({type(exc).__name__})"
    latency_ms = round((time.perf_counter() - started) * 1000, 1)
    if status is not None and not 200 <= status < 300:
        error = f"the receiver answered {status}" + (" (redirects are not followed)" if 300 <= status < 400 else "")
    return AttemptResult(status, latency_ms, error)


def record_attempt(*, session: Session, attempt: Attempt, result: AttemptResult,
                   policy: DeliveryRetryPolicy) -> DeliveryOutcome:
    """Keep what the attempt got; schedule the next one, or end the delivery."""
    delivery = session.get(WebhookDelivery, attempt.delivery_id)
    if delivery is None:
        return DeliveryOutcome("gone")
    if delivery.state != "pending" or delivery.attempts != attempt.number:
        return DeliveryOutcome("lost-lease")
    answer = {"response_status": result.status, "latency_ms": result.latency_ms, "last_error": result.error}
    if result.ok:
        return DeliveryOutcome("succeeded" if _finish(session, delivery, "succeeded", **answer) else "lost-lease")
    now = utcnow()
    delay = policy.delay(attempt.number)
    if now + timedelta(seconds=delay) > attempt.event_at + timedelta(seconds=policy.for_s):
        return DeliveryOutcome("failed" if _finish(session, delivery, "failed", **answer) else "lost-lease")
    changed = rows_changed(session, update(WebhookDelivery).where(
        col(WebhookDelivery.id) == delivery.id, col(WebhookDelivery.state) == "pending",
        col(WebhookDelivery.attempts) == attempt.number,
    ).values(next_attempt_at=now + timedelta(seconds=delay), dispatched_at=now, **answer))
    return DeliveryOutcome("pending", retry_in_s=delay) if changed == 1 else DeliveryOutcome("lost-lease")


def lost_deliveries(session: Session, *, limit: int) -> list[uuid.UUID]:
    """Pending deliveries due for ``LOST_AFTER_S`` and not sent since: their message was lost (a
    Redis restart, a worker killed mid-attempt). Safe to send again: an attempt is claimed once."""
    cutoff = utcnow() - timedelta(seconds=LOST_AFTER_S)
    rows = session.exec(select(WebhookDelivery.id).where(
        WebhookDelivery.state == "pending", col(WebhookDelivery.next_attempt_at) < cutoff,
        or_(col(WebhookDelivery.dispatched_at).is_(None), col(WebhookDelivery.dispatched_at) < cutoff),
    ).limit(limit)).all()
    return list(rows)


def mark_dispatched(session: Session, delivery_ids: list[uuid.UUID]) -> None:
    if delivery_ids:
        session.execute(update(WebhookDelivery).where(col(WebhookDelivery.id).in_(delivery_ids))
                        .values(dispatched_at=utcnow()))
