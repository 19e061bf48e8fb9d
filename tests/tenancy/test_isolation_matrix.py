"""Tenant isolation, generated from ``app.routes``: tenant B's admin key sent to every route with every
path parameter filled with tenant A's real ids (and A's ids in the query and body where a route takes
them) gets the route's documented refusal — 404 for A's objects, 403 on operator routes — or B's own
data, and never learns anything of A it did not send: no id or name of A appears in a body unless B
put it in the request. A is unchanged afterwards.

A new route cannot slip past: the test fails for a route missing from ``EXPECTED`` (or ``PORTAL``),
and for a path parameter ``fill`` does not know.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from fastapi.routing import APIRoute, iter_route_contexts
from fastapi.testclient import TestClient

from api.core.config import Settings
from api.core.db import unit_of_work, utcnow
from api.usage import service as usage
from tests.factories import PASSWORD, Tenant, make_tenant
from tests.portal.helpers import sign_in

NOT_FOUND, FORBIDDEN = {404}, {403}
OWN = {200}
# (method, path) -> (statuses B may get, body B sends, query B sends). "{x}" in a body or query is A's id.
EXPECTED: dict[tuple[str, str], tuple[set[int], Any, dict[str, str] | None]] = {
    ("GET", "/healthz"): (OWN, None, None),
    ("GET", "/readyz"): ({200, 503}, None, None),  # 503: the suite's Redis URL is deliberately dead
    ("GET", "/metrics"): (FORBIDDEN, None, None),
    ("POST", "/tenants"): (FORBIDDEN, {"name": "b-made-tenant"}, None),
    ("GET", "/tenants"): (FORBIDDEN, None, None),
    ("GET", "/tenants/{tenant_id}"): (FORBIDDEN, None, None),
    ("POST", "/tenants/{tenant_id}/api-keys"): (FORBIDDEN, {"name": "b-key", "role": "admin"}, None),
    ("GET", "/tenants/{tenant_id}/quotas"): (FORBIDDEN, None, None),
    ("PUT", "/tenants/{tenant_id}/quotas"): (FORBIDDEN, {"pipelines": 0, "concurrent_runs": 1}, None),
    ("GET", "/quotas"): (OWN, None, None),
    ("GET", "/usage"): (NOT_FOUND, None, {"pipeline_id": "{pipeline_id}"}),
    ("GET", "/usage/tenants"): (FORBIDDEN, None, None),
    ("GET", "/tenants/{tenant_id}/usage"): (FORBIDDEN, None, None),
    ("GET", "/me"): (OWN, None, None),
    ("POST", "/api-keys"): ({201}, {"name": "b-own-key", "role": "viewer"}, None),
    ("GET", "/api-keys"): (OWN, None, None),
    ("GET", "/api-keys/{key_id}"): (NOT_FOUND, None, None),
    ("DELETE", "/api-keys/{key_id}"): (NOT_FOUND, None, None),
    ("POST", "/connections"): ({201}, {"name": "b-own-conn", "bootstrap_servers": "b.example.com:9092",
                                       "security_protocol": "PLAINTEXT"}, None),
    ("GET", "/connections"): (OWN, None, {"name": "{connection_name}"}),
    # Nothing of A is involved; the closed port makes the test answer at once (a result or a 502).
    ("POST", "/connections:test"): ({200, 502}, {"name": "probe", "bootstrap_servers": "127.0.0.1:1",
                                                 "security_protocol": "PLAINTEXT"}, None),
    ("GET", "/connections/{connection_id}"): (NOT_FOUND, None, None),
    ("PUT", "/connections/{connection_id}"): (NOT_FOUND, {"name": "b-took-it", "bootstrap_servers": "b.example.com:9092",
                                                          "security_protocol": "PLAINTEXT"}, None),
    ("PATCH", "/connections/{connection_id}"): (NOT_FOUND, {"name": "b-took-it"}, None),
    ("DELETE", "/connections/{connection_id}"): (NOT_FOUND, None, None),
    ("POST", "/connections/{connection_id}/test"): (NOT_FOUND, None, None),
    # A pipeline of B on A's connection: refused as if the connection did not exist.
    ("POST", "/pipelines"): ({404, 422}, "pipeline_body", None),
    ("GET", "/pipelines"): (OWN, None, {"connection_id": "{connection_id}"}),
    ("GET", "/pipelines/{pipeline_id}"): (NOT_FOUND, None, None),
    ("PUT", "/pipelines/{pipeline_id}"): (NOT_FOUND, "pipeline_body", None),
    ("PATCH", "/pipelines/{pipeline_id}"): (NOT_FOUND, {"name": "b-took-it"}, None),
    ("DELETE", "/pipelines/{pipeline_id}"): (NOT_FOUND, None, None),
    ("POST", "/pipelines/{pipeline_id}/pause"): (NOT_FOUND, None, None),
    ("POST", "/pipelines/{pipeline_id}/resume"): (NOT_FOUND, None, None),
    ("POST", "/pipelines/{pipeline_id}/runs"): (NOT_FOUND, None, None),
    ("GET", "/pipelines/{pipeline_id}/runs"): (NOT_FOUND, None, None),
    ("POST", "/pipelines/{pipeline_id}/quarantine/reprocess"): (NOT_FOUND, {"dry_run": True}, None),
    ("GET", "/runs/{run_id}"): (NOT_FOUND, None, None),
    ("GET", "/runs/{run_id}/log"): (NOT_FOUND, None, None),
    ("POST", "/runs/{run_id}/cancel"): (NOT_FOUND, None, None),
    ("GET", "/audit-events"): (OWN, None, {"resource_id": "{pipeline_id}"}),
    ("GET", "/pipelines/{pipeline_id}/offsets"): (NOT_FOUND, None, None),
    ("PATCH", "/pipelines/{pipeline_id}/offsets"): (NOT_FOUND, {"reset": "earliest"}, None),
    ("DELETE", "/pipelines/{pipeline_id}/offsets"): (NOT_FOUND, None, None),
    ("GET", "/pipelines/{pipeline_id}/offsets/history"): (NOT_FOUND, None, None),
    ("GET", "/pipelines/{pipeline_id}/offsets/lookup"): (NOT_FOUND, None, {"topic": "{topic}", "partition": "0",
                                                                           "offset": "0"}),
    ("GET", "/pipelines/{pipeline_id}/lag-alert"): (NOT_FOUND, None, None),
    ("PUT", "/pipelines/{pipeline_id}/lag-alert"): (NOT_FOUND, {"lag_records": 1}, None),
    ("DELETE", "/pipelines/{pipeline_id}/lag-alert"): (NOT_FOUND, None, None),
    ("GET", "/pipelines/{pipeline_id}/maintenance"): (NOT_FOUND, None, None),
    ("POST", "/pipelines/{pipeline_id}/maintenance"): (NOT_FOUND, {"dry_run": True}, None),
    ("POST", "/webhooks"): ({201}, {"url": "https://b.example.com/hook"}, None),
    ("GET", "/webhooks"): (OWN, None, None),
    ("GET", "/webhooks/{webhook_id}"): (NOT_FOUND, None, None),
    ("PATCH", "/webhooks/{webhook_id}"): (NOT_FOUND, {"enabled": False}, None),
    ("DELETE", "/webhooks/{webhook_id}"): (NOT_FOUND, None, None),
    ("POST", "/webhooks/{webhook_id}/rotate-secret"): (NOT_FOUND, None, None),
    ("POST", "/webhooks/{webhook_id}/test"): (NOT_FOUND, None, None),
    ("GET", "/webhooks/{webhook_id}/deliveries"): (NOT_FOUND, None, None),
}

# The portal (server-rendered, signed in by a session cookie): B's session on A's objects is a 404 page;
# its other pages show B's own data. POSTs carry B's CSRF token so the refusal is about the tenant.
PORTAL: dict[tuple[str, str], set[int]] = {
    ("GET", "/portal"): {303},
    ("GET", "/portal/login"): OWN,
    ("POST", "/portal/login"): {403},  # no login cookie: the CSRF check refuses before any key is looked at
    ("POST", "/portal/logout"): {303},
    ("GET", "/portal/pipelines"): OWN,
    ("GET", "/portal/pipelines/new"): OWN,
    ("POST", "/portal/pipelines/new"): {422},  # A's connection is not B's: the form shows the field error
    ("GET", "/portal/pipelines/{pipeline_id}"): NOT_FOUND,
    ("POST", "/portal/pipelines/{pipeline_id}/pause"): NOT_FOUND,
    ("POST", "/portal/pipelines/{pipeline_id}/resume"): NOT_FOUND,
    ("POST", "/portal/pipelines/{pipeline_id}/run"): NOT_FOUND,
    ("GET", "/portal/pipelines/{pipeline_id}/replay"): NOT_FOUND,
    ("POST", "/portal/pipelines/{pipeline_id}/replay"): NOT_FOUND,
    ("GET", "/portal/pipelines/{pipeline_id}/quarantine"): NOT_FOUND,
    ("POST", "/portal/pipelines/{pipeline_id}/quarantine"): NOT_FOUND,
    ("GET", "/portal/pipelines/{pipeline_id}/edit"): NOT_FOUND,
    ("POST", "/portal/pipelines/{pipeline_id}/edit"): NOT_FOUND,
    ("GET", "/portal/pipelines/{pipeline_id}/delete"): NOT_FOUND,
    ("POST", "/portal/pipelines/{pipeline_id}/delete"): NOT_FOUND,
    ("GET", "/portal/pipelines/{pipeline_id}/offsets"): NOT_FOUND,
    ("GET", "/portal/connections"): OWN,
    ("POST", "/portal/connections"): {200, 303},
    ("POST", "/portal/connections/{connection_id}/test"): NOT_FOUND,
    ("GET", "/portal/connections/{connection_id}"): NOT_FOUND,
    ("GET", "/portal/connections/{connection_id}/edit"): NOT_FOUND,
    ("POST", "/portal/connections/{connection_id}/edit"): NOT_FOUND,
    ("POST", "/portal/connections/{connection_id}/rotate"): NOT_FOUND,
    ("GET", "/portal/connections/{connection_id}/delete"): NOT_FOUND,
    ("POST", "/portal/connections/{connection_id}/delete"): NOT_FOUND,
    ("GET", "/portal/api-keys"): OWN,
    ("POST", "/portal/api-keys"): {303},  # B's own key, shown once on B's keys page
    ("POST", "/portal/api-keys/{key_id}/revoke"): NOT_FOUND,
    ("GET", "/portal/runs/{run_id}"): NOT_FOUND,
    ("GET", "/portal/webhooks"): OWN,
    ("GET", "/portal/quotas"): OWN,
    ("GET", "/portal/usage"): OWN,

    ("GET", "/portal/static/{name}"): OWN,
}

_PARAM = re.compile(r"{([^}:]+)}")


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """The suite's settings with a short Kafka timeout: connection tests hit a closed port."""
    return settings.model_copy(update={"kafka_timeout_s": 0.5})


