"""Anti-automation on authentication (OWASP ASVS 2.2): failed attempts counted per client address in a
sliding minute; past ``INLET_AUTH_FAILURES_PER_MINUTE`` an address's attempts are answered 429 with
``Retry-After`` before any key is looked up (API keys, the operator token, the portal's sign-in),
until its oldest failure leaves the window.

Valid keys are not slowed: a key that authenticated in the last ``KNOWN_FOR_S`` seconds (kept as its
digest, at most ``KNOWN_KEYS`` of them) is checked as usual even from a throttled address, so a
tenant behind the same NAT as a guesser keeps working; a guesser cannot have a new key checked while
throttled. Memory is bounded: at most ``ADDRESSES`` addresses are tracked (the least recent
forgotten first). Per process: each API worker counts its own.
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import TypeVar

from api.core.errors import DomainError, Unauthorized

ADDRESSES = 10_000
KNOWN_KEYS = 10_000
KNOWN_FOR_S = 600.0
WINDOW_S = 60.0

T = TypeVar("T")


class TooManyFailures(DomainError):
    status, code, title = 429, "too-many-failed-authentications", "Too many failed authentications"

    def __init__(self, retry_after_s: int) -> None:
        super().__init__(f"Too many failed authentications from this address: try again in {retry_after_s} s",
                         headers={"Retry-After": str(retry_after_s)})


class AuthThrottle:
    def __init__(self, failures_per_minute: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.budget = failures_per_minute
        self.clock = clock
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()
        self._known: OrderedDict[str, float] = OrderedDict()  # key digest -> when it last authenticated
        self._lock = threading.Lock()

    def guard(self, address: str | None, token: str, authenticate: Callable[[], T]) -> T:
        """``authenticate()`` unless ``address`` is over its budget and ``token`` not a known valid key
        (then ``TooManyFailures``); its failure (401: no such key) counted against ``address``. A 403 is
        a valid credential on the wrong route: not a guess."""
        digest = hashlib.sha256(token.encode()).hexdigest()
        address = address or "unknown"
        wait = self._wait(address)
        if wait is not None and not self._is_known(digest):
            raise TooManyFailures(wait)
        try:
            found = authenticate()
        except Unauthorized:
            self._failed(address)
            raise
        with self._lock:
            self._known[digest] = self.clock()
            self._known.move_to_end(digest)
            while len(self._known) > KNOWN_KEYS:
                self._known.popitem(last=False)
        return found

    def _wait(self, address: str) -> int | None:
        """Seconds until ``address`` may try again; None while it is within its budget."""
        now = self.clock()
        with self._lock:
            failures = self._failures.get(address)
            if failures is None:
                return None
            while failures and failures[0] <= now - WINDOW_S:
                failures.popleft()
            if len(failures) < self.budget:
                return None
            return max(1, math.ceil(failures[0] + WINDOW_S - now))

    def _failed(self, address: str) -> None:
        with self._lock:
            failures = self._failures.setdefault(address, deque(maxlen=self.budget))
            failures.append(self.clock())
            self._failures.move_to_end(address)
            while len(self._failures) > ADDRESSES:
                self._failures.popitem(last=False)

    def _is_known(self, digest: str) -> bool:
        with self._lock:
            seen = self._known.get(digest)
            return seen is not None and self.clock() - seen < KNOWN_FOR_S
