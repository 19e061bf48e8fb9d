"""No tenant can make Inlet reach the platform's network (issue 29, the egress rows).

An "internal" HTTP server on loopback stands for the platform's private services (a metadata
endpoint, an admin API): with loopback denied, as it is by default, it must receive nothing, whether
a tenant names it as an OAuth token endpoint, a schema registry or a webhook; every spelling of a
denied address is refused when it is written, with a 422 naming the field and the rule; a name
allowed when written that later resolves to a denied address is refused at the connection; and no
answer body of an upstream ever reaches the tenant. Metadata and private addresses are only ever
refused by their spelling, never connected to. ``dns`` stands in for a tenant's name server (Inlet
cannot be shown against a real one here): it answers for the names a test gives it, every other name
resolves as usual.
"""

from __future__ import annotations

import json
import socket
import ssl
import threading
import types
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from api.core.config import Settings
from api.kafka import KafkaClient, KafkaClientConfig
from api.kafka.errors import KafkaEgressDenied
from api.main import create_app
from spark_jobs.egress import EgressPolicy, EgressRefused, http_client
from spark_jobs.oauth import TokenRefused, TokenSource
from spark_jobs.registry import RegistryClient, RegistryConfig, RegistryUnavailable
from tests.factories import LOOPBACK_ALLOWED, PROBLEM_JSON, Tenant, make_tenant, plaintext_connection_body
from tests.fixtures.database import truncate_all
from tests.fixtures.dispatch import RecordingDispatcher
from tests.fixtures.kafka_broker import TestCA
from tests.webhooks.helpers import deliveries
from worker.webhooks import WebhookSender

INTERNAL_SECRET = "internal-only-3c9f: root password hunter2"
PUBLIC = "192.0.2.10"  # TEST-NET-1: allowed by the policy, never connected to (a refusal comes first)


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class InternalService:
    """A platform-internal HTTP service on loopback: it keeps every request and answers each with
    ``status`` and a body holding ``INTERNAL_SECRET`` (JSON shaped as an OAuth or registry error)."""

    status: int = 401
    body: dict[str, Any] = field(default_factory=lambda: {
        "error": "invalid_client", "error_description": INTERNAL_SECRET, "message": INTERNAL_SECRET,
        "error_code": 40101})
    requests: list[Seen] = field(default_factory=list)

    def start(self, context: ssl.SSLContext | None = None) -> InternalService:
        service = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                service.requests.append(Seen(self.command, self.path, {k.lower(): v for k, v in self.headers.items()},
                                             body))
                payload = json.dumps(service.body).encode()
                self.send_response(service.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = _answer

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if context is not None:
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name="internal-service", daemon=True).start()
        self.port = int(self._server.server_address[1])
        self.url = f"http://127.0.0.1:{self.port}"
        return self

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def internal() -> Iterator[InternalService]:
    service = InternalService().start()
    yield service
    service.close()


@dataclass
class Dns:
    answers: dict[str, str] = field(default_factory=dict)
    lookups: list[str] = field(default_factory=list)


@pytest.fixture
def dns(monkeypatch: pytest.MonkeyPatch) -> Dns:
    """A stand-in for a tenant's name server: ``answers`` maps names to the address they resolve to now."""
    served = Dns()
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(host, str) and host in served.answers:
            served.lookups.append(host)
            return real(served.answers[host], port, *args, **kwargs)
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return served


@pytest.fixture
def denied_settings(settings: Settings) -> Settings:
    """The default policy (the suite opens loopback for its own services): loopback denied, names looked up."""
    return settings.model_copy(update={"egress_allow": [], "egress_lookup_s": 2.0})


@pytest.fixture
def denied(denied_settings: Settings) -> Iterator[TestClient]:
    app = create_app(denied_settings, dispatcher=RecordingDispatcher())
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client
    truncate_all(app.state.engine)
    app.state.engine.dispose()


@pytest.fixture
def hostile(denied: TestClient) -> Tenant:
    return make_tenant(denied)


def _denied_body(field_name: str, message: str, instance: str) -> dict[str, Any]:
    return {"type": "https://inlet.dev/problems/egress-denied", "title": "The address is not one Inlet may connect to",
            "status": 422, "detail": f"{field_name}: {message}", "instance": instance,
            "errors": [{"field": field_name, "message": message, "type": "egress_denied"}]}