def _seed_a(client: TestClient) -> tuple[Tenant, dict[str, str]]:
    """Tenant A with a connection, a pipeline (with a lag alert and usage), a queued run, an extra key and a
    webhook, all uniquely named."""
    tag = uuid.uuid4().hex[:8]
    a = make_tenant(client, name=f"tenant-a-{tag}")
    conn = client.post("/connections", headers=a.admin, json={
        "name": f"a-conn-{tag}", "bootstrap_servers": f"a-broker-{tag}.example.com:9092", "security_protocol":
        "SASL_SSL", "sasl_mechanism": "PLAIN", "credentials": {"username": f"a-user-{tag}", "password": PASSWORD}})
    assert conn.status_code == 201, conn.text
    pipeline = client.post("/pipelines", headers=a.admin, json={
        "name": f"a-pipe-{tag}", "source": {"connection_id": conn.json()["id"], "topics": [f"a-topic-{tag}"]},
        "target": {"type": "delta", "path": f"a-path-{tag}"}, "schedule": None, "state": "paused"})
    assert pipeline.status_code == 201, pipeline.text
    run = client.post(f"/pipelines/{pipeline.json()['id']}/runs", headers=a.admin)
    assert run.status_code == 202, run.text
    key = client.post("/api-keys", headers=a.admin, json={"name": f"a-key-{tag}", "role": "viewer"})
    assert key.status_code == 201, key.text
    alert = client.put(f"/pipelines/{pipeline.json()['id']}/lag-alert", headers=a.admin, json={"lag_records": 777})
    assert alert.status_code == 200, alert.text
    with unit_of_work(client.app.state.engine) as session:  # type: ignore[attr-defined]
        usage.meter(session, tenant_id=uuid.UUID(a.id), pipeline_id=uuid.UUID(pipeline.json()["id"]),
                    pipeline_name=f"a-pipe-{tag}", outcome="succeeded", figures=usage.Figures(records_read=7),
                    wall_s=1.0, at=utcnow())
    webhook = client.post("/webhooks", headers=a.admin, json={"url": f"https://a-hook-{tag}.example.com/in",
                                                                "description": f"a-hook-{tag}"})
    assert webhook.status_code == 201, webhook.text
    ids = {"tenant_id": a.id, "connection_id": conn.json()["id"], "pipeline_id": pipeline.json()["id"],
           "run_id": run.json()["id"], "key_id": key.json()["id"], "name": "portal.css",
           "connection_name": f"a-conn-{tag}", "topic": f"a-topic-{tag}", "webhook_id": webhook.json()["id"],
           "webhook_secret": webhook.json()["secret"]}
    return a, ids


