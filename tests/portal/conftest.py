"""Portal fixtures: the app with a recording dispatcher (no Celery in fast tests;
tests/fixtures/dispatch.py), the app served over HTTP, and headless Debian Chromium driven by Playwright."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.fixtures.dispatch import app, dispatcher
from tests.portal.helpers import CHROMIUM, CHROMIUM_ARGS, serve

__all__ = ["app", "dispatcher"]


@pytest.fixture
def live_server(app: object, client: Any) -> Iterator[str]:
    """The test's app as a real HTTP server (``client`` first, so the app's tables are truncated after it stops)."""
    with serve(app) as base_url:
        yield base_url


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.fail("Debian's chromium is not installed: apt-get install -y chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def browser_page(chromium: Any) -> Iterator[Any]:
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(20_000)
    yield page
    context.close()