def _refused(response: httpx.Response, field_name: str, message: str) -> None:
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == PROBLEM_JSON
    assert response.json() == _denied_body(field_name, message, response.request.url.path)


def _oauth_body(token_endpoint_url: str, bootstrap: str = f"{PUBLIC}:9092") -> dict[str, Any]:
    return plaintext_connection_body(bootstrap, security_protocol="SASL_PLAINTEXT", sasl_mechanism="OAUTHBEARER",
                                     credentials={"client_id": "tenant-client", "client_secret": "tenant-secret",
                                                  "token_endpoint_url": token_endpoint_url})


LOOPBACK = "in a denied range (loopback)"
# Every spelling of a denied address, as a URL host, and what the refusal says.
SPELLINGS = [
    ("169.254.169.254", "the host is 169.254.169.254, which is in a denied range (link-local, cloud metadata included)"),
    ("[::ffff:169.254.169.254]",
     "the host is ::ffff:169.254.169.254, which is in a denied range (link-local, cloud metadata included)"),
    ("[fd00:ec2::254]", "the host is fd00:ec2::254, which is in a denied range (cloud metadata)"),
    ("100.100.100.200", "the host is 100.100.100.200, which is in a denied range (cloud metadata)"),
    ("[::ffff:127.0.0.1]", f"the host is ::ffff:127.0.0.1, which is {LOOPBACK}"),
    ("[::ffff:7f00:1]", f"the host is ::ffff:127.0.0.1, which is {LOOPBACK}"),
    ("[64:ff9b::7f00:1]", f"the host is 64:ff9b::7f00:1, which is {LOOPBACK}"),
    ("2130706433", f"the host is 127.0.0.1 (written 2130706433), which is {LOOPBACK}"),
    ("0x7f000001", f"the host is 127.0.0.1 (written 0x7f000001), which is {LOOPBACK}"),
    ("0177.0.0.1", f"the host is 127.0.0.1 (written 0177.0.0.1), which is {LOOPBACK}"),
    ("127.1", f"the host is 127.0.0.1 (written 127.1), which is {LOOPBACK}"),
    ("0x7f.1", f"the host is 127.0.0.1 (written 0x7f.1), which is {LOOPBACK}"),
    ("127.0.0.1", f"the host is 127.0.0.1, which is {LOOPBACK}"),
    ("[::1]", f"the host is ::1, which is {LOOPBACK}"),
    ("localhost", f"the host resolves to an address {LOOPBACK}"),
    ("0.0.0.0", "the host is 0.0.0.0, which is in a denied range (unspecified)"),
    ("[::]", "the host is ::, which is in a denied range (unspecified)"),
    ("[fe80::1]", "the host is fe80::1, which is in a denied range (link-local)"),
    ("224.0.0.1", "the host is 224.0.0.1, which is in a denied range (multicast)"),
]


# Definition time: every spelling, every field.

@pytest.mark.parametrize(("host", "message"), SPELLINGS + [
    ("10.0.0.5", "the host is 10.0.0.5, which is in a denied range (private)"),
    ("[fd12:3456::1]", "the host is fd12:3456::1, which is in a denied range (private)"),
    ("167772161", "the host is 10.0.0.1 (written 167772161), which is in a denied range (private)"),
])
def test_a_webhook_to_any_spelling_of_a_denied_address_is_refused_when_written(
    denied: TestClient, hostile: Tenant, host: str, message: str
) -> None:
    _refused(denied.post("/webhooks", json={"url": f"http://{host}/latest/meta-data/"}, headers=hostile.editor),
             "url", message)
    assert denied.get("/webhooks", headers=hostile.viewer).json()["total"] == 0


def test_a_webhook_url_is_checked_again_when_patched(denied: TestClient, hostile: Tenant, dns: Dns) -> None:
    dns.answers["hooks.tenant.example"] = PUBLIC
    created = denied.post("/webhooks", json={"url": "https://hooks.tenant.example/inlet"}, headers=hostile.editor)
    assert created.status_code == 201, created.text

    patched = denied.patch(f"/webhooks/{created.json()['id']}", json={"url": "http://0x7f000001:8080/"},
                           headers={**hostile.editor, "content-type": "application/merge-patch+json"})

    _refused(patched, "url", f"the host is 127.0.0.1 (written 0x7f000001), which is {LOOPBACK}")


