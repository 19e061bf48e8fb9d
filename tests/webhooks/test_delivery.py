"""Delivering to a real receiver on loopback, in-process (``worker.webhooks.WebhookSender``, the step a
webhook worker's task runs): the Standard Webhooks format verified from the specification, retries
with the same event id, the retry window, timeouts, redirects, the allow-list at send time, disabled
endpoints, secret rotation, a lost secret, one attempt per claim, and the scheduler's resend."""

from __future__ import annotations

import itertools
import json
import time
import uuid
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update
from sqlmodel import Session

from api.core.config import Settings
from api.core.db import unit_of_work, utcnow
from api.webhooks import delivery
from api.webhooks.delivery import DeliveryOutcome
from api.webhooks.models import WebhookDelivery
from tests.factories import Tenant
from tests.fixtures.dispatch import RecordingDispatcher
from tests.fixtures.webhook_receiver import Receiver
from tests.webhooks.helpers import create_webhook, deliveries, payload, signature_ok
from worker.scheduler import tick
from worker.webhooks import WebhookSender


@pytest.fixture
def sender_settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"webhook_retry_base_s": 0.05, "webhook_retry_max_s": 0.2,
                                       "webhook_timeout_s": 1.5})


@pytest.fixture
def sender(app: Any, sender_settings: Settings) -> WebhookSender:
    return WebhookSender(sender_settings, app.state.engine, app.state.secrets)


def _test_event(client: TestClient, tenant: Any, webhook_id: str) -> uuid.UUID:
    sent = client.post(f"/webhooks/{webhook_id}/test", headers=tenant.editor)
    assert sent.status_code == 202, sent.text
    return uuid.UUID(sent.json()["id"])


def _until_done(sender: WebhookSender, delivery_id: uuid.UUID) -> list[str]:
    """Deliver as the worker would, waiting out each retry's countdown; the outcomes' states."""
    states = []
    for _ in range(20):
        outcome = sender.deliver(delivery_id)
        states.append(outcome.state)
        if outcome.retry_in_s is None:
            return states
        time.sleep(outcome.retry_in_s)
    raise AssertionError(f"still retrying after 20 attempts: {states}")


def test_a_delivery_is_a_signed_standard_webhook(client: TestClient, tenant: Tenant, sender: WebhookSender, webhook_receiver: Receiver) -> None:
    hook = create_webhook(client, tenant, webhook_receiver.url)
    delivery_id = _test_event(client, tenant, hook["id"])

    assert _until_done(sender, delivery_id) == ["succeeded"]

    (received,) = webhook_receiver.requests
    assert received.path == "/hooks/inlet"
    assert received.headers["content-type"] == "application/json"
    assert received.headers["user-agent"] == "Inlet-Webhooks/1"
    assert signature_ok(hook["secret"], received)
    log = deliveries(client, tenant, hook["id"])[0]
    assert received.headers["webhook-id"] == log["event_id"]
    body = payload(received)
    assert body == {"type": "webhook.test", "timestamp": body["timestamp"],
                    "data": {"webhook_id": hook["id"], "message": "A test event sent on request"}}
    assert body["timestamp"].endswith("Z")
    assert (log["state"], log["attempts"], log["response_status"], log["last_error"]) == ("succeeded", 1, 204, None)
    assert log["latency_ms"] > 0 and log["finished_at"] is not None and log["next_attempt_at"] is None
    tampered = type(received)(received.path, received.headers, received.body.replace(b"test", b"tost"), received.at)
    assert not signature_ok(hook["secret"], tampered)


def test_a_receiver_that_fails_three_times_gets_the_same_event_id_four_times(
    client: TestClient, tenant: Tenant, sender: WebhookSender, webhook_receiver: Receiver,
) -> None:
    hook = create_webhook(client, tenant, webhook_receiver.url)
    webhook_receiver.fail_next(3, status=503)

    assert _until_done(sender, _test_event(client, tenant, hook["id"])) == ["pending", "pending", "pending", "succeeded"]

    received = webhook_receiver.requests
    assert len(received) == 4
    assert len({r.headers["webhook-id"] for r in received}) == 1
    assert len({r.body for r in received}) == 1, "the same body every time"
    assert all(signature_ok(hook["secret"], r) for r in received)
    gaps = [b.at - a.at for a, b in itertools.pairwise(received)]
    assert gaps[0] >= 0.05 and gaps[1] >= 0.1 and gaps[2] >= 0.2, f"backoff doubles: {gaps}"
    log = deliveries(client, tenant, hook["id"])[0]
    assert (log["state"], log["attempts"], log["response_status"]) == ("succeeded", 4, 204)


