"""Portal test helpers: signing in through the form, reading CSRF tokens and a form's fields as a
browser would send them, serving the app over HTTP for the browser, and screenshots as artifacts."""

from __future__ import annotations

import os
import re
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from html import unescape
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import uvicorn
from fastapi.testclient import TestClient

REPO_ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO_ROOT / "artifacts" / "portal"
DOCS_IMG = REPO_ROOT / "docs" / "img"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run", "--disable-sync"]

_CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')


def csrf_of(html: str) -> str:
    found = _CSRF.search(html)
    assert found, "the page has no form with a CSRF token"
    return found.group(1)


def sign_in(client: TestClient, key: str) -> str:
    """Sign in through the login form; returns the session's CSRF token."""
    login = client.get("/portal/login")
    assert login.status_code == 200, login.text
    done = client.post("/portal/login", data={"api_key": key, "csrf_token": csrf_of(login.text),
                                              "next": "/portal/pipelines"}, follow_redirects=False)
    assert done.status_code == 303, done.text
    page = client.get("/portal/pipelines")
    assert page.status_code == 200, page.text
    return csrf_of(page.text)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serve(app: Any) -> Iterator[str]:
    """``app`` served by uvicorn on a free loopback port in a thread; yields its base URL."""
    config = uvicorn.Config(app, host="127.0.0.1", port=_free_port(), log_level="warning", lifespan="off",
                            access_log=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="portal-uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{config.port}"
    finally:
        server.should_exit = True
        thread.join(15)


class _FormReader(HTMLParser):
    """The fields of one form as a browser submits it untouched (hidden parts included: hiding is the
    script's, not the form's)."""

    def __init__(self, action: str) -> None:
        super().__init__(convert_charrefs=True)
        self.action, self.inside = action, False
        self.fields: list[tuple[str, str]] = []
        self._select: str | None = None
        self._options: list[tuple[str, bool]] = []
        self._textarea: str | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form":
            self.inside = a.get("action") == self.action
        if not self.inside or ("name" not in a and tag != "option"):
            return
        if tag == "input":
            kind = a.get("type", "text")
            if kind in ("checkbox", "radio"):
                if "checked" in a:
                    self.fields.append((a["name"], a.get("value") or "on"))
            elif kind not in ("submit", "button"):
                self.fields.append((a["name"], a.get("value", "")))
        elif tag == "select":
            self._select, self._options = a["name"], []
        elif tag == "option" and self._select is not None:
            self._options.append((a.get("value", ""), "selected" in a))
        elif tag == "textarea":
            self._textarea, self._text = a["name"], []

    def handle_data(self, data: str) -> None:
        if self._textarea is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self.inside = False
        elif tag == "select" and self._select is not None:
            chosen = [v for v, selected in self._options if selected] or [v for v, _ in self._options[:1]]
            self.fields.extend((self._select, v) for v in chosen)
            self._select = None
        elif tag == "textarea" and self._textarea is not None:
            self.fields.append((self._textarea, "".join(self._text).removeprefix("\n")))
            self._textarea = None


def field_errors(html: str) -> dict[str, str]:
    """The errors a form page shows beside its inputs, by input."""
    return {name: unescape(message) for name, message in re.findall(r'<p class="error" id="err-([\w-]+)">([^<]+)</p>', html)}


def created_id(response: Any) -> str:
    """The id of what a new-form's post created (it redirects to the created thing's page)."""
    assert response.status_code == 303, response.text
    return str(response.headers["location"].split("/")[3].split("?")[0])


def save_edit(client: TestClient, pipeline_id: str, **changes: str) -> Any:
    """Open a pipeline's edit form, change ``changes`` as a person would, and save it."""
    action = f"/portal/pipelines/{pipeline_id}/edit"
    fields = form_fields(client.get(action).text, action)
    return client.post(action, data={**fields, **changes}, follow_redirects=False)


def form_fields(html: str, action: str) -> dict[str, str]:
    """The fields the form posting to ``action`` sends as shown (its submit buttons aside)."""
    reader = _FormReader(action)
    reader.feed(html)
    assert reader.fields, f"no form posting to {action}"
    return dict(reader.fields)


def screenshot(page: Any, name: str, *, docs: str | None = None, full_page: bool = True) -> Path:
    """The page as ``artifacts/portal/<name>.png``; with ``docs`` and ``INLET_REFRESH_SCREENSHOTS=1``, also as
    the documentation's ``docs/img/<docs>.png`` (the pictures in README.md and docs/portal.md come from here)."""
    target = ARTIFACTS / f"{name}.png"
    target.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(target), full_page=full_page)
    if docs is not None and os.environ.get("INLET_REFRESH_SCREENSHOTS") == "1":
        page.screenshot(path=str(DOCS_IMG / f"{docs}.png"), full_page=full_page)
    return target
