"""Waiting on a server a tenant names holds nothing other tenants need (issue 52: on SQLite, every
other tenant's `GET /me` and `POST /connections` waited 30 s behind a connection test whose registry
sent a byte every 2 s; on PostgreSQL 35 such tests took the pool). A connection test, and an offsets
read or change, hold no transaction while Inlet waits on the tenant's servers, and a tenant has
``INLET_CONNECTION_TESTS_PER_TENANT`` tests in flight at most (a 429 with ``Retry-After`` past them).
The registry is a stand-in on loopback that trickles a byte every 0.5 s, the cluster a port that
accepts connections and never answers: what they do is the point, and no real server does it."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from api.core.config import Settings
from api.main import create_app
from tests.factories import Tenant, create_sandbox_pipeline, make_tenant, plaintext_connection_body
from tests.fixtures.database import truncate_all
from tests.fixtures.kafka import SandboxKafka
from tests.fixtures.loopback_http import serve

TEST_TIMEOUT_S = 8.0


def _trickle(handler: BaseHTTPRequestHandler) -> None:
    try:
        handler.wfile.write(b"HTTP/1.1 200 OK\r\nX-Slow: ")
        for _ in range(60):
            time.sleep(0.5)
            handler.wfile.write(b"a")
            handler.wfile.flush()
    except OSError:  # the test gave up on it, as it should
        pass


@pytest.fixture
def trickling() -> Iterator[str]:
    yield from serve(_trickle)


@pytest.fixture
def silent_cluster() -> Iterator[str]:
    """A port that accepts TCP connections (the kernel's backlog) and never answers a Kafka request."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield f"127.0.0.1:{sock.getsockname()[1]}"


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    app = create_app(settings.model_copy(update={"kafka_timeout_s": TEST_TIMEOUT_S, "connection_tests_per_tenant": 2}))
    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client
    truncate_all(app.state.engine)
    app.state.engine.dispose()


def _slow_test(client: TestClient, tenant: Tenant, bootstrap: str, registry: str) -> Callable[[], httpx.Response]:
    body = plaintext_connection_body(bootstrap, schema_registry={"url": registry})
    return lambda: client.post("/connections:test", json=body, headers=tenant.editor)


def _stored_slow(client: TestClient, tenant: Tenant, bootstrap: str, registry: str) -> Callable[[], httpx.Response]:
    created = client.post("/connections", json=plaintext_connection_body(bootstrap, schema_registry={"url": registry}),
                          headers=tenant.editor)
    assert created.status_code == 201, created.text
    return lambda: client.post(f"/connections/{created.json()['id']}/test", headers=tenant.editor)


def _started(pool: ThreadPoolExecutor, calls: list[Callable[[], httpx.Response]]) -> list[Future[Any]]:
    futures = [pool.submit(call) for call in calls]
    time.sleep(1.0)  # each is now waiting on the trickling registry (the broker answered at once)
    return futures


def test_other_tenants_are_answered_while_a_tenants_tests_wait_on_its_server(
        client: TestClient, sandbox_kafka: SandboxKafka, trickling: str) -> None:
    """On SQLite, the default database: A's two tests (an unsaved one, a stored one) wait on the
    registry; meanwhile B reads, writes and tests as if nothing were going on, and A's third test is a
    429 at once, while the first two go on to their own answer."""
    a, b = make_tenant(client), make_tenant(client)
    bootstrap = sandbox_kafka.bootstrap_servers
    with ThreadPoolExecutor(4) as pool:
        slow = _started(pool, [_slow_test(client, a, bootstrap, trickling), _stored_slow(client, a, bootstrap, trickling)])
        assert not any(f.done() for f in slow)

        assert client.get("/me", headers=b.viewer).status_code == 200
        written = client.post("/connections", json=plaintext_connection_body(bootstrap), headers=b.editor)
        assert written.status_code == 201, written.text
        assert client.post(f"/connections/{written.json()['id']}/test", headers=b.editor).status_code == 200
        assert not any(f.done() for f in slow)  # B was answered while A's tests still waited

        third = client.post("/connections:test", json=plaintext_connection_body(bootstrap, schema_registry={"url": trickling}),
                            headers=a.editor)
        assert third.status_code == 429 and third.headers["Retry-After"] == "8", third.text
        assert third.json()["type"].endswith("/too-many-connection-tests") and "2 connection test(s)" in third.json()["detail"]

        answers = [f.result(timeout=30) for f in slow]
    assert [r.status_code for r in answers] == [504, 504], [r.text for r in answers]
    # A's slots are free again.
    assert client.post("/connections:test", json=plaintext_connection_body(bootstrap), headers=a.editor).status_code == 200


def test_other_tenants_write_while_a_tenants_offsets_wait_on_its_cluster(
        client: TestClient, sandbox_kafka: SandboxKafka, silent_cluster: str) -> None:
    """A's offsets read and change ask a cluster that never answers (for kafka_timeout_s each);
    meanwhile B writes a connection and moves its own pipeline's offsets."""
    a, b = make_tenant(client), make_tenant(client)
    silent = create_sandbox_pipeline(client, a, silent_cluster, ["orders"])
    b_pipe = create_sandbox_pipeline(client, b, sandbox_kafka.bootstrap_servers, ["orders"])
    offsets = f"/pipelines/{silent['id']}/offsets"
    with ThreadPoolExecutor(2) as pool:
        waiting = _started(pool, [lambda: client.get(offsets, headers=a.viewer),
                                  lambda: client.delete(offsets, headers=a.editor)])
        assert not any(f.done() for f in waiting)

        written = client.post("/connections", json=plaintext_connection_body(sandbox_kafka.bootstrap_servers),
                              headers=b.editor)
        assert written.status_code == 201, written.text
        reset = client.delete(f"/pipelines/{b_pipe['id']}/offsets", headers=b.editor)
        assert reset.status_code == 200, reset.text
        assert not any(f.done() for f in waiting)  # B was answered while A's cluster was still asked

        read, changed = (f.result(timeout=60) for f in waiting)
    assert read.status_code == 200 and read.json()["cluster"]["kind"] == "timeout", read.text
    assert changed.status_code == 504, changed.text