@pytest.mark.parametrize(("host", "message"), SPELLINGS)
@pytest.mark.parametrize("path", ["/connections", "/connections:test"])
def test_every_address_of_a_connection_is_refused_in_every_spelling(
    denied: TestClient, hostile: Tenant, internal: InternalService, path: str, host: str, message: str
) -> None:
    bootstrap = plaintext_connection_body(f"{host}:9092")
    registry = plaintext_connection_body(f"{PUBLIC}:9092", schema_registry={"url": f"http://{host}:8081"})
    token = _oauth_body(f"http://{host}/oauth2/token")

    _refused(denied.post(path, json=bootstrap, headers=hostile.editor), "bootstrap_servers", f"entry 1: {message}")
    _refused(denied.post(path, json=registry, headers=hostile.editor), "schema_registry.url", message)
    _refused(denied.post(path, json=token, headers=hostile.editor), "credentials.token_endpoint_url", message)
    assert denied.get("/connections", headers=hostile.viewer).json()["total"] == 0


def test_an_ipv4_address_in_an_odd_spelling_is_refused_even_where_its_address_is_allowed(
    denied: TestClient, hostile: Tenant
) -> None:
    # 3221225994 is 192.0.2.10: an allowed address, but no registry needs to be written that way, and
    # refusing the spelling leaves one parser (a.b.c.d) to agree with the resolver.
    body = plaintext_connection_body(f"{PUBLIC}:9092", schema_registry={"url": "http://3221225994:8081"})

    _refused(denied.post("/connections", json=body, headers=hostile.editor), "schema_registry.url",
             "write the IPv4 address as a.b.c.d (192.0.2.10), not 3221225994")


# The internal service receives nothing.

def test_a_token_endpoint_on_an_internal_address_gets_nothing(
    denied: TestClient, hostile: Tenant, internal: InternalService
) -> None:
    for url in (f"{internal.url}/oauth2/token", f"http://localhost:{internal.port}/oauth2/token"):
        refused = denied.post("/connections:test", json=_oauth_body(url), headers=hostile.editor)
        assert refused.status_code == 422, refused.text
        assert refused.json()["errors"][0]["field"] == "credentials.token_endpoint_url"
    assert internal.requests == []


def test_a_schema_registry_on_an_internal_address_gets_nothing(
    denied: TestClient, hostile: Tenant, internal: InternalService
) -> None:
    body = plaintext_connection_body(f"{PUBLIC}:9092", schema_registry={"url": internal.url})
    for path in ("/connections:test", "/connections"):
        _refused(denied.post(path, json=body, headers=hostile.editor), "schema_registry.url",
                 f"the host is 127.0.0.1, which is {LOOPBACK}")
    assert internal.requests == []


def test_a_webhook_to_an_internal_address_gets_nothing(
    denied: TestClient, hostile: Tenant, internal: InternalService
) -> None:
    _refused(denied.post("/webhooks", json={"url": f"{internal.url}/hook"}, headers=hostile.editor), "url",
             f"the host is 127.0.0.1, which is {LOOPBACK}")
    assert internal.requests == []


# Connect time: DNS can change after the check at definition.

def test_a_webhook_whose_name_later_resolves_to_loopback_gets_nothing(
    denied: TestClient, denied_settings: Settings, hostile: Tenant, internal: InternalService, dns: Dns
) -> None:
    dns.answers["hooks.tenant.example"] = PUBLIC
    created = denied.post("/webhooks", json={"url": f"http://hooks.tenant.example:{internal.port}/hook"},
                          headers=hostile.editor)
    assert created.status_code == 201, created.text
    dns.answers["hooks.tenant.example"] = "127.0.0.1"  # the tenant's DNS, rebound after the check
    sent = denied.post(f"/webhooks/{created.json()['id']}/test", headers=hostile.editor)
    assert sent.status_code == 202, sent.text

    app: Any = denied.app
    sender = WebhookSender(denied_settings, app.state.engine, app.state.secrets)
    outcome = sender.deliver(uuid.UUID(sent.json()["id"]))

    assert outcome.state == "pending" and internal.requests == []
    log = deliveries(denied, hostile, created.json()["id"])[0]
    assert (log["attempts"], log["response_status"], log["latency_ms"], log["last_error"]) == (
        1, None, None, (f"the receiver's address is refused by the egress policy: the host resolves to an address "
                        f"{LOOPBACK}"))


