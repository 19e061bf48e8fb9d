"""The budget of every outbound HTTP call Inlet makes for a tenant (a schema registry, a token
endpoint, a webhook receiver): a total deadline and a cap on the bytes read.

httpx's timeouts bound each socket read, so a server that trickles a byte a second holds a call for
ever. Here the deadline is the request's whole life: every read and write on its connection waits at
most what is left of it (``DeadlineStream``, which ``egress.http_client``'s network backend puts under
every connection), then fails as httpx's ``ReadTimeout``/``WriteTimeout``. A client made with
``total_s`` starts the deadline at each request's send; it runs on through the reading of a streamed
body. ``read_capped`` reads a body up to a cap, after decompression, and refuses a longer one
(``AnswerRefused``) without holding more than the cap in memory.
"""

from __future__ import annotations

import contextvars
import time
import zlib
from typing import Any

import httpcore
import httpx

# The monotonic time the current request must be done by (None: no total deadline), per thread.
_deadline: contextvars.ContextVar[float | None] = contextvars.ContextVar("inlet_outbound_deadline", default=None)


class AnswerRefused(Exception):
    """An answer read no further: past its cap, or in an encoding Inlet does not decode."""


def _left(timeout: float | None) -> float | None:
    """``timeout``, cut to what is left of the current deadline; raises once it has passed."""
    deadline = _deadline.get()
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise httpcore.ReadTimeout("the call's total deadline passed")
    return left if timeout is None else min(timeout, left)


class DeadlineStream(httpcore.NetworkStream):
    """A connection whose every read and write waits at most what is left of the request's deadline."""

    def __init__(self, stream: httpcore.NetworkStream) -> None:
        self._stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, _left(timeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        try:
            self._stream.write(buffer, _left(timeout))
        except httpcore.ReadTimeout as exc:  # the deadline passed before this write
            raise httpcore.WriteTimeout(str(exc)) from None

    def close(self) -> None:
        self._stream.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        return DeadlineStream(self._stream.start_tls(ssl_context, server_hostname, _left(timeout)))

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class DeadlineClient(httpx.Client):
    """An httpx client whose every request has ``total_s`` from its send to the end of its body
    (None: only httpx's own timeouts, and no deadline left over from an earlier request)."""

    def __init__(self, *, total_s: float | None, **options: Any) -> None:
        super().__init__(**options)
        self.total_s = total_s

    def send(self, request: httpx.Request, **options: Any) -> httpx.Response:
        _deadline.set(None if self.total_s is None else time.monotonic() + self.total_s)
        return super().send(request, **options)


def read_capped(response: httpx.Response, limit: int) -> bytes:
    """A streamed response's body, decoded, refused (``AnswerRefused``) past ``limit`` bytes. A gzip'd
    or deflated body is inflated here, never more than the cap at a time (httpx's own decoder inflates
    a whole read at once: a 64 KiB read of a gzip bomb is 64 MiB); another encoding is refused."""
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    if encoding not in ("", "identity", "gzip", "x-gzip", "deflate"):
        raise AnswerRefused(f"the answer is encoded as {encoding[:40]!r}, which Inlet does not read")
    inflate = None if encoding in ("", "identity") else zlib.decompressobj(47 if "gzip" in encoding else zlib.MAX_WBITS)
    body = bytearray()
    for raw in response.iter_raw():
        if inflate is None:
            body += raw
        while inflate is not None and raw and len(body) <= limit:
            body += inflate.decompress(raw, limit + 1 - len(body))
            raw = inflate.unconsumed_tail
        if len(body) > limit:
            raise AnswerRefused(f"the answer is larger than {limit} bytes")
    return bytes(body)
