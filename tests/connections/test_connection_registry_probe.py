"""``POST /connections/{id}/test`` and ``POST /connections:test`` of a connection with a schema registry:
a real registry (Karapace on the real broker, tests/fixtures/schema_registry.py) with and without
basic auth, a URL that serves no registry, the real broker's TLS listener (a TLS server whose
certificate Inlet must trust), a closed port (refused) and a port that never answers (timeout).
The cluster is tested first, then the registry; neither's credentials ever come back."""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.core.config import Settings
from tests.factories import Tenant, plaintext_connection_body
from tests.fixtures.kafka import SandboxKafka
from tests.fixtures.kafka_broker import RealKafka
from tests.fixtures.schema_registry import AUTH_PASSWORD, AUTH_USER, RealRegistry

TIMEOUT_S = 2.0
WRONG_PASSWORD = "not-the-registry-Pa55word-9d1f"
TOKEN = "sr-bearer-T0ken-for-tests-3b9d"


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """A short lookup bound keeps the failure cases quick."""
    return settings.model_copy(update={"kafka_timeout_s": TIMEOUT_S})


@pytest.fixture
def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts TCP connections (the kernel's backlog) and never answers a request."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield int(sock.getsockname()[1])


def _both_tests(client: TestClient, tenant: Any, body: dict[str, Any]) -> list[tuple[Any, str]]:
    """The unsaved spec's test and the saved connection's, with the ``instance`` each answers for."""
    unsaved = client.post("/connections:test", json=body, headers=tenant.editor)
    saved = client.post("/connections", json=body, headers=tenant.editor)
    assert saved.status_code == 201, saved.text
    path = f"/connections/{saved.json()['id']}/test"
    return [(unsaved, "/connections:test"), (client.post(path, headers=tenant.editor), path)]


def _registry_problem(response: Any, *, status: int, kind: str, title: str, instance: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body = response.json()
    assert body["detail"] == f"Schema registry test failed ({kind}): {title[0].lower()}{title[1:]}"
    return {"type": f"https://inlet.dev/problems/schema-registry-{kind}", "title": title, "status": status,
            "detail": body["detail"], "instance": instance, "kind": kind}


def test_the_test_asks_a_real_registry_for_its_subjects(client: TestClient, tenant: Tenant, real_kafka: RealKafka,
                                                   real_registry: RealRegistry) -> None:
    body = plaintext_connection_body(real_kafka.bootstrap_servers, schema_registry={"url": real_registry.url})
    for response, _ in _both_tests(client, tenant, body):
        assert response.status_code == 200, response.text
        result = response.json()
        # That it answered as a registry does, and nothing of what it answered: no count, no latency.
        assert result["brokers"] and result["schema_registry"] == {"url": real_registry.url}


def test_basic_auth_is_sent_and_a_refusal_is_a_502_that_echoes_nothing(
        client: TestClient, tenant: Tenant, real_kafka: RealKafka, real_registry_with_auth: RealRegistry, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    registry = real_registry_with_auth
    good = {"url": registry.url, "credentials": {"username": AUTH_USER, "password": AUTH_PASSWORD}}
    for response, _ in _both_tests(client, tenant, plaintext_connection_body(real_kafka.bootstrap_servers,
                                                                             schema_registry=good)):
        assert response.status_code == 200, response.text
        assert response.json()["schema_registry"] == {"url": registry.url}

    refusals = [{**good, "credentials": {"username": AUTH_USER, "password": WRONG_PASSWORD}},
                {**good, "credentials": {"token": TOKEN}},
                {"url": registry.url}]
    for refused in refusals:
        body = plaintext_connection_body(real_kafka.bootstrap_servers, schema_registry=refused)
        for response, instance in _both_tests(client, tenant, body):
            problem = _registry_problem(response, status=502, kind="auth", instance=instance,
                                        title="The schema registry refused the credentials")
            assert response.json() == problem
            for secret in (WRONG_PASSWORD, TOKEN, AUTH_PASSWORD):
                assert secret not in response.text
    for secret in (WRONG_PASSWORD, TOKEN, AUTH_PASSWORD):
        assert secret not in caplog.text


def test_a_url_that_serves_no_registry_is_a_502_error(client: TestClient, tenant: Tenant, real_kafka: RealKafka,
                                                      real_registry: RealRegistry) -> None:
    body = plaintext_connection_body(real_kafka.bootstrap_servers,
                                     schema_registry={"url": f"{real_registry.url}/no-registry-here"})
    for response, instance in _both_tests(client, tenant, body):
        problem = _registry_problem(response, status=502, kind="error", instance=instance,
                                    title="The schema registry answered with an error")
        assert response.json() == problem


def test_tls_trust_and_host_names_are_checked(client: TestClient, tenant: Tenant, real_kafka: RealKafka) -> None:
    """The broker's TLS listener is a TLS server whose certificate names 127.0.0.1 only: a handshake
    Inlet refuses unless told to trust its CA (and, through localhost, not to check the host name).
    Past the handshake the broker, no registry, hangs up: unreachable, but no longer a TLS failure."""
    port = real_kafka.ports["SSL"]
    ca = real_kafka.ca.pem

    def test(url: str, **tls: Any) -> dict[str, Any]:
        body = plaintext_connection_body(real_kafka.bootstrap_servers, schema_registry={"url": url, **tls})
        response = client.post("/connections:test", json=body, headers=tenant.editor)
        assert response.status_code == 502, response.text
        return response.json()  # type: ignore[no-any-return]

    untrusted = test(f"https://127.0.0.1:{port}")
    assert (untrusted["type"], untrusted["title"]) == ("https://inlet.dev/problems/schema-registry-unreachable",
                                                       "The TLS handshake with the schema registry failed")
    assert untrusted["reason"] == "untrusted_certificate"
    assert untrusted["detail"] == ("Schema registry test failed (unreachable): the TLS handshake with the schema "
                                   "registry failed: its certificate is not trusted")
    trusted = test(f"https://127.0.0.1:{port}", ca_pem=ca)
    assert (trusted["type"], trusted["title"]) == ("https://inlet.dev/problems/schema-registry-unreachable",
                                                   "The schema registry cannot be reached")
    mismatch = test(f"https://localhost:{port}", ca_pem=ca)
    assert mismatch["title"] == "The TLS handshake with the schema registry failed"
    assert mismatch["reason"] == "hostname_mismatch" and mismatch["detail"].endswith("does not match its host name")
    unchecked = test(f"https://localhost:{port}", ca_pem=ca, endpoint_identification="none")
    assert unchecked["title"] == "The schema registry cannot be reached"


def test_a_closed_port_is_unreachable_and_a_silent_one_a_504(client: TestClient, tenant: Tenant, sandbox_kafka: SandboxKafka,
                                                             closed_port: int, silent_port: int) -> None:
    refused = plaintext_connection_body(sandbox_kafka.bootstrap_servers, schema_registry={
        "url": f"http://127.0.0.1:{closed_port}", "credentials": {"token": TOKEN}})
    for response, instance in _both_tests(client, tenant, refused):
        problem = _registry_problem(response, status=502, kind="unreachable", instance=instance,
                                    title="The schema registry cannot be reached")
        assert response.json() == problem
        assert TOKEN not in response.text

    silent = plaintext_connection_body(sandbox_kafka.bootstrap_servers,
                                       schema_registry={"url": f"http://127.0.0.1:{silent_port}"})
    for response, instance in _both_tests(client, tenant, silent):
        problem = _registry_problem(response, status=504, kind="timeout", instance=instance,
                                    title="The schema registry did not answer in time")
        assert response.json() == problem


def test_the_cluster_is_tested_first(client: TestClient, tenant: Tenant, closed_port: int, silent_port: int) -> None:
    body = plaintext_connection_body(f"127.0.0.1:{closed_port}",
                                     schema_registry={"url": f"http://127.0.0.1:{silent_port}"})
    for response, _ in _both_tests(client, tenant, body):
        assert response.status_code == 502, response.text
        assert response.json()["type"] == "https://inlet.dev/problems/kafka-refused"


def test_a_ca_that_is_no_pem_is_a_422(client: TestClient, tenant: Tenant, sandbox_kafka: SandboxKafka) -> None:
    body = plaintext_connection_body(sandbox_kafka.bootstrap_servers, schema_registry={
        "url": "https://127.0.0.1:1", "ca_pem": "-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n"})
    response = client.post("/connections:test", json=body, headers=tenant.editor)
    assert response.status_code == 422, response.text
    assert response.json()["errors"] == [{"field": "schema_registry.ca_pem", "type": "value_error",
                                          "message": "ca_pem is not a PEM CA certificate bundle"}]