def test_a_token_endpoint_and_bootstrap_whose_names_later_resolve_to_loopback_are_refused_at_the_test(
    denied: TestClient, hostile: Tenant, internal: InternalService, dns: Dns
) -> None:
    dns.answers.update({"idp.tenant.example": PUBLIC, "kafka.tenant.example": "192.0.2.11"})
    body = _oauth_body(f"http://idp.tenant.example:{internal.port}/oauth2/token")
    saved = denied.post("/connections", json=body, headers=hostile.editor)
    assert saved.status_code == 201, saved.text
    dns.answers["idp.tenant.example"] = "127.0.0.1"

    _refused(denied.post(f"/connections/{saved.json()['id']}/test", headers=hostile.editor),
             "credentials.token_endpoint_url",
             f"the token endpoint is refused by the egress policy: the host resolves to an address {LOOPBACK}")
    assert internal.requests == []

    plain = denied.post("/connections", json=plaintext_connection_body(f"kafka.tenant.example:{internal.port}"),
                        headers=hostile.editor)
    assert plain.status_code == 201, plain.text
    dns.answers["kafka.tenant.example"] = "127.0.0.1"
    _refused(denied.post(f"/connections/{plain.json()['id']}/test", headers=hostile.editor), "bootstrap_servers",
             f"bootstrap server 1: the host resolves to an address {LOOPBACK}")
    assert internal.requests == []


def test_a_registry_whose_name_later_resolves_to_loopback_gets_nothing(internal: InternalService, dns: Dns) -> None:
    dns.answers["registry.tenant.example"] = "127.0.0.1"
    config = RegistryConfig(url=f"http://registry.tenant.example:{internal.port}", egress=EgressPolicy())

    with RegistryClient(config, timeout_s=2) as registry, pytest.raises(RegistryUnavailable) as caught:
        registry.subjects()

    assert (caught.value.kind, caught.value.how, caught.value.message) == (
        "registry_unavailable", "denied", (f"schema registry http://registry.tenant.example:{internal.port} is refused "
                                           f"by the egress policy: the host resolves to an address {LOOPBACK}"))
    assert internal.requests == []


def test_a_cluster_advertising_a_broker_at_a_denied_address_is_refused_before_it_is_used() -> None:
    # A stand-in for a cluster's metadata (no broker here can advertise 169.254.169.254, and none
    # must be connected to): the handle answers list_topics as librdkafka's AdminClient does.
    broker = types.SimpleNamespace(id=3, host="169.254.169.254", port=9092)
    metadata = types.SimpleNamespace(brokers={3: broker}, topics={}, cluster_id="c", controller_id=3)
    client = KafkaClient(KafkaClientConfig(f"{PUBLIC}:9092"), egress=EgressPolicy(), timeout_s=2)
    client._admin = types.SimpleNamespace(list_topics=lambda timeout: metadata)  # type: ignore[assignment]

    with pytest.raises(KafkaEgressDenied) as caught:
        client.cluster_metadata()

    assert (caught.value.kind, caught.value.message) == (
        "broker_denied", ("the cluster advertises broker 3 at an address Inlet may not connect to: the host is "
                          "169.254.169.254, which is in a denied range (link-local, cloud metadata included)"))


# No upstream body ever reaches the tenant (loopback allowed: the suite's own policy).

