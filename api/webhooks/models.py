"""The webhooks tables: a tenant's endpoints, the outbox of events raised for them, one delivery per
event and subscribed endpoint (its state, attempts and the receiver's last answer), and the counts of
the deliveries retention deleted.

An endpoint's signing secret is never stored here: only the path of its secret and the versions to
sign with."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Column, Float, ForeignKey, Index, String, UniqueConstraint
from sqlmodel import Field, SQLModel

from api.core.db import UTCDateTime, utcnow


class Webhook(SQLModel, table=True):
    __tablename__ = "webhooks"

    id: uuid.UUID = Field(default_factory=uuid.uuid4, primary_key=True)
    tenant_id: uuid.UUID = Field(
        sa_column=Column(ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False, index=True)
    )
    url: str = Field(sa_column=Column(String(2048), nullable=False))
    events: list[str] = Field(sa_column=Column(JSON, nullable=False))
    description: str = Field(default="", sa_column=Column(String(500), nullable=False))
    enabled: bool = True
    secret_path: str | None = Field(default=None, sa_column=Column(String(512)))
    secret_version: int | None = None
    # After a rotation the previous secret signs too, until ``previous_secret_until``.
    previous_secret_version: int | None = None
    previous_secret_until: datetime | None = Field(default=None, sa_type=UTCDateTime)
    secret_rotated_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    revision: int = 1
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)
    updated_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)


class WebhookEvent(SQLModel, table=True):
    """The outbox: an event raised in the transaction of the change that caused it. Its id is the
    ``webhook-id`` every attempt of every delivery carries, so a receiver can drop a repeat."""

    __tablename__ = "webhook_events"
    __table_args__ = (
        Index("ix_webhook_events_tenant_created", "tenant_id", "created_at"),
        Index("ix_webhook_events_created", "created_at"),  # retention's oldest first
    )

    id: uuid.UUID = Field(default_factory=uuid.uuid4, primary_key=True)
    tenant_id: uuid.UUID = Field(sa_column=Column(ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False))
    type: str = Field(sa_column=Column(String(64), nullable=False))
    data: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)


class WebhookDelivery(SQLModel, table=True):
    """One event sent to one endpoint: ``pending`` until the receiver answers 2xx (``succeeded``) or
    the retries run out (``failed``). ``next_attempt_at`` is when it is due, and while an attempt is
    under way, when that attempt counts as lost."""

    __tablename__ = "webhook_deliveries"
    __table_args__ = (
        UniqueConstraint("webhook_id", "event_id", name="uq_webhook_deliveries_webhook_event"),
        Index("ix_webhook_deliveries_webhook_created", "webhook_id", "created_at"),
        Index("ix_webhook_deliveries_due", "state", "next_attempt_at"),
        Index("ix_webhook_deliveries_finished", "finished_at"),  # retention's oldest ended first
    )

    id: uuid.UUID = Field(default_factory=uuid.uuid4, primary_key=True)
    tenant_id: uuid.UUID = Field(
        sa_column=Column(ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False, index=True)
    )
    webhook_id: uuid.UUID = Field(sa_column=Column(ForeignKey("webhooks.id", ondelete="CASCADE"), nullable=False))
    event_id: uuid.UUID = Field(
        sa_column=Column(ForeignKey("webhook_events.id", ondelete="CASCADE"), nullable=False, index=True)
    )
    event_type: str = Field(sa_column=Column(String(64), nullable=False))
    state: str = Field(default="pending", sa_column=Column(String(16), nullable=False))
    attempts: int = 0
    next_attempt_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    dispatched_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    last_attempt_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    response_status: int | None = None
    latency_ms: float | None = Field(default=None, sa_column=Column(Float))
    last_error: str | None = Field(default=None, sa_column=Column(String(500)))
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)
    finished_at: datetime | None = Field(default=None, sa_type=UTCDateTime)


class WebhookDeliveryTotal(SQLModel, table=True):
    """The ended deliveries retention deleted, by outcome and event type: ``/metrics`` adds them to the
    deliveries still kept, so its counters never go down when old deliveries are pruned."""

    __tablename__ = "webhook_delivery_totals"

    state: str = Field(sa_column=Column(String(16), primary_key=True))
    event_type: str = Field(sa_column=Column(String(64), primary_key=True))
    deliveries: int = Field(default=0, sa_column=Column(BigInteger, nullable=False))
    attempts: int = Field(default=0, sa_column=Column(BigInteger, nullable=False))