def _secrets_of_a(client: TestClient, a: Tenant, ids: dict[str, str]) -> set[str]:
    """Every id and name of A's that B must never see unless it sent it."""
    tag = ids["connection_name"].removeprefix("a-conn-")
    keys = client.get("/api-keys", headers=a.admin).json()["items"]
    return ({a.id, a.name, ids["connection_id"], ids["pipeline_id"], ids["run_id"], f"a-conn-{tag}",
             f"a-pipe-{tag}", f"a-topic-{tag}", f"a-path-{tag}", f"a-broker-{tag}", f"a-user-{tag}", f"a-key-{tag}",
             f"a-hook-{tag}", ids["webhook_id"], ids["webhook_secret"], PASSWORD}
            | {k["id"] for k in keys} | {k["prefix"] for k in keys} | set(a.keys.values()))


def fill(path: str, ids: dict[str, str]) -> str:
    names = _PARAM.findall(path)
    unknown = [n for n in names if n not in ids]
    assert not unknown, f"{path}: the matrix does not know how to fill {unknown}; add A's id for it"
    return _PARAM.sub(lambda m: ids[m.group(1)], path)


def _subst(value: Any, ids: dict[str, str]) -> Any:
    if isinstance(value, str):
        return re.sub(r"{(\w+)}", lambda m: ids[m.group(1)], value)
    if isinstance(value, dict):
        return {k: _subst(v, ids) for k, v in value.items()}
    return value


