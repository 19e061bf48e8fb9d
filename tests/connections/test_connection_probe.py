"""``POST /connections/{id}/test`` and ``POST /connections:test`` against the sandbox Kafka over TCP,
a closed port (refused), an unknown host (dns) and a port that never answers (timeout).

Not covered here: an authentication failure from a real SASL handshake (the sandbox serves no
SASL); the mapping of the client's ``auth`` kind is pinned by a unit test below instead.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from api.connections.probe import ConnectionTestFailed
from api.core.config import Settings
from api.kafka import KafkaAuthError, KafkaClient, KafkaClientConfig
from tests.factories import LOOPBACK_ALLOWED, PASSWORD, connection_body, create_connection, plaintext_connection_body

TIMEOUT_S = 2.0


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """A short Kafka lookup bound keeps the failure cases quick."""
    return settings.model_copy(update={"kafka_timeout_s": TIMEOUT_S})


@pytest.fixture
def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts TCP connections (the kernel's backlog) and never answers a request."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield sock.getsockname()[1]


def _expected_success(bootstrap_servers: str, body: dict[str, Any]) -> dict[str, Any]:
    with KafkaClient(KafkaClientConfig(bootstrap_servers), egress=LOOPBACK_ALLOWED, timeout_s=5) as kafka:
        topics = len(kafka.list_topics())
    brokers = [{"id": i + 1, "host": "127.0.0.1", "port": int(hp.rsplit(":", 1)[1])}
               for i, hp in enumerate(bootstrap_servers.split(","))]
    return {"ok": True, "cluster_id": body["cluster_id"], "brokers": brokers, "topics_visible": topics,
            "schema_registry": None}


def _failure(body: dict[str, Any], *, status: int, kind: str, title: str, instance: str) -> dict[str, Any]:
    assert body["detail"].startswith(f"Connection test failed ({kind}): ")
    return {"type": f"https://inlet.dev/problems/kafka-{kind}", "title": title, "status": status,
            "detail": body["detail"], "instance": instance, "kind": kind}


def test_saved_connection_reaches_the_sandbox(client, tenant, sandbox_kafka, kafka_topic) -> None:
    kafka_topic(partitions=3)
    conn = client.post("/connections", json=plaintext_connection_body(sandbox_kafka.bootstrap_servers), headers=tenant.editor).json()
    response = client.post(f"/connections/{conn['id']}/test", headers=tenant.editor)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body == _expected_success(sandbox_kafka.bootstrap_servers, body)
    assert body["topics_visible"] >= 1


def test_unsaved_spec_reaches_the_sandbox_and_stores_nothing(client, tenant, sandbox_kafka) -> None:
    response = client.post("/connections:test", json=plaintext_connection_body(sandbox_kafka.bootstrap_servers),
                           headers=tenant.editor)
    assert response.status_code == 200, response.text
    assert response.json() == _expected_success(sandbox_kafka.bootstrap_servers, response.json())
    assert client.get("/connections", headers=tenant.viewer).json()["total"] == 0


def test_closed_port_is_refused_without_echoing_credentials(client, tenant, closed_port, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    body = connection_body(bootstrap_servers=f"127.0.0.1:{closed_port}", security_protocol="SASL_PLAINTEXT",
                           sasl_mechanism="PLAIN")
    unsaved = client.post("/connections:test", json=body, headers=tenant.editor)
    saved = create_connection(client, tenant, **body | {"name": "refusing"})
    stored = client.post(f"/connections/{saved['id']}/test", headers=tenant.editor)

    for response, instance in ((unsaved, "/connections:test"), (stored, f"/connections/{saved['id']}/test")):
        assert response.status_code == 502, response.text
        assert response.headers["content-type"] == "application/problem+json"
        problem = response.json()
        assert problem == _failure(problem, status=502, kind="refused", title="The brokers refused the connection",
                                   instance=instance)
        assert "Connection refused" in problem["detail"] and f"127.0.0.1:{closed_port}" in problem["detail"]
        assert PASSWORD not in response.text
    assert PASSWORD not in caplog.text


def test_unknown_host_is_a_dns_failure(client, tenant) -> None:
    response = client.post("/connections:test", json=plaintext_connection_body("no-such-broker.invalid:9092"),
                           headers=tenant.editor)
    assert response.status_code == 502, response.text
    problem = response.json()
    assert problem == _failure(problem, status=502, kind="dns", title="The broker host name does not resolve",
                               instance="/connections:test")
    assert "no-such-broker.invalid" in problem["detail"]


def test_silent_broker_is_a_504_timeout(client, tenant, silent_port) -> None:
    response = client.post("/connections:test", json=plaintext_connection_body(f"127.0.0.1:{silent_port}"),
                           headers=tenant.editor)
    assert response.status_code == 504, response.text
    problem = response.json()
    assert problem == _failure(problem, status=504, kind="timeout", title="The cluster did not answer in time",
                               instance="/connections:test")
    assert f"within {TIMEOUT_S:g}s" in problem["detail"]


def test_auth_failures_are_a_502_of_kind_auth() -> None:
    error = ConnectionTestFailed(KafkaAuthError("metadata request: SASL authentication error: Authentication failed"))
    assert (error.status, error.code, error.title, error.extra) == (
        502, "kafka-auth", "The cluster refused the credentials", {"kind": "auth"})
    assert error.detail == "Connection test failed (auth): metadata request: SASL authentication error: Authentication failed"


def test_roles_auth_404_and_422(client, tenant, other_tenant, closed_port) -> None:
    conn = create_connection(client, tenant)
    spec = plaintext_connection_body(f"127.0.0.1:{closed_port}")
    for url, kwargs in ((f"/connections/{conn['id']}/test", {}), ("/connections:test", {"json": spec})):
        assert client.post(url, **kwargs).status_code == 401
        forbidden = client.post(url, headers=tenant.viewer, **kwargs)
        assert forbidden.status_code == 403 and forbidden.json()["type"] == "https://inlet.dev/problems/forbidden"
    missing = client.post(f"/connections/{conn['id']}/test", headers=other_tenant.editor)
    assert missing.status_code == 404
    assert missing.json()["detail"] == f"Connection {conn['id']} does not exist"
    assert client.post("/connections/not-a-uuid/test", headers=tenant.editor).status_code == 422

    invalid = client.post("/connections:test", json=spec | {"bootstrap_servers": "no-port"}, headers=tenant.editor)
    assert invalid.status_code == 422
    assert [e["field"] for e in invalid.json()["errors"]] == ["bootstrap_servers"]
    no_creds = connection_body(bootstrap_servers=f"127.0.0.1:{closed_port}")
    no_creds.pop("credentials")
    incomplete = client.post("/connections:test", json=no_creds, headers=tenant.editor)
    assert incomplete.status_code == 422
    assert incomplete.json()["errors"] == [{"field": "credentials", "message": "sasl_mechanism SCRAM-SHA-512 needs credentials",
                                            "type": "value_error"}]
