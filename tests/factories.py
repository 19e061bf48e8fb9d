"""Test data builders: tenants with a key per role, and valid connection and pipeline bodies."""

from __future__ import annotations

import itertools
import uuid
from dataclasses import dataclass
from typing import Any

from fastapi.testclient import TestClient

from api.pipelines.schemas import KafkaSource
from spark_jobs.egress import EgressPolicy

ADMIN_TOKEN = "operator-token-for-tests-0123456789abcdef"
PASSWORD = "s3cr3t-Pa55word-for-tests-9f1c"
# The egress policy of clients a test builds itself: the default one, with loopback opened (as
# tests/conftest.py opens it for every Settings).
LOOPBACK_ALLOWED = EgressPolicy.of(allow=("127.0.0.0/8", "::1/128"))
_counter = itertools.count(1)


def operator() -> dict[str, str]:
    return {"Authorization": f"Bearer {ADMIN_TOKEN}"}


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@dataclass
class Tenant:
    id: str
    name: str
    keys: dict[str, str]

    def as_(self, role: str) -> dict[str, str]:
        return bearer(self.keys[role])

    @property
    def admin(self) -> dict[str, str]:
        return self.as_("admin")

    @property
    def editor(self) -> dict[str, str]:
        return self.as_("editor")

    @property
    def viewer(self) -> dict[str, str]:
        return self.as_("viewer")


def make_tenant(client: TestClient, name: str | None = None) -> Tenant:
    name = name or f"tenant-{next(_counter)}-{uuid.uuid4().hex[:6]}"
    created = client.post("/tenants", json={"name": name}, headers=operator())
    assert created.status_code == 201, created.text
    tenant_id = created.json()["id"]
    keys = {}
    for role in ("admin", "editor", "viewer"):
        issued = client.post(f"/tenants/{tenant_id}/api-keys", json={"name": f"{role}-key", "role": role},
                             headers=operator())
        assert issued.status_code == 201, issued.text
        keys[role] = issued.json()["key"]
    return Tenant(id=tenant_id, name=name, keys=keys)


def connection_body(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": f"conn-{next(_counter)}",
        "bootstrap_servers": "broker-1.example.com:9092,broker-2.example.com:9092",
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "credentials": {"username": "ingest", "password": PASSWORD},
        "options": {"client.id": "inlet-tests"},
    }
    body.update(overrides)
    return body


def plaintext_connection_body(bootstrap_servers: str, **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"name": f"conn-{next(_counter)}", "bootstrap_servers": bootstrap_servers,
                            "security_protocol": "PLAINTEXT"}
    body.update(overrides)
    return body


def pipeline_body(connection_id: str, **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": f"pipe-{next(_counter)}",
        "source": {"connection_id": connection_id, "topics": ["orders"], "starting_offsets": "earliest",
                   "max_offsets_per_run": 10000, "value_format": "json", "schema": "id BIGINT, amount DOUBLE",
                   "include_headers": False, "on_data_loss": "fail"},
        "target": {"type": "delta", "path": "bronze/orders", "partition_by": []},
        "schedule": {"cron": "*/5 * * * *", "timezone": "Europe/Paris"},
        "state": "active",
    }
    body.update(overrides)
    return body


def kafka_source(**fields: Any) -> KafkaSource:
    """A pipeline's source as the code past the API reads it (``api.pipelines.definition``), of any connection."""
    return KafkaSource.model_validate({"connection_id": uuid.uuid4(), **fields})


def create_connection(client: TestClient, tenant: Tenant, **overrides: Any) -> dict[str, Any]:
    response = client.post("/connections", json=connection_body(**overrides), headers=tenant.editor)
    assert response.status_code == 201, response.text
    return response.json()


def create_pipeline(client: TestClient, tenant: Tenant, connection_id: str | None = None, **overrides: Any) -> dict[str, Any]:
    connection_id = connection_id or create_connection(client, tenant)["id"]
    response = client.post("/pipelines", json=pipeline_body(connection_id, **overrides), headers=tenant.editor)
    assert response.status_code == 201, response.text
    return response.json()


def create_sandbox_pipeline(
    client: TestClient, tenant: Tenant, bootstrap_servers: str, topics: list[str], **overrides: Any
) -> dict[str, Any]:
    """A paused, unscheduled pipeline reading ``topics`` of the sandbox Kafka into a Delta table."""
    conn = client.post("/connections", json=plaintext_connection_body(bootstrap_servers), headers=tenant.editor)
    assert conn.status_code == 201, conn.text
    source = {"connection_id": conn.json()["id"], "topics": topics, "value_format": "string"}
    source.update(overrides.pop("source", {}))
    fields: dict[str, Any] = {"source": source, "target": {"type": "delta", "path": f"bronze/p{next(_counter)}"},
                              "schedule": None, "state": "paused"}
    fields.update(overrides)
    return create_pipeline(client, tenant, conn.json()["id"], **fields)

# --- Contract checks shared by every domain's tests -------------------------------------------------


ROLES = ("viewer", "editor", "admin")
PROBLEM_JSON = "application/problem+json"


def assert_problem(response: Any, status: int, *, fields: set[str] | None = None) -> dict[str, Any]:
    """``response`` is an RFC 9457 problem of ``status``; for 422, ``fields`` are among its errors."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM_JSON
    body = response.json()
    assert body["status"] == status
    assert body["type"].startswith("https://inlet.dev/problems/")
    assert isinstance(body["title"], str) and body["title"]
    assert isinstance(body["detail"], str) and body["detail"]
    assert body["instance"] == response.request.url.path
    if status == 422:
        assert body["errors"], body
        for error in body["errors"]:
            assert set(error) == {"field", "message", "type"}, error
        if fields is not None:
            got = {e["field"] for e in body["errors"]}
            assert fields <= got, f"expected errors on {fields}, got {got}"
    return body


def assert_auth_refused(
    client: TestClient, method: str, path: str, tenant: Tenant, min_role: str, json: Any = None
) -> None:
    """401 without a key or with an unknown one; 403 for the operator token and each role below ``min_role``."""
    send = {"json": json} if json is not None else {}
    no_key = client.request(method, path, **send)
    assert_problem(no_key, 401)
    assert no_key.headers["www-authenticate"].startswith("Bearer")
    assert_problem(client.request(method, path, headers=bearer("inlet_" + "x" * 43), **send), 401)
    assert_problem(client.request(method, path, headers={"Authorization": "Basic abc"}, **send), 401)
    assert_problem(client.request(method, path, headers=operator(), **send), 403)
    for role in ROLES[: ROLES.index(min_role)]:
        assert_problem(client.request(method, path, headers=tenant.as_(role), **send), 403)
