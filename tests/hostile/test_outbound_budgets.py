"""Every outbound call has a budget whatever the server at the other end does (``spark_jobs.outbound``):
a schema registry or token endpoint that trickles its answer a byte at a time fails by the call's
total deadline, not after the server's pleasure; a registry's answer past its cap (a gzip bomb among
them) is refused without being held; and the registry's schema cache never answers one tenant's
credentials with a schema the registry gave another's.

The servers are stand-ins on loopback (a trickling HTTP server, a registry with per-user rules):
what they do is what the tests are about, and no real registry can be made to do it."""

from __future__ import annotations

import base64
import json
import socket
import time
import tracemalloc
import zlib
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler

import httpx
import pytest

from spark_jobs.egress import EgressPolicy, http_client
from spark_jobs.errors import JobError
from spark_jobs.oauth import TokenRefused, TokenSource
from spark_jobs.registry import RegistryClient, RegistryConfig, RegistryUnavailable
from tests.fixtures.loopback_http import serve

LOOPBACK = EgressPolicy.of(allow=["127.0.0.0/8"])
SCHEMA = {"schema": json.dumps({"type": "record", "name": "Person", "fields": [{"name": "ssn", "type": "string"}]})}


def _trickle(handler: BaseHTTPRequestHandler) -> None:
    """A status line, then one header byte every 0.2 s for 40 s: each read gets a byte in time."""
    try:
        handler.wfile.write(b"HTTP/1.1 200 OK\r\nX-Slow: ")
        handler.wfile.flush()
        for _ in range(200):
            time.sleep(0.2)
            handler.wfile.write(b"a")
            handler.wfile.flush()
    except OSError:  # the client gave up: as it should
        pass


@pytest.fixture
def trickling() -> Iterator[str]:
    yield from serve(_trickle)


def test_a_registry_that_trickles_its_answer_fails_by_the_calls_total_deadline(trickling: str) -> None:
    client = RegistryClient(RegistryConfig(url=trickling, egress=LOOPBACK), timeout_s=1.0)
    began = time.monotonic()
    with pytest.raises(RegistryUnavailable) as failed:
        client.by_id(1)
    assert failed.value.how == "timeout" and time.monotonic() - began < 2.5  # each read alone would wait 40 s


def test_a_token_endpoint_that_trickles_its_answer_fails_by_the_calls_total_deadline(trickling: str) -> None:
    source = TokenSource(client_id="inlet", client_secret="s3cret-of-the-tenant", token_endpoint_url=f"{trickling}/token",
                         egress=LOOPBACK, timeout_s=1.0)
    began = time.monotonic()
    with pytest.raises(TokenRefused) as failed:
        source.fetch()
    assert failed.value.kind == "token_endpoint_unreachable" and time.monotonic() - began < 2.5


def test_a_clients_total_deadline_holds_for_every_request_and_none_leaks_into_the_next(trickling: str) -> None:
    """As the webhook sender's client is made (``worker.webhooks``): the deadline is each request's;
    a client without one, in the same thread after it, is not cut short by it."""
    bounded = http_client(LOOPBACK, total_s=0.5, timeout=5)
    for _ in range(2):
        began = time.monotonic()
        with pytest.raises(httpx.TimeoutException):
            bounded.get(trickling)
        assert time.monotonic() - began < 1.5
    for url in serve(_answer_after(0.7)):
        assert http_client(LOOPBACK, timeout=5).get(url).status_code == 200  # past the bounded one's deadline


def _answer_after(seconds: float) -> Callable[[BaseHTTPRequestHandler], None]:
    def answer(handler: BaseHTTPRequestHandler) -> None:
        time.sleep(seconds)
        handler.send_response(200)
        handler.send_header("content-length", "0")
        handler.end_headers()

    return answer


def _bomb(handler: BaseHTTPRequestHandler) -> None:
    """A gzip'd answer of 256 MiB of spaces: 250 kB on the wire."""
    payload = BOMB
    handler.send_response(200)
    handler.send_header("content-type", "application/json")
    handler.send_header("content-encoding", "gzip")
    handler.send_header("content-length", str(len(payload)))
    handler.end_headers()
    try:
        handler.wfile.write(payload)
    except OSError:
        pass


def _gzip_of_spaces(mib: int) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)  # 31: a gzip stream
    block = b" " * (1 << 20)
    return b"".join(packer.compress(block) for _ in range(mib)) + packer.flush()


BOMB = _gzip_of_spaces(256)


def test_a_registry_answer_past_its_cap_is_refused_unheld() -> None:
    for url in serve(_bomb):
        client = RegistryClient(RegistryConfig(url=url, egress=LOOPBACK), timeout_s=10.0)
        tracemalloc.start()
        try:
            with pytest.raises(RegistryUnavailable) as refused:
                client.version("orders-value", "latest")
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert refused.value.how == "error" and "larger than 16777216 bytes" in refused.value.message
    assert peak < 64 << 20, f"{peak / 2**20:.0f} MiB held for a 256 MiB answer"


def test_the_schema_cache_never_answers_one_tenants_credentials_with_anothers_schema() -> None:
    """Alice may read schema id 1, Bob is refused it (403), on the same registry, in one process (a
    worker's Python serves every tenant's runs): Bob's request goes to the registry, which refuses it."""
    def registry(handler: BaseHTTPRequestHandler) -> None:
        user = base64.b64decode(handler.headers.get("authorization", "Basic ").split()[-1] or b"").split(b":")[0]
        status, body = (200, SCHEMA) if user == b"alice" else (403, {"error_code": 40301, "message": "forbidden"})
        payload = json.dumps(body).encode()
        handler.send_response(status)
        handler.send_header("content-type", "application/json")
        handler.send_header("content-length", str(len(payload)))
        handler.end_headers()
        handler.wfile.write(payload)

    for url in serve(registry):
        alice = RegistryClient(RegistryConfig(url=url, username="alice", password="a-pass", egress=LOOPBACK))
        bob = RegistryClient(RegistryConfig(url=url, username="bob", password="b-pass", egress=LOOPBACK))
        found = alice.by_id(1)
        assert found is not None and "ssn" in found.schema
        with pytest.raises(JobError) as refused:
            bob.by_id(1)
        assert refused.value.kind == "registry_auth" and "ssn" not in refused.value.message
        assert alice.by_id(1) == found  # Alice's own stays cached


def test_a_free_port_is_refused_not_hung() -> None:
    """The budget covers connecting too: nothing listens, and the call says so at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = RegistryClient(RegistryConfig(url=f"http://127.0.0.1:{port}", egress=LOOPBACK), timeout_s=1.0)
    with pytest.raises(RegistryUnavailable) as failed:
        client.subjects()
    assert failed.value.how == "unreachable"
