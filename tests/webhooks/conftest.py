"""Webhook fixtures: the receiver on loopback (tests/fixtures/webhook_receiver.py), and the app with a
recording dispatcher, so a test sees which deliveries were handed to the queue after each commit."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from api.core.config import Settings
from api.main import create_app
from tests.fixtures.webhook_receiver import webhook_receiver
from tests.webhooks.helpers import RecordingDispatcher

__all__ = ["webhook_receiver"]


@pytest.fixture
def dispatcher() -> RecordingDispatcher:
    return RecordingDispatcher()


@pytest.fixture
def app(settings: Settings, dispatcher: RecordingDispatcher) -> Iterator[object]:
    from tests.fixtures.database import truncate_all

    application = create_app(settings, dispatcher=dispatcher)
    yield application
    truncate_all(application.state.engine)
    application.state.engine.dispose()
