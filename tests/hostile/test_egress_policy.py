"""The egress policy itself, below the API (spark_jobs/egress.py): every spelling of a denied address
refused when written and when connected to, an operator's allow and deny ranges, every resolved address
checked, the connection made to the checked address with one lookup and TLS verified against the URL's
name, and a token source that names a refused endpoint without asking it. Through the API:
test_egress.py.
"""

from __future__ import annotations

import socket
import ssl
from pathlib import Path
from typing import Any

import httpx
import pytest

from api.core.config import Settings
from spark_jobs.egress import EgressPolicy, EgressRefused, http_client
from spark_jobs.oauth import TokenRefused, TokenSource
from tests.factories import LOOPBACK_ALLOWED
from tests.fixtures.egress import LOOPBACK, PUBLIC, SPELLINGS, Dns, InternalService
from tests.fixtures.kafka_broker import TestCA


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


def _registry_over_tls(tmp_path: Path) -> tuple[TestCA, InternalService]:
    """A service on loopback whose certificate, for registry.tenant.example, a test CA signed."""
    ca = TestCA()
    issued = ca.issue("registry.tenant.example", dns="registry.tenant.example")
    (tmp_path / "cert.pem").write_text(issued.certificate)
    (tmp_path / "key.pem").write_text(issued.key)
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    served.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    return ca, InternalService(status=200, body={"ok": True}).start(served)


def test_tls_is_verified_against_the_urls_host_name_not_the_checked_address(tmp_path: Path, dns: Dns) -> None:
    ca, service = _registry_over_tls(tmp_path)
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


def test_every_default_client_shares_one_tls_context_and_each_still_verifies(tmp_path: Path, dns: Dns) -> None:
    """Loading certifi's CAs cost 29 ms, twice per client, before a run's first registry request: a
    process loads them once. The shared context still refuses a certificate they do not sign, for each
    client, and one client's own context (a tenant's CA) is its alone."""
    ca, service = _registry_over_tls(tmp_path)
    dns.answers["registry.tenant.example"] = "127.0.0.1"
    url = f"https://registry.tenant.example:{service.port}/"
    try:
        first, second = http_client(LOOPBACK_ALLOWED, timeout=2), http_client(LOOPBACK_ALLOWED, timeout=2)
        trusting = http_client(LOOPBACK_ALLOWED, verify=ssl.create_default_context(cadata=ca.pem), timeout=2)
        with first, second, trusting:
            contexts = [c._transport._pool._ssl_context for c in (first, second, trusting)]  # type: ignore[attr-defined]
            assert contexts[0] is contexts[1] and contexts[2] is not contexts[0]
            assert trusting.get(url).status_code == 200
            for client in (first, second):
                with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
                    client.get(url)
    finally:
        service.close()


def test_a_token_source_names_a_refused_endpoint_without_asking_it(internal: InternalService) -> None:
    source = TokenSource(client_id="c", client_secret="s", token_endpoint_url=f"{internal.url}/token",
                         egress=EgressPolicy())

    with pytest.raises(TokenRefused) as caught:
        source.token()

    assert (caught.value.kind, caught.value.message) == (
        "token_endpoint_refused", (f"the token endpoint is refused by the egress policy: the host is 127.0.0.1, which "
                                   f"is {LOOPBACK}"))
    assert internal.requests == []