def _routes(app: Any, *, portal: bool) -> set[tuple[str, str]]:
    """Every (method, path) the app serves: FastAPI includes routers lazily, so walk the route contexts."""
    out = set()
    for route in iter_route_contexts(app.routes):
        if isinstance(route.original_route, APIRoute) and route.path.startswith("/portal") == portal:
            out |= {(method, route.path) for method in route.methods or () if method != "HEAD"}
    return out


def _leaks(text: str, secrets: set[str], sent: str) -> set[str]:
    return {s for s in secrets if s and s in text and s not in sent}


def _snapshot(client: TestClient, a: Tenant, ids: dict[str, str]) -> dict[str, Any]:
    reads = {"connection": f"/connections/{ids['connection_id']}", "pipeline": f"/pipelines/{ids['pipeline_id']}",
             "run": f"/runs/{ids['run_id']}", "key": f"/api-keys/{ids['key_id']}", "keys": "/api-keys",
             "connections": "/connections", "pipelines": "/pipelines", "webhook": f"/webhooks/{ids['webhook_id']}",
             "webhooks": "/webhooks", "deliveries": f"/webhooks/{ids['webhook_id']}/deliveries",
             "lag_alert": f"/pipelines/{ids['pipeline_id']}/lag-alert", "quotas": "/quotas",
             "maintenance": f"/pipelines/{ids['pipeline_id']}/maintenance",
             "usage": "/usage"}

    out = {}
    for name, path in reads.items():
        response = client.get(path, headers=a.admin)
        assert response.status_code == 200, (path, response.text)
        out[name] = response.json()
    return out


