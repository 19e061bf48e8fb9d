"""No tenant can make Inlet reach the platform's network (issue 29, the egress rows).

An "internal" HTTP server on loopback stands for the platform's private services (a metadata
endpoint, an admin API): with loopback denied, as it is by default, it must receive nothing, whether
a tenant names it as an OAuth token endpoint, a schema registry or a webhook; every spelling of a
denied address is refused when it is written, with a 422 naming the field and the rule; a name
allowed when written that later resolves to a denied address is refused at the connection; and no
answer body of an upstream ever reaches the tenant. Metadata and private addresses are only ever
refused by their spelling, never connected to. ``dns`` stands in for a tenant's name server (Inlet
cannot be shown against a real one here): it answers for the names a test gives it, every other name
resolves as usual (both in tests/fixtures/egress.py). The policy's own rules, below the API:
test_egress_policy.py.
"""

from __future__ import annotations

import ipaddress
import types
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from api.core.config import Settings
from api.kafka import KafkaClient, KafkaClientConfig
from api.kafka.errors import KafkaEgressDenied
from api.main import create_app
from spark_jobs.egress import EgressPolicy
from spark_jobs.registry import RegistryClient, RegistryConfig, RegistryUnavailable
from tests.factories import PROBLEM_JSON, Tenant, make_tenant, plaintext_connection_body
from tests.fixtures.database import truncate_all
from tests.fixtures.dispatch import RecordingDispatcher
from tests.fixtures.egress import INTERNAL_SECRET, LOOPBACK, PUBLIC, SPELLINGS, Dns, InternalService
from tests.webhooks.helpers import deliveries
from worker.webhooks import WebhookSender


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


@pytest.mark.parametrize("setting", ["allow", "deny"])
def test_the_operator_decides_whether_connections_may_reach_the_private_ranges(
    denied_settings: Settings, setting: str
) -> None:
    """INLET_EGRESS_PRIVATE_RANGES: allowed by default (Kafka on a private network needs nothing);
    denied, every address of a connection in them is refused when written, and the runs' policy
    denies them too; INLET_EGRESS_ALLOW still opens one range. Webhooks are denied them either way."""
    settings = denied_settings.model_copy(update={"egress_private_ranges": setting, "egress_allow": ["10.1.0.0/16"]})
    app = create_app(settings, dispatcher=RecordingDispatcher())
    try:
        with TestClient(app, raise_server_exceptions=False) as client:
            tenant = make_tenant(client)
            private = [plaintext_connection_body("10.0.0.5:9092"),
                       plaintext_connection_body(f"{PUBLIC}:9092", schema_registry={"url": "http://192.168.1.9:8081"}),
                       _oauth_body("http://[fd12:3456::1]/oauth2/token")]
            opened = plaintext_connection_body("10.1.2.3:9092")
            answers = [client.post("/connections", json=body, headers=tenant.editor) for body in private]
            if setting == "allow":
                assert [a.status_code for a in answers] == [201, 201, 201], [a.text for a in answers]
            else:
                _refused(answers[0], "bootstrap_servers", "entry 1: the host is 10.0.0.5, which is in a denied range (private)")
                _refused(answers[1], "schema_registry.url", "the host is 192.168.1.9, which is in a denied range (private)")
                _refused(answers[2], "credentials.token_endpoint_url",
                         "the host is fd12:3456::1, which is in a denied range (private)")
            assert client.post("/connections", json=opened, headers=tenant.editor).status_code == 201
            _refused(client.post("/webhooks", json={"url": "https://10.0.0.5/hook"}, headers=tenant.editor), "url",
                     "the host is 10.0.0.5, which is in a denied range (private)")
    finally:
        truncate_all(app.state.engine)
        app.state.engine.dispose()
    assert ("10.0.0.0/8" in settings.tenant_egress_deny) == (setting == "deny")
    assert settings.egress_policy.denied_kind(ipaddress.ip_address("10.1.2.3")) is None  # allow wins over deny


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
                 "detail": "Connection test failed (invalid_client): the token endpoint refused the client "
                           "credentials", "kind": "invalid_client"}),
    (403, {"detail": INTERNAL_SECRET}, {
        "type": "https://inlet.dev/problems/oauth-unauthorized", "title": "The token endpoint refused the client "
        "credentials", "status": 502, "detail": "Connection test failed (unauthorized): the token endpoint refused the "
        "client credentials", "kind": "unauthorized"}),
    (500, {"error": INTERNAL_SECRET}, {
        "type": "https://inlet.dev/problems/oauth-token-endpoint-error", "title": "The token endpoint answered with "
        "an error", "status": 502, "detail": "Connection test failed (token_endpoint_error): the token endpoint "
        "answered with an error", "kind": "token_endpoint_error"}),
    (302, {"location": INTERNAL_SECRET}, {
        "type": "https://inlet.dev/problems/oauth-token-endpoint-error", "title": "The token endpoint answered with "
        "an error", "status": 502, "detail": "Connection test failed (token_endpoint_error): the token endpoint "
        "answered with an error", "kind": "token_endpoint_error"}),
    (200, {"token": INTERNAL_SECRET}, {
        "type": "https://inlet.dev/problems/oauth-invalid-token", "title": "The token endpoint gave no usable token",
        "status": 502, "detail": "Connection test failed (invalid_token): the token endpoint gave no usable "
        "token", "kind": "invalid_token"}),
])
def test_a_token_endpoints_refusal_is_named_by_its_kind_never_by_its_status_or_body(
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


def test_a_registrys_error_is_named_by_its_kind_never_by_its_status_or_body(
    client: TestClient, tenant: Tenant, internal: InternalService, sandbox_kafka: Any
) -> None:
    internal.status = 500
    body = plaintext_connection_body(sandbox_kafka.bootstrap_servers, schema_registry={"url": internal.url})

    tested = client.post("/connections:test", json=body, headers=tenant.editor)

    assert tested.status_code == 502, tested.text
    assert tested.json() == {
        "type": "https://inlet.dev/problems/schema-registry-error", "title": "The schema registry answered with an error",
        "status": 502, "instance": "/connections:test", "kind": "error",
        "detail": "Schema registry test failed (error): the schema registry answered with an error"}
    assert INTERNAL_SECRET not in tested.text and "500" not in tested.text
    assert [(r.method, r.path) for r in internal.requests] == [("GET", "/subjects")]