def test_retries_stop_after_the_retry_window(client: TestClient, app: Any, tenant: Tenant, sender_settings: Settings, webhook_receiver: Receiver) -> None:
    sender = WebhookSender(sender_settings.model_copy(update={"webhook_retry_for_s": 0.3}), app.state.engine,
                           app.state.secrets)
    hook = create_webhook(client, tenant, webhook_receiver.url)
    webhook_receiver.fail_next(100, status=500)

    states = _until_done(sender, _test_event(client, tenant, hook["id"]))

    assert states[-1] == "failed" and set(states[:-1]) == {"pending"}
    log = deliveries(client, tenant, hook["id"])[0]
    assert (log["state"], log["attempts"], log["response_status"], log["last_error"]) == (
        "failed", len(states), 500, "the receiver answered 500")
    assert len(webhook_receiver.requests) == len(states)


def test_a_receiver_that_never_answers_times_out_and_is_tried_again(
    client: TestClient, tenant: Tenant, sender: WebhookSender, webhook_receiver: Receiver,
) -> None:
    hook = create_webhook(client, tenant, webhook_receiver.url)
    webhook_receiver.never_answer()
    delivery_id = _test_event(client, tenant, hook["id"])

    started = time.monotonic()
    outcome = sender.deliver(delivery_id)

    assert outcome.state == "pending" and outcome.retry_in_s == pytest.approx(0.05)
    assert 1.4 < time.monotonic() - started < 5, "the attempt's timeout bounds it"
    log = deliveries(client, tenant, hook["id"])[0]
    assert (log["attempts"], log["response_status"], log["last_error"]) == (1, None, "the receiver did not answer in time")
    assert log["latency_ms"] >= 1400


def test_redirects_are_not_followed(client: TestClient, tenant: Tenant, sender: WebhookSender, webhook_receiver: Receiver) -> None:
    hook = create_webhook(client, tenant, webhook_receiver.url)
    webhook_receiver.fail_next(1, status=302)

    assert sender.deliver(_test_event(client, tenant, hook["id"])).state == "pending"

    assert len(webhook_receiver.requests) == 1
    assert deliveries(client, tenant, hook["id"])[0]["last_error"] == "the receiver answered 302 (redirects are not followed)"


def test_a_closed_port_is_a_connection_failure(client: TestClient, tenant: Tenant, sender: WebhookSender) -> None:
    hook = create_webhook(client, tenant, "http://127.0.0.1:1/hook")

    assert sender.deliver(_test_event(client, tenant, hook["id"])).state == "pending"

    assert deliveries(client, tenant, hook["id"])[0]["last_error"] == "could not connect to the receiver"


def test_a_host_taken_off_the_allow_list_gets_nothing_more(
    client: TestClient, app: Any, tenant: Tenant, sender_settings: Settings, webhook_receiver: Receiver,
) -> None:
    hook = create_webhook(client, tenant, webhook_receiver.url)
    narrowed = sender_settings.model_copy(update={"webhook_allowed_hosts": ["hooks.example.com"]})
    sender = WebhookSender(narrowed, app.state.engine, app.state.secrets)

    assert sender.deliver(_test_event(client, tenant, hook["id"])).state == "failed"

    assert webhook_receiver.requests == []
    log = deliveries(client, tenant, hook["id"])[0]
    assert (log["state"], log["attempts"]) == ("failed", 0)
    assert "INLET_WEBHOOK_ALLOWED_HOSTS" in log["last_error"]


def test_a_disabled_endpoint_gets_events_no_more_but_its_test_event(
    client: TestClient, app: Any, tenant: Tenant, sender: WebhookSender, webhook_receiver: Receiver,
) -> None:
    from api.webhooks.events import emit

    hook = create_webhook(client, tenant, webhook_receiver.url)
    with unit_of_work(app.state.engine) as session:
        emit(session, uuid.UUID(tenant.id), "run.failed", {"run_id": "r1"})
    client.patch(f"/webhooks/{hook['id']}", json={"enabled": False},
                 headers={**tenant.editor, "Content-Type": "application/merge-patch+json"})
    (queued,) = deliveries(client, tenant, hook["id"])

    assert sender.deliver(uuid.UUID(queued["id"])).state == "failed"
    assert sender.deliver(_test_event(client, tenant, hook["id"])).state == "succeeded"

    assert [payload(r)["type"] for r in webhook_receiver.requests] == ["webhook.test"]
    assert deliveries(client, tenant, hook["id"], event_type="run.failed")[0]["last_error"] == "the webhook is disabled"


