"""Webhooks as the API takes and shows them, and the events they can subscribe to.

The signing secret is Inlet's, never the client's: it is shown in the response that creates it (a new
endpoint, a rotation) and never again.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator

from api.webhooks.destinations import check_webhook_url

EventType = Literal[
    "run.failed", "run.succeeded", "pipeline.recovered", "pipeline.data_loss", "pipeline.lag_exceeded",
    "pipeline.lag_recovered", "pipeline.expectation_exceeded", "offsets.changed",
]
EVENT_TYPES: tuple[EventType, ...] = get_args(EventType)
# Sent only to endpoints that name them: a busy pipeline succeeds every few minutes.
OPT_IN_EVENTS: frozenset[EventType] = frozenset({"run.succeeded"})
DEFAULT_EVENTS: list[EventType] = [e for e in EVENT_TYPES if e not in OPT_IN_EVENTS]
TEST_EVENT = "webhook.test"  # sent by POST /webhooks/{id}/test only, to that endpoint only

DeliveryState = Literal["pending", "succeeded", "failed"]


class WebhookSpec(BaseModel):
    """The writable shape of a webhook (POST; PATCH merges into it)."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(min_length=1, max_length=2048, examples=["https://alerts.example.com/inlet"])
    events: list[EventType] = Field(
        default_factory=lambda: list(DEFAULT_EVENTS), min_length=1,
        description="The events sent to this endpoint; default: every event but run.succeeded, which is sent "
                    "only where it is named")
    description: str = Field(default="", max_length=500)
    enabled: bool = True

    @field_validator("url")
    @classmethod
    def _url(cls, url: str) -> str:
        return check_webhook_url(url)

    @field_validator("events")
    @classmethod
    def _events(cls, events: list[EventType]) -> list[EventType]:
        if len(set(events)) != len(events):
            raise ValueError("events must not repeat")
        return events


class WebhookRead(BaseModel):
    id: uuid.UUID
    url: str
    events: list[EventType]
    description: str
    enabled: bool
    secret_rotated_at: datetime | None = Field(description="When the signing secret was last rotated; null: never")
    created_at: datetime
    updated_at: datetime


class WebhookWithSecret(WebhookRead):
    secret: str | None = Field(description=(
        "The signing secret (whsec_ and base64, as Standard Webhooks says): shown only in the response that "
        "made it, store it now; null when an Idempotency-Key replays that response (never stored)"))


class DeliveryRead(BaseModel):
    id: uuid.UUID
    webhook_id: uuid.UUID
    event_id: uuid.UUID = Field(description="The webhook-id header of every attempt: the receiver's dedupe key")
    event_type: str
    state: DeliveryState
    attempts: int
    response_status: int | None = Field(description="The HTTP status of the last attempt; null: no answer")
    latency_ms: float | None = Field(description="How long the last attempt took")
    last_error: str | None = Field(description="Why the last attempt failed (never the receiver's body)")
    next_attempt_at: datetime | None = Field(description="When a pending delivery is tried next")
    last_attempt_at: datetime | None
    created_at: datetime
    finished_at: datetime | None
