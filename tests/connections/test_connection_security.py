"""The connection test through the API against a real Kafka broker, for every security protocol and
SASL mechanism Inlet offers, and the failures a user meets there: a wrong password or unknown user,
an untrusted certificate, a host-name mismatch, a missing client certificate. The password is in
no response and no log."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from tests.fixtures.kafka_broker import PASSWORD, USER, TestCA


def _body(real_kafka, listener: str, protocol: str, *, mechanism: str | None = None, host: str = "127.0.0.1",
          username: str = USER, password: str = PASSWORD, ssl: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"name": "secured", "bootstrap_servers": real_kafka.bootstrap(listener, host=host),
                            "security_protocol": protocol}
    if mechanism:
        body |= {"sasl_mechanism": mechanism, "credentials": {"username": username, "password": password}}
    if ssl is not None:
        body["ssl"] = ssl
    return body


@pytest.mark.parametrize("listener,protocol,mechanism", [
    ("PLAINTEXT", "PLAINTEXT", None),
    ("SASL_PLAINTEXT", "SASL_PLAINTEXT", "PLAIN"),
    ("SASL_PLAINTEXT", "SASL_PLAINTEXT", "SCRAM-SHA-256"),
    ("SASL_PLAINTEXT", "SASL_PLAINTEXT", "SCRAM-SHA-512"),
    ("SSL", "SSL", None),
    ("SASL_SSL", "SASL_SSL", "PLAIN"),
    ("SASL_SSL", "SASL_SSL", "SCRAM-SHA-256"),
    ("SASL_SSL", "SASL_SSL", "SCRAM-SHA-512"),
])
def test_a_saved_connection_passes_its_test_on_every_protocol(client, tenant, real_kafka, listener, protocol, mechanism) -> None:
    ssl = {"ca_pem": real_kafka.ca.pem} if protocol.endswith("SSL") else None
    created = client.post("/connections", json=_body(real_kafka, listener, protocol, mechanism=mechanism, ssl=ssl),
                          headers=tenant.editor)
    assert created.status_code == 201, created.text
    tested = client.post(f"/connections/{created.json()['id']}/test", headers=tenant.editor)
    assert tested.status_code == 200, tested.text
    body = tested.json()
    assert (body["ok"], body["brokers"]) == (True, [{"id": 1, "host": "127.0.0.1", "port": real_kafka.ports[listener]}])
    assert body["cluster_id"] and PASSWORD not in tested.text


def test_mutual_tls_with_a_client_certificate(client, tenant, real_kafka) -> None:
    issued = real_kafka.ca.issue("inlet-client")
    ssl = {"ca_pem": real_kafka.ca.pem, "certificate_pem": issued.certificate, "key_pem": issued.key}
    with_cert = client.post("/connections:test", json=_body(real_kafka, "MTLS", "SSL", ssl=ssl), headers=tenant.editor)
    assert with_cert.status_code == 200, with_cert.text

    without = client.post("/connections:test", json=_body(real_kafka, "MTLS", "SSL", ssl={"ca_pem": real_kafka.ca.pem}),
                          headers=tenant.editor)
    assert without.status_code == 502
    assert (without.json()["kind"], without.json()["reason"], without.json()["title"]) == (
        "tls", "client_certificate_required", "The broker requires a client certificate")
    assert issued.key not in with_cert.text + without.text

    foreign = TestCA("Some other CA").issue("inlet-client")  # a certificate the broker does not trust
    refused = client.post("/connections:test", headers=tenant.editor, json=_body(real_kafka, "MTLS", "SSL", ssl={
        "ca_pem": real_kafka.ca.pem, "certificate_pem": foreign.certificate, "key_pem": foreign.key}))
    assert refused.status_code == 502
    assert (refused.json()["reason"], refused.json()["title"]) == (
        "client_certificate_refused", "The broker refused the client certificate")


@pytest.mark.parametrize("username,password", [(USER, "not-the-password"), ("nobody", PASSWORD)])
def test_wrong_credentials_are_an_auth_failure(client, tenant, real_kafka, caplog, username, password) -> None:
    """A wrong password and an unknown user look alike on purpose: Kafka does not tell which users exist."""
    caplog.set_level(logging.DEBUG)
    response = client.post("/connections:test", headers=tenant.editor, json=_body(
        real_kafka, "SASL_SSL", "SASL_SSL", mechanism="SCRAM-SHA-512", username=username, password=password,
        ssl={"ca_pem": real_kafka.ca.pem}))
    assert response.status_code == 502
    problem = response.json()
    assert (problem["kind"], problem["title"], problem["type"]) == (
        "auth", "The cluster refused the credentials", "https://inlet.dev/problems/kafka-auth")
    assert "Authentication failed" in problem["detail"] and "SCRAM-SHA-512" in problem["detail"]
    assert password not in response.text and password not in caplog.text


def test_an_untrusted_certificate_says_so(client, tenant, real_kafka) -> None:
    stranger = TestCA("Some other CA")
    response = client.post("/connections:test", headers=tenant.editor,
                           json=_body(real_kafka, "SSL", "SSL", ssl={"ca_pem": stranger.pem}))
    assert response.status_code == 502
    problem = response.json()
    assert (problem["kind"], problem["reason"], problem["title"]) == (
        "tls", "untrusted_certificate", "The broker's certificate is not trusted")
    assert problem["detail"].startswith("Connection test failed (tls): the broker's certificate is not signed by a trusted CA")


def test_a_host_name_mismatch_says_so(client, tenant, real_kafka) -> None:
    """The broker's certificate names 127.0.0.1 only; connecting through localhost does not match it."""
    response = client.post("/connections:test", headers=tenant.editor,
                           json=_body(real_kafka, "SSL", "SSL", host="localhost", ssl={"ca_pem": real_kafka.ca.pem}))
    assert response.status_code == 502
    problem = response.json()
    assert (problem["kind"], problem["reason"], problem["title"]) == (
        "tls", "hostname_mismatch", "The broker's certificate does not match its host name")
    assert problem["detail"] == (
        "Connection test failed (tls): the broker's certificate is not valid for the host name localhost "
        "(connect by a name it lists, or set ssl.endpoint_identification to none)")
    relaxed = client.post("/connections:test", headers=tenant.editor, json=_body(
        real_kafka, "SSL", "SSL", host="localhost", ssl={"ca_pem": real_kafka.ca.pem, "endpoint_identification": "none"}))
    assert relaxed.status_code == 200, relaxed.text
