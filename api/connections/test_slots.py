"""How many connection tests one tenant may have in flight in an API process (``INLET_CONNECTION_TESTS_PER_TENANT``).

A test waits on a server the tenant names, for up to ``kafka_timeout_s`` per call; the API's request
threads are shared by every tenant (anyio's pool: 40 a process). Past its slots, a tenant's next test
is a 429 with ``Retry-After`` at once, and what the others run is untouched. Counted per process:
with N API processes a tenant has at most N times the slots.
"""

from __future__ import annotations

import math
import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager

from api.core.config import Settings
from api.core.errors import DomainError
from api.core.security import TenantContext


class TooManyConnectionTests(DomainError):
    status, code, title = 429, "too-many-connection-tests", "Too many connection tests at once"

    def __init__(self, limit: int, retry_after_s: int) -> None:
        super().__init__(f"This tenant already has {limit} connection test(s) in flight (the limit, "
                         f"INLET_CONNECTION_TESTS_PER_TENANT): try again in {retry_after_s} s",
                         headers={"Retry-After": str(retry_after_s)}, limit=limit)


class TestSlots:
    __test__ = False  # not a pytest class

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._in_flight: Counter[uuid.UUID] = Counter()

    @contextmanager
    def held(self, tenant_id: uuid.UUID, limit: int, retry_after_s: int) -> Iterator[None]:
        """One of ``tenant_id``'s slots while the block runs; ``TooManyConnectionTests`` when none is free."""
        with self._lock:
            if self._in_flight[tenant_id] >= limit:
                raise TooManyConnectionTests(limit, retry_after_s)
            self._in_flight[tenant_id] += 1
        try:
            yield
        finally:
            with self._lock:
                self._in_flight[tenant_id] -= 1
                if not self._in_flight[tenant_id]:
                    del self._in_flight[tenant_id]


SLOTS = TestSlots()


def connection_test_slot(ctx: TenantContext, settings: Settings) -> AbstractContextManager[None]:
    """One of the caller's tenant's slots while a test runs (the API's routes and the portal's)."""
    return SLOTS.held(ctx.tenant_id, settings.connection_tests_per_tenant, retry_after_s=math.ceil(settings.kafka_timeout_s))