@pytest.mark.parametrize(("status", "answer", "problem"), [
    (401, None, {"type": "https://inlet.dev/problems/oauth-invalid-client",
                 "title": "The token endpoint refused the client credentials", "status": 502,
                 "detail": "Connection test failed (invalid_client): the token endpoint refused the request: "
                           "invalid_client (401)", "kind": "invalid_client", "upstream_status": 401}),
    (403, {"detail": INTERNAL_SECRET}, {
        "type": "https://inlet.dev/problems/oauth-unauthorized", "title": "The token endpoint refused the client "
        "credentials", "status": 502, "detail": "Connection test failed (unauthorized): the token endpoint refused the "
        "client credentials (403)", "kind": "unauthorized", "upstream_status": 403}),
    (500, {"error": INTERNAL_SECRET}, {
        "type": "https://inlet.dev/problems/oauth-token-endpoint-error", "title": "The token endpoint answered with "
        "an error", "status": 502, "detail": "Connection test failed (token_endpoint_error): the token endpoint "
        "answered 500", "kind": "token_endpoint_error", "upstream_status": 500}),
    (302, {"location": INTERNAL_SECRET}, {
        "type": "https://inlet.dev/problems/oauth-token-endpoint-error", "title": "The token endpoint answered with "
        "an error", "status": 502, "detail": "Connection test failed (token_endpoint_error): the token endpoint "
        "answered 302 (redirects are not followed)", "kind": "token_endpoint_error", "upstream_status": 302}),
    (200, {"token": INTERNAL_SECRET}, {
        "type": "https://inlet.dev/problems/oauth-invalid-token", "title": "The token endpoint gave no usable token",
        "status": 502, "detail": "Connection test failed (invalid_token): the token endpoint answered 200 without an "
        "access token", "kind": "invalid_token", "upstream_status": 200}),
])
def test_a_token_endpoints_refusal_is_named_by_kind_and_status_never_by_its_body(
    client: TestClient, tenant: Tenant, internal: InternalService, status: int, answer: dict[str, Any] | None,
    problem: dict[str, Any],
) -> None:
    internal.status = status
    if answer is not None:
        internal.body = answer
    body = _oauth_body(f"{internal.url}/oauth2/token", bootstrap="127.0.0.1:1")
    saved = client.post("/connections", json=body, headers=tenant.editor)
    assert saved.status_code == 201, saved.text

    for path, sent in (("/connections:test", body), (f"/connections/{saved.json()['id']}/test", None)):
        tested = client.post(path, json=sent, headers=tenant.editor)
        assert tested.status_code == 502, tested.text
        assert tested.json() == {**problem, "instance": path}
        assert INTERNAL_SECRET not in tested.text
    # Inlet asked the endpoint itself, as librdkafka would have: client credentials, basic auth.
    assert [(r.method, r.path, r.headers["authorization"], r.body) for r in internal.requests] == [
        ("POST", "/oauth2/token", "Basic dGVuYW50LWNsaWVudDp0ZW5hbnQtc2VjcmV0", b"grant_type=client_credentials")] * 2


def test_a_registrys_error_is_named_by_status_never_by_its_body(
    client: TestClient, tenant: Tenant, internal: InternalService, sandbox_kafka: Any
) -> None:
    internal.status = 500
    body = plaintext_connection_body(sandbox_kafka.bootstrap_servers, schema_registry={"url": internal.url})

    tested = client.post("/connections:test", json=body, headers=tenant.editor)

    assert tested.status_code == 502, tested.text
    assert tested.json() == {
        "type": "https://inlet.dev/problems/schema-registry-error", "title": "The schema registry answered with an error",
        "status": 502, "instance": "/connections:test", "kind": "error",
        "detail": f"Schema registry test failed (error): schema registry {internal.url} answered 500, error code 40101 "
                  "on /subjects"}
    assert INTERNAL_SECRET not in tested.text
    assert [(r.method, r.path) for r in internal.requests] == [("GET", "/subjects")]


# The policy itself.

@pytest.mark.parametrize(("host", "message"), SPELLINGS)
def test_the_policy_refuses_every_spelling_at_definition_and_at_connection(host: str, message: str) -> None:
    policy = EgressPolicy()
    bare = host.strip("[]")
    with pytest.raises(EgressRefused) as defined:
        policy.check_host(bare)
    assert defined.value.message == message
    with pytest.raises(EgressRefused) as connecting:
        policy.resolve(bare, 80, timeout_s=2)
    assert connecting.value.message == message


def test_allow_wins_over_deny_for_every_spelling_of_an_address() -> None:
    policy = EgressPolicy.of(allow=["127.0.0.0/8"])

    assert [policy.resolve(host, 80, timeout_s=2) for host in ("127.0.0.1", "2130706433", "127.1", "::ffff:127.0.0.1")] \
        == [["127.0.0.1"], ["127.0.0.1"], ["127.0.0.1"], ["::ffff:7f00:1"]]
    policy.check_host("::ffff:127.0.0.1")
    with pytest.raises(EgressRefused) as spelled:
        policy.check_host("2130706433")
    assert spelled.value.message == "write the IPv4 address as a.b.c.d (127.0.0.1), not 2130706433"
    with pytest.raises(EgressRefused) as still_denied:
        policy.check_host("::1")
    assert still_denied.value.message == f"the host is ::1, which is {LOOPBACK}"


