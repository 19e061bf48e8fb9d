"""Webhook fixtures: the receiver on loopback (tests/fixtures/webhook_receiver.py), and the app with a
recording dispatcher (tests/fixtures/dispatch.py), so a test sees which deliveries were handed to the
queue after each commit."""

from __future__ import annotations

from tests.fixtures.dispatch import app, dispatcher
from tests.fixtures.webhook_receiver import webhook_receiver

__all__ = ["app", "dispatcher", "webhook_receiver"]
