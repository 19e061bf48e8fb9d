"""The webhook worker's part of a delivery: claim the attempt, call the receiver with no transaction
open, record what it answered; each step decided by ``api.webhooks.delivery``.

Runs in ``inlet webhook-worker``, on the webhooks' own queue: a receiver that never answers holds up
one of its threads for ``webhook_timeout_s``, never a run.
"""

from __future__ import annotations

import uuid

import httpx
from sqlalchemy import Engine

from api.core.config import Settings
from api.core.db import unit_of_work
from api.secrets.store import SecretStore
from api.webhooks import delivery
from api.webhooks.delivery import DeliveryOutcome, DeliveryRetryPolicy
from spark_jobs.public import http_client

CONNECT_TIMEOUT_S = 5.0


class WebhookSender:
    def __init__(self, settings: Settings, db: Engine, secrets: SecretStore) -> None:
        self.settings = settings
        self.db = db
        self.secrets = secrets
        self.policy = DeliveryRetryPolicy.of(settings)
        timeout = settings.webhook_timeout_s
        # Through the webhooks' egress policy, with no redirects: a receiver answers for itself, and a
        # 3xx must not send the signed body elsewhere. The timeout is each delivery's whole budget: a
        # receiver that trickles its answer cannot hold a delivery thread past it (``outbound``).
        self.client = http_client(settings.webhook_egress_policy, total_s=timeout,
                                  timeout=httpx.Timeout(timeout, connect=min(CONNECT_TIMEOUT_S, timeout)))

    def deliver(self, delivery_id: uuid.UUID) -> DeliveryOutcome:
        with unit_of_work(self.db) as session:
            attempt = delivery.claim_attempt(session=session, delivery_id=delivery_id,
                                             allowed_hosts=self.settings.webhook_allowed_hosts)
        if isinstance(attempt, DeliveryOutcome):
            return attempt
        result = delivery.send(attempt, secrets=self.secrets, client=self.client)
        with unit_of_work(self.db) as session:
            return delivery.record_attempt(session=session, attempt=attempt, result=result, policy=self.policy)