def test_an_operators_ranges_cover_ipv4_mapped_addresses_and_the_webhooks_deny_private_ones() -> None:
    operator = EgressPolicy.of(deny=["10.20.0.0/16"], allow=["10.20.30.0/24"])
    with pytest.raises(EgressRefused) as mapped:
        operator.check_host("::ffff:10.20.1.1")
    assert mapped.value.message == "the host is ::ffff:10.20.1.1, which is in a denied range (operator-denied)"
    operator.check_host("::ffff:10.20.30.1")
    operator.check_host("10.20.30.1")

    settings = Settings(egress_allow=[], webhook_egress_deny=["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"])
    settings.egress_policy.check_host("10.1.2.3")  # a private Kafka or registry: allowed by default
    with pytest.raises(EgressRefused) as webhook:
        settings.webhook_egress_policy.check_host("::ffff:192.168.1.1")
    assert webhook.value.message == "the host is ::ffff:192.168.1.1, which is in a denied range (private)"


def test_every_resolved_address_is_checked_and_an_unresolved_name_is_left_to_the_connection() -> None:
    policy = EgressPolicy()

    def two_answers(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (PUBLIC, port)),
                (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("169.254.169.254", port))]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(socket, "getaddrinfo", two_answers)
        with pytest.raises(EgressRefused) as both:
            policy.resolve("two.tenant.example", 443, timeout_s=2)
    assert both.value.message == ("the host resolves to an address in a denied range (link-local, cloud metadata "
                                  "included)")

    def unresolvable(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(socket, "getaddrinfo", unresolvable)
        policy.check_host("not-yet.tenant.example")  # accepted: checked at every connection
        with pytest.raises(OSError):
            policy.resolve("not-yet.tenant.example", 443, timeout_s=2)


def test_the_connection_goes_to_the_checked_address_with_one_lookup(internal: InternalService, dns: Dns) -> None:
    internal.status, internal.body = 200, {"ok": True}
    dns.answers["registry.tenant.example"] = "127.0.0.1"

    with http_client(LOOPBACK_ALLOWED, timeout=2) as client:
        answered = client.get(f"http://registry.tenant.example:{internal.port}/subjects")

    assert answered.status_code == 200
    assert dns.lookups == ["registry.tenant.example"], "one lookup: the connection went to the address checked"
    assert internal.requests[0].headers["host"] == f"registry.tenant.example:{internal.port}"


def test_tls_is_verified_against_the_urls_host_name_not_the_checked_address(tmp_path: Path, dns: Dns) -> None:
    ca = TestCA()
    issued = ca.issue("registry.tenant.example", dns="registry.tenant.example")
    (tmp_path / "cert.pem").write_text(issued.certificate)
    (tmp_path / "key.pem").write_text(issued.key)
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    served.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    service = InternalService(status=200, body={"ok": True}).start(served)
    dns.answers.update({"registry.tenant.example": "127.0.0.1", "other.tenant.example": "127.0.0.1"})
    trusted = ssl.create_default_context(cadata=ca.pem)
    try:
        with http_client(LOOPBACK_ALLOWED, verify=trusted, timeout=2) as client:
            assert client.get(f"https://registry.tenant.example:{service.port}/").status_code == 200
            with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
                client.get(f"https://other.tenant.example:{service.port}/")
    finally:
        service.close()
    assert [r.headers["host"] for r in service.requests] == [f"registry.tenant.example:{service.port}"]


def test_a_token_source_names_a_refused_endpoint_without_asking_it(internal: InternalService) -> None:
    source = TokenSource(client_id="c", client_secret="s", token_endpoint_url=f"{internal.url}/token",
                         egress=EgressPolicy())

    with pytest.raises(TokenRefused) as caught:
        source.token()

    assert (caught.value.kind, caught.value.message) == (
        "token_endpoint_refused", (f"the token endpoint is refused by the egress policy: the host is 127.0.0.1, which "
                                   f"is {LOOPBACK}"))
    assert internal.requests == []