def test_every_api_route_refuses_another_tenants_objects(app: Any, client: TestClient) -> None:
    a, ids = _seed_a(client)
    b = make_tenant(client, name=f"tenant-b-{uuid.uuid4().hex[:8]}")
    secrets = _secrets_of_a(client, a, ids)
    before = _snapshot(client, a, ids)

    routes = _routes(app, portal=False)
    assert routes - set(EXPECTED) == set(), f"routes missing from the isolation matrix: {sorted(routes - set(EXPECTED))}"
    assert set(EXPECTED) - routes == set(), f"matrix rows for routes that no longer exist: {sorted(set(EXPECTED) - routes)}"

    wrong: list[str] = []
    for (method, template), (statuses, body, query) in sorted(EXPECTED.items()):
        if body == "pipeline_body":
            body = {"name": "b-pipe", "source": {"connection_id": ids["connection_id"], "topics": ["b-topic"]},
                    "target": {"type": "delta", "path": "b-path"}, "schedule": None, "state": "paused"}
        path, params = fill(template, ids), _subst(query, ids)
        response = client.request(method, path, headers=b.admin, params=params, json=body)
        sent = f"{response.request.url} {body}"
        if response.status_code not in statuses:
            wrong.append(f"{method} {template}: {response.status_code} (expected {sorted(statuses)}): {response.text[:200]}")
        # /readyz's 503 is its readiness report (tests/health), the one error body that is not a problem.
        if response.status_code >= 400 and template != "/readyz" \
                and response.headers.get("content-type") != "application/problem+json":
            wrong.append(f"{method} {template}: error {response.status_code} is not problem+json")
        if leaked := _leaks(response.text + str(dict(response.headers)), secrets, sent):
            wrong.append(f"{method} {template}: B's response shows A's {sorted(leaked)}")
    assert not wrong, "\n".join(wrong)
    assert _snapshot(client, a, ids) == before, "B's requests changed tenant A's objects"


def test_every_portal_route_refuses_another_tenants_objects(app: Any, client: TestClient) -> None:
    a, ids = _seed_a(client)
    b = make_tenant(client, name=f"tenant-b-{uuid.uuid4().hex[:8]}")
    secrets = _secrets_of_a(client, a, ids)
    before = _snapshot(client, a, ids)

    routes = _routes(app, portal=True)
    assert routes - set(PORTAL) == set(), f"portal routes missing from the isolation matrix: {sorted(routes - set(PORTAL))}"
    assert set(PORTAL) - routes == set(), f"matrix rows for portal routes that no longer exist: {sorted(set(PORTAL) - routes)}"

    wrong: list[str] = []
    # Logout ends the session: the other routes go first, and login (which needs a fresh login page) last.
    order = sorted(PORTAL, key=lambda r: (r[1] in ("/portal/logout", "/portal/login") and r[0] == "POST", r))
    for method, template in order:
        csrf = sign_in(client, b.admin["Authorization"].removeprefix("Bearer "))
        path = fill(template, ids)
        if method == "GET":
            response = client.get(path, follow_redirects=False)
        else:
            form = {"csrf_token": csrf, "name": "b-form-conn", "bootstrap_servers": "127.0.0.1:1",
                    "security_protocol": "PLAINTEXT", "connection_id": ids["connection_id"], "topics": "b-topic",
                    "target_path": "b-path", "reset": "earliest", "role": "viewer", "confirm_name": "b-form-conn"}
            if template == "/portal/login":
                client.cookies.clear()
                form = {"csrf_token": "x", "api_key": b.admin["Authorization"].removeprefix("Bearer ")}
            response = client.post(path, data=form, follow_redirects=False)
        sent = f"{response.request.url} {ids['connection_id'] if method == 'POST' else ''}"
        if response.status_code not in PORTAL[(method, template)]:
            wrong.append(f"{method} {template}: {response.status_code} (expected {sorted(PORTAL[(method, template)])})")
        if leaked := _leaks(response.text + str(dict(response.headers)), secrets, sent):
            wrong.append(f"{method} {template}: B's page shows A's {sorted(leaked)}")
    assert not wrong, "\n".join(wrong)
    assert _snapshot(client, a, ids) == before, "B's portal requests changed tenant A's objects"


def test_fill_refuses_a_parameter_it_does_not_know() -> None:
    try:
        fill("/pipelines/{pipeline_id}/widgets/{widget_id}", {"pipeline_id": "p"})
    except AssertionError as exc:
        assert "widget_id" in str(exc)
    else:
        raise AssertionError("fill() must refuse an unknown path parameter")
