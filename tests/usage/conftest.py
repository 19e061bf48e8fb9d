"""The usage tests' clock: the run lifecycle's idea of now, so each attempt lands in a known hour."""

from __future__ import annotations

import pytest

from api.runs import lifecycle
from tests.usage.helpers import Clock


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(lifecycle, "utcnow", lambda: clock.now)
    return clock