def test_after_a_rotation_both_secrets_sign_for_the_overlap(
    client: TestClient, app: Any, tenant: Tenant, sender: WebhookSender, webhook_receiver: Receiver,
) -> None:
    hook = create_webhook(client, tenant, webhook_receiver.url)
    new = client.post(f"/webhooks/{hook['id']}/rotate-secret", headers=tenant.editor).json()["secret"]

    sender.deliver(_test_event(client, tenant, hook["id"]))
    with unit_of_work(app.state.engine) as session:  # the overlap is over
        from api.webhooks.models import Webhook

        session.execute(update(Webhook).values(previous_secret_until=utcnow() - timedelta(seconds=1)))
    sender.deliver(_test_event(client, tenant, hook["id"]))

    during, after = webhook_receiver.wait_for(2)
    assert len(during.headers["webhook-signature"].split(" ")) == 2
    assert signature_ok(new, during) and signature_ok(hook["secret"], during)
    assert len(after.headers["webhook-signature"].split(" ")) == 1
    assert signature_ok(new, after) and not signature_ok(hook["secret"], after)


def test_a_lost_secret_is_retried_and_named(client: TestClient, app: Any, tenant: Tenant, sender: WebhookSender, webhook_receiver: Receiver) -> None:
    hook = create_webhook(client, tenant, webhook_receiver.url)
    app.state.secrets.destroy(f"tenants/{tenant.id}/webhooks/{hook['id']}")

    assert sender.deliver(_test_event(client, tenant, hook["id"])).state == "pending"

    assert webhook_receiver.requests == []
    log = deliveries(client, tenant, hook["id"])[0]
    assert log["last_error"] == "the signing secret is gone from the secret store; rotate it"


def test_an_attempt_is_taken_once(client: TestClient, app: Any, tenant: Tenant, sender: WebhookSender, webhook_receiver: Receiver) -> None:
    hook = create_webhook(client, tenant, webhook_receiver.url)
    delivery_id = _test_event(client, tenant, hook["id"])

    with unit_of_work(app.state.engine) as session:
        first = delivery.claim_attempt(session=session, delivery_id=delivery_id, allowed_hosts=[])
    with unit_of_work(app.state.engine) as session:
        second = delivery.claim_attempt(session=session, delivery_id=delivery_id, allowed_hosts=[])

    assert isinstance(first, delivery.Attempt) and first.number == 1
    assert second == DeliveryOutcome("not-due"), "a second copy of the task sends nothing"
    assert sender.deliver(delivery_id) == DeliveryOutcome("not-due")
    assert webhook_receiver.requests == []
    result = delivery.send(first, secrets=app.state.secrets, client=sender.client)
    with unit_of_work(app.state.engine) as session:
        assert delivery.record_attempt(session=session, attempt=first, result=result,
                                       policy=sender.policy) == DeliveryOutcome("succeeded")
    assert sender.deliver(delivery_id) == DeliveryOutcome("succeeded"), "a delivered event is not sent again"
    assert len(webhook_receiver.requests) == 1


def test_the_scheduler_sends_again_what_stays_due(client: TestClient, app: Any, settings: Settings, tenant: Tenant, dispatcher: RecordingDispatcher) -> None:
    hook = create_webhook(client, tenant, "https://alerts.example.com/")
    delivery_id = _test_event(client, tenant, hook["id"])
    assert dispatcher.deliveries == [delivery_id]

    assert tick(app.state.engine, dispatcher, settings).deliveries_resent == 0, "just sent: not lost"
    long_ago = utcnow() - timedelta(minutes=5)
    with unit_of_work(app.state.engine) as session:
        session.execute(update(WebhookDelivery).values(next_attempt_at=long_ago, dispatched_at=long_ago))
    assert tick(app.state.engine, dispatcher, settings).deliveries_resent == 1
    assert tick(app.state.engine, dispatcher, settings).deliveries_resent == 0, "sent again once, not every tick"
    assert dispatcher.deliveries == [delivery_id, delivery_id]
    with Session(app.state.engine) as session:
        assert session.get(WebhookDelivery, delivery_id).state == "pending"


def test_the_body_is_the_events_json(client: TestClient, app: Any, tenant: Tenant) -> None:
    from api.webhooks.events import emit
    from api.webhooks.models import WebhookEvent

    create_webhook(client, tenant, "https://alerts.example.com/")
    with unit_of_work(app.state.engine) as session:
        event = emit(session, uuid.UUID(tenant.id), "offsets.changed", {"pipeline_name": "commandes-é", "n": 1})
        assert event is not None
        event_id = event.id
    with Session(app.state.engine) as session:
        stored = session.get(WebhookEvent, event_id)
        body = delivery.body_of(stored)
    assert json.loads(body) == {"type": "offsets.changed",
                                "timestamp": stored.created_at.isoformat().replace("+00:00", "Z"),
                                "data": {"pipeline_name": "commandes-é", "n": 1}}
