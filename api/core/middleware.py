"""ASGI guards in front of every route: body size, JSON-only bodies of bounded nesting, and request
logging without bodies or headers (they may carry secrets)."""

from __future__ import annotations

import itertools
import json
import logging
import re
import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.core.errors import (
    PROBLEM_BASE,
    PROBLEM_JSON,
    DomainError,
    PayloadTooLarge,
    UnsupportedMediaType,
    ValidationFailed,
)

log = logging.getLogger("inlet.access")

_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})

# How deep a JSON body may nest. Inlet's deepest body (a pipeline's per-partition starting offsets)
# nests 5 deep; the code that walks a body (validation, merge patch, fingerprints) recurses once per
# level, so a body nested hundreds deep must stop here, as a 422, not as a RecursionError further in.
MAX_JSON_DEPTH = 32
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)  # unrolled: no backtracking
_BRACKETS = bytes(range(256)).translate(None, b"[]{}")  # every byte but the brackets, to delete
_STEP = [1 if b in b"[{" else -1 for b in range(256)]


def nests_too_deep(body: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether ``body``'s arrays and objects nest more than ``limit`` deep: linear in its size, no parsing."""
    if body.count(b"[") + body.count(b"{") <= limit:  # nearly every body: nothing to scan
        return False
    brackets = _JSON_STRING.sub(b"", body).translate(None, _BRACKETS)
    return max(itertools.accumulate(map(_STEP.__getitem__, brackets)), default=0) > limit


async def _send_problem(send: Send, scope: Scope, error: DomainError) -> None:
    """``error`` as the app's handler renders it (``api.core.errors``): answered here, before any route."""
    problem: dict[str, Any] = {"type": PROBLEM_BASE + error.code, "title": error.title, "status": error.status,
                               "detail": error.detail, "instance": scope.get("path", "")}
    if error.errors is not None:
        problem["errors"] = error.errors
    body = json.dumps(problem | error.extra).encode()
    await send({"type": "http.response.start", "status": error.status,
                "headers": [(b"content-type", PROBLEM_JSON.encode()), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def _is_json(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


def _not_utf8(body: bytes, content_type: str) -> str | None:
    """Why a JSON body is refused for its encoding, or None: JSON between systems is UTF-8 (RFC 8259
    §8.1). Python's parser would take UTF-16 and UTF-32 too, which the nesting guard, reading UTF-8
    bytes, misjudges (a 900-deep UTF-16 body reached the fingerprint's recursion). A raw NUL is in no
    valid JSON text, UTF-8 or not."""
    charset = re.search(r";\s*charset\s*=\s*\"?([^\s;\"]+)", content_type, re.IGNORECASE)
    if charset and charset.group(1).lower().replace("_", "-") not in ("utf-8", "utf8"):
        return f"A JSON body is UTF-8 (RFC 8259 §8.1): the charset {charset.group(1)[:40]!r} is not taken"
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"A JSON body is UTF-8 (RFC 8259 §8.1): this one is not (at byte {exc.start})"
    if b"\x00" in body:  # UTF-16 or UTF-32 of ASCII text is valid UTF-8 with NULs between the characters
        return "A JSON body is UTF-8 (RFC 8259 §8.1): this one holds NUL bytes, as UTF-16 or UTF-32 text does"
    return None


def _is_form(content_type: str) -> bool:
    return content_type.split(";", 1)[0].strip().lower() == "application/x-www-form-urlencoded"


class RequestGuard:
    """Refuses bodies over the size limit (413) and bodies that are not JSON, or JSON not in UTF-8 (415); under
    ``form_paths`` (the portal's HTML forms) urlencoded bodies are accepted too."""

    def __init__(self, app: ASGIApp, *, max_body_bytes: int, form_paths: tuple[str, ...] = ()) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.form_paths = form_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in _BODY_METHODS:
            await self.app(scope, receive, send)
            return
        headers = {k.decode().lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        length = headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > self.max_body_bytes:
            await _send_problem(send, scope, self._too_large())
            return
        has_body = (length not in (None, "0")) or "transfer-encoding" in headers
        content_type = headers.get("content-type", "")
        form_ok = bool(self.form_paths) and _is_form(content_type) and scope.get("path", "").startswith(self.form_paths)
        if has_body and not (_is_json(content_type) or form_ok):
            await _send_problem(send, scope, UnsupportedMediaType(
                "Send the body as application/json (or application/merge-patch+json for PATCH)"))
            return
        # The whole body is read here, against the limit, before the app sees it: an over-limit body
        # sent without Content-Length (chunked) is a 413 too, never a parse error further in.
        chunks: list[bytes] = []
        received = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away: no one to answer
                return
            chunk = message.get("body", b"")
            received += len(chunk)
            if received > self.max_body_bytes:
                await _send_problem(send, scope, self._too_large())
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body, delivered = b"".join(chunks), False
        if _is_json(content_type) and (why := _not_utf8(body, content_type)):
            await _send_problem(send, scope, UnsupportedMediaType(why))
            return
        if _is_json(content_type) and nests_too_deep(body):
            too_deep = f"The JSON body nests arrays and objects more than {MAX_JSON_DEPTH} deep"
            await _send_problem(send, scope, ValidationFailed.field("body", too_deep, type_="too_deep"))
            return

        async def replay() -> Message:
            nonlocal delivered
            if delivered:
                return await receive()
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

    def _too_large(self) -> PayloadTooLarge:
        return PayloadTooLarge(f"The body is larger than {self.max_body_bytes} bytes")


class AccessLog:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status: dict[str, Any] = {"code": 500}

        async def capture(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, capture)
        finally:
            log.info("%s %s %s %.1fms", scope["method"], scope["path"], status["code"],
                     (time.perf_counter() - started) * 1000)
