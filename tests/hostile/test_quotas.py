"""Quotas (issue 29: "many pipelines, connections, API keys: no limit anywhere but 50 webhooks per
tenant"): each limit refuses the one over it with a whole ``quota-exceeded`` problem; the operator's
override raises or lowers one tenant's limit and no other's; a tenant can read its quotas, never set
them; the count is taken under the tenant's row lock, so concurrent creates never overshoot."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session, select

from api.core.config import Settings
from api.core.db import unit_of_work, utcnow
from api.core.security import Role, TenantContext
from api.runs import execution
from api.runs.models import Run
from api.tenancy import service as tenancy
from api.tenancy.quotas import QuotaExceeded, QuotaLimits
from tests.factories import Tenant, assert_problem, connection_body, operator, pipeline_body
from tests.portal.helpers import sign_in

# Small defaults, so that every limit is reached in a few requests.
DEFAULTS = {"pipelines": 2, "connections": 3, "api_keys": 5, "webhooks": 2, "runs_per_hour": 2, "concurrent_runs": 3,
            "continuous_pipelines": 1}
WHAT = {"pipelines": ("pipelines", "delete one"), "connections": ("connections", "delete one"),
        "api_keys": ("unrevoked API keys", "revoke one"), "webhooks": ("webhooks", "delete one"),
        "runs_per_hour": ("runs started in an hour", "try again later"),
        "continuous_pipelines": ("active continuous pipelines", "pause one or give it a schedule")}
PATHS = {"pipelines": "/pipelines", "connections": "/connections", "api_keys": "/api-keys", "webhooks": "/webhooks"}


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.model_copy(update={f"quota_{name}": limit for name, limit in DEFAULTS.items()})


def _connection(client: TestClient, tenant: Tenant) -> str:
    created = client.post("/connections", json=connection_body(), headers=tenant.editor)
    assert created.status_code == 201, created.text
    return str(created.json()["id"])


def _maker(client: TestClient, tenant: Tenant, quota: str) -> Callable[[], Any]:
    """One more of ``quota``'s objects, as the API creates it; returns the response."""
    if quota == "pipelines":
        connection_id = _connection(client, tenant)
        return lambda: client.post("/pipelines", headers=tenant.editor, json=pipeline_body(
            connection_id, schedule=None, state="paused"))
    if quota == "connections":
        return lambda: client.post("/connections", json=connection_body(), headers=tenant.editor)
    if quota == "api_keys":
        return lambda: client.post("/api-keys", json={"name": f"k-{uuid.uuid4().hex[:6]}", "role": "viewer"},
                                   headers=tenant.admin)
    return lambda: client.post("/webhooks", json={"url": f"https://h{uuid.uuid4().hex[:6]}.example.com/"},
                               headers=tenant.editor)


def _problem(quota: str, limit: int, used: int, path: str, status: int = 409) -> dict[str, Any]:
    what, free = WHAT[quota]
    return {"type": "https://inlet.dev/problems/quota-exceeded", "title": "Quota exceeded", "status": status,
            "detail": f"The tenant's quota of {limit} {what} is reached ({used} used): {free}, "
                      "or ask the operator to raise it",
            "instance": path, "quota": quota, "limit": limit, "used": used}


def _fill(make: Callable[[], Any], times: int) -> None:
    for _ in range(times):
        made = make()
        assert made.status_code == 201, made.text


def _used(client: TestClient, tenant: Tenant, quota: str) -> int:
    return int(client.get("/quotas", headers=tenant.viewer).json()[quota]["used"])


def _set(client: TestClient, tenant_id: str, **overrides: int | None) -> dict[str, Any]:
    done = client.put(f"/tenants/{tenant_id}/quotas", json=overrides, headers=operator())
    assert done.status_code == 200, done.text
    return dict(done.json())


@pytest.mark.parametrize("quota", list(PATHS))
def test_each_limit_refuses_the_one_over_it_with_a_whole_problem(client: TestClient, tenant: Tenant,
                                                                 quota: str) -> None:
    make = _maker(client, tenant, quota)
    _fill(make, DEFAULTS[quota] - _used(client, tenant, quota))

    refused = make()

    assert_problem(refused, 409)
    assert refused.json() == _problem(quota, DEFAULTS[quota], DEFAULTS[quota], PATHS[quota])
    assert _used(client, tenant, quota) == DEFAULTS[quota], "nothing was created"


@pytest.mark.parametrize("quota", list(PATHS))
def test_the_operators_override_raises_and_lowers_one_tenants_limit(client: TestClient, tenant: Tenant,
                                                                     other_tenant: Tenant, quota: str) -> None:
    make = _maker(client, tenant, quota)
    limit = DEFAULTS[quota]
    _fill(make, limit - _used(client, tenant, quota))
    assert make().status_code == 409

    raised = _set(client, tenant.id, **{quota: limit + 1})
    assert raised[quota] == {"limit": limit + 1, "used": limit, "default": limit, "override": limit + 1}
    _fill(make, 1)
    assert make().json() == _problem(quota, limit + 1, limit + 1, PATHS[quota])

    lowered = _set(client, tenant.id, **{quota: 1})
    assert lowered[quota] == {"limit": 1, "used": limit + 1, "default": limit, "override": 1}
    assert make().json() == _problem(quota, 1, limit + 1, PATHS[quota])
    assert _used(client, tenant, quota) == limit + 1, "a lowered limit deletes nothing"

    back = _set(client, tenant.id)  # every quota omitted: the defaults again
    assert back[quota] == {"limit": limit, "used": limit + 1, "default": limit, "override": None}
    other = client.get("/quotas", headers=other_tenant.viewer).json()
    assert all(other[name]["override"] is None and other[name]["limit"] == DEFAULTS[name] for name in DEFAULTS)


def test_another_tenants_quotas_are_untouched(client: TestClient, tenant: Tenant, other_tenant: Tenant) -> None:
    _set(client, tenant.id, pipelines=0, connections=0, webhooks=0, api_keys=0, runs_per_hour=0, concurrent_runs=1)

    assert client.post("/connections", json=connection_body(), headers=tenant.editor).status_code == 409
    _fill(_maker(client, other_tenant, "connections"), DEFAULTS["connections"])
    _fill(_maker(client, other_tenant, "webhooks"), DEFAULTS["webhooks"])
    other = client.get(f"/tenants/{other_tenant.id}/quotas", headers=operator()).json()
    assert {name: (q["limit"], q["override"]) for name, q in other.items() if name != "tenant_id"} == {
        name: (limit, None) for name, limit in DEFAULTS.items()}


def test_a_tenant_reads_its_quotas_and_cannot_set_them(client: TestClient, tenant: Tenant) -> None:
    _connection(client, tenant)
    body = client.get("/quotas", headers=tenant.viewer)
    assert body.status_code == 200, body.text
    assert body.json() == {"tenant_id": tenant.id, **{name: {
        "limit": limit, "default": limit, "override": None,
        "used": {"connections": 1, "api_keys": 3}.get(name, 0),
    } for name, limit in DEFAULTS.items()}}
    assert client.get(f"/tenants/{tenant.id}/quotas", headers=operator()).json() == body.json()

    for method, path in (("PUT", f"/tenants/{tenant.id}/quotas"), ("GET", f"/tenants/{tenant.id}/quotas")):
        assert_problem(client.request(method, path, json={"pipelines": 10_000}, headers=tenant.admin), 403)
    assert_problem(client.put("/quotas", json={"pipelines": 10_000}, headers=tenant.admin), 405)
    assert_problem(client.get("/quotas", headers=operator()), 403)  # the operator is no tenant
    assert_problem(client.get("/quotas"), 401)
    assert client.get("/quotas", headers=tenant.viewer).json() == body.json(), "nothing changed"


def test_the_operators_routes_refuse_bad_values_and_unknown_tenants(client: TestClient, tenant: Tenant) -> None:
    path = f"/tenants/{tenant.id}/quotas"
    assert_problem(client.put(path, json={"pipelines": -1}, headers=operator()), 422, fields={"pipelines"})
    assert_problem(client.put(path, json={"concurrent_runs": 0}, headers=operator()), 422, fields={"concurrent_runs"})
    assert_problem(client.put(path, json={"widgets": 3}, headers=operator()), 422, fields={"widgets"})
    assert_problem(client.put(path, json={"pipelines": 10**7}, headers=operator()), 422, fields={"pipelines"})
    missing = uuid.uuid4()
    assert_problem(client.get(f"/tenants/{missing}/quotas", headers=operator()), 404)
    assert_problem(client.put(f"/tenants/{missing}/quotas", json={}, headers=operator()), 404)


def test_an_operators_change_is_audited_and_visible_to_the_tenant(client: TestClient, tenant: Tenant) -> None:
    _set(client, tenant.id, pipelines=7)
    _set(client, tenant.id, pipelines=7)  # no change: no event
    _set(client, tenant.id, pipelines=7, webhooks=1)

    events = client.get("/audit-events", params={"resource_type": "quotas", "sort": "created_at"},
                        headers=tenant.viewer).json()["items"]
    nothing = dict.fromkeys(DEFAULTS)
    seen = [(e["actor"], e["actor_key_id"], e["resource_id"], e["action"], e["before"], e["after"]) for e in events]
    assert seen == [
        ("operator", None, tenant.id, "update", nothing, {**nothing, "pipelines": 7}),
        ("operator", None, tenant.id, "update", {**nothing, "pipelines": 7},
         {**nothing, "pipelines": 7, "webhooks": 1}),
    ]


def test_a_trigger_over_the_hourly_runs_is_a_429_with_retry_after(client: TestClient, tenant: Tenant) -> None:
    connection_id = _connection(client, tenant)
    pipelines = [client.post("/pipelines", headers=tenant.editor, json=pipeline_body(
        connection_id, schedule=None, state="paused")).json()["id"] for _ in range(2)]
    _set(client, tenant.id, pipelines=3)
    third = client.post("/pipelines", headers=tenant.editor, json=pipeline_body(
        connection_id, schedule=None, state="paused")).json()["id"]
    for pipeline_id in pipelines:
        assert client.post(f"/pipelines/{pipeline_id}/runs", headers=tenant.editor).status_code == 202

    refused = client.post(f"/pipelines/{third}/runs", headers=tenant.editor)

    assert_problem(refused, 429)
    assert refused.json() == _problem("runs_per_hour", 2, 2, f"/pipelines/{third}/runs", status=429)
    assert 3590 <= int(refused.headers["Retry-After"]) <= 3600
    assert client.get(f"/pipelines/{third}/runs", headers=tenant.viewer).json()["total"] == 0
    assert client.get("/quotas", headers=tenant.viewer).json()["runs_per_hour"]["used"] == 2
    _set(client, tenant.id, pipelines=3, runs_per_hour=3)
    assert client.post(f"/pipelines/{third}/runs", headers=tenant.editor).status_code == 202


def test_a_schedule_slot_over_the_hourly_runs_is_skipped_with_its_reason_logged(
    client: TestClient, tenant: Tenant, caplog: pytest.LogCaptureFixture,
) -> None:
    connection_id = _connection(client, tenant)
    ids = [client.post("/pipelines", headers=tenant.editor, json=pipeline_body(
        connection_id, schedule=None, state="paused" if i < 2 else "active")).json()["id"] for i in range(2)]
    _set(client, tenant.id, runs_per_hour=1)
    assert client.post(f"/pipelines/{ids[0]}/runs", headers=tenant.editor).status_code == 202
    assert client.post(f"/pipelines/{ids[1]}/resume", headers=tenant.editor).status_code == 200
    app: Any = client.app
    services = execution.Services(settings=app.state.settings, secrets=app.state.secrets)
    slot = utcnow().replace(microsecond=0)

    with caplog.at_level(logging.INFO, logger="api.runs.execution"), unit_of_work(app.state.engine) as session:
        fired = execution.fire_schedule(session=session, pipeline_id=uuid.UUID(ids[1]), slot=slot, services=services)

    assert fired == execution.Outcome("over-quota")
    assert [r.getMessage() for r in caplog.records if r.name == "api.runs.execution"] == [

        (f"schedule of pipeline {ids[1]}: slot {slot.isoformat()} skipped: The tenant's quota of 1 runs started in an "
         "hour is reached (1 used): try again later, or ask the operator to raise it")]
    with Session(app.state.engine) as session:
        assert session.exec(select(Run).where(Run.pipeline_id == uuid.UUID(ids[1]))).all() == []


def test_active_continuous_pipelines_are_counted_where_they_start_looping(client: TestClient, tenant: Tenant) -> None:
    """Creating, resuming or making continuous a pipeline over the limit is refused whole; one that
    already loops may still be edited, and a paused or scheduled one is not counted."""
    _set(client, tenant.id, pipelines=10, continuous_pipelines=2)
    connection_id = _connection(client, tenant)

    def create(schedule: dict[str, Any], state: str) -> Any:
        return client.post("/pipelines", headers=tenant.editor, json=pipeline_body(
            connection_id, schedule=schedule, state=state))

    looping = [create({"continuous": True}, "active").json() for _ in range(2)]
    waiting = create({"continuous": True}, "paused")
    scheduled = create({"interval_seconds": 60}, "active")
    assert (waiting.status_code, scheduled.status_code) == (201, 201)
    assert _used(client, tenant, "continuous_pipelines") == 2

    refused = create({"continuous": True}, "active")
    assert refused.json() == _problem("continuous_pipelines", 2, 2, "/pipelines")
    resumed = client.post(f"/pipelines/{waiting.json()['id']}/resume", headers=tenant.editor)
    assert resumed.json() == _problem("continuous_pipelines", 2, 2, f"/pipelines/{waiting.json()['id']}/resume")
    path = f"/pipelines/{scheduled.json()['id']}"
    made_continuous = client.patch(path, headers=tenant.editor,
                                   json={"schedule": {"interval_seconds": None, "continuous": True}})
    assert made_continuous.json() == _problem("continuous_pipelines", 2, 2, path)
    # nothing of a refused change is left
    assert client.get(path, headers=tenant.viewer).json()["schedule"] == {"interval_seconds": 60}
    assert client.get(f"/pipelines/{waiting.json()['id']}", headers=tenant.viewer).json()["state"] == "paused"
    assert len(client.get("/pipelines", headers=tenant.viewer).json()["items"]) == 4

    _set(client, tenant.id, pipelines=10, continuous_pipelines=1)  # lowered under what loops: nothing stops
    edited = client.patch(f"/pipelines/{looping[0]['id']}", headers=tenant.editor,
                          json={"schedule": {"idle_wait_ms": 1000}})
    assert edited.status_code == 200, edited.text
    assert _used(client, tenant, "continuous_pipelines") == 2

    _set(client, tenant.id, pipelines=10, continuous_pipelines=2)
    paused = client.post(f"/pipelines/{looping[1]['id']}/pause", headers=tenant.editor)
    assert paused.status_code == 200, paused.text
    resumed = client.post(f"/pipelines/{waiting.json()['id']}/resume", headers=tenant.editor)
    assert resumed.status_code == 200, resumed.text
    assert _used(client, tenant, "continuous_pipelines") == 2


def test_concurrent_creates_never_overshoot_a_limit(client: TestClient, tenant: Tenant) -> None:
    """Eight admins issue keys at once with one slot left: exactly one gets it (the count is taken under
    the tenant's row lock; on PostgreSQL ``make test`` runs this against real concurrency)."""
    engine = client.app.state.engine  # type: ignore[attr-defined]
    ctx = TenantContext(tenant_id=uuid.UUID(tenant.id), key_id=None, role=Role.admin, actor="tests")
    limits = QuotaLimits(**{**DEFAULTS, "api_keys": 4})  # 3 keys exist: one left
    barrier = threading.Barrier(8)
    outcomes: list[str] = []

    def issue(i: int) -> None:
        barrier.wait()
        try:
            with unit_of_work(engine) as session:
                tenancy.create_key(session=session, ctx=ctx, name=f"race-{i}", role=Role.viewer, quotas=limits)
            outcomes.append("issued")
        except QuotaExceeded:
            outcomes.append("refused")

    threads = [threading.Thread(target=issue, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    assert sorted(outcomes) == ["issued"] + ["refused"] * 7
    assert _used(client, tenant, "api_keys") == 4


def test_the_portal_shows_each_quota_beside_its_use(client: TestClient, tenant: Tenant) -> None:
    _connection(client, tenant)
    _set(client, tenant.id, webhooks=9)
    sign_in(client, tenant.viewer["Authorization"].removeprefix("Bearer "))

    page = client.get("/portal/quotas")

    assert page.status_code == 200, page.text
    text = " ".join(page.text.split())
    assert ('<td>Connections</td> <td class="num">1</td> <td class="num">3</td> <td>the platform default</td>'
            in text)
    assert ('<td>Webhooks</td> <td class="num">0</td> <td class="num">9</td> <td>the operator, for this tenant</td>'
            in text)
    assert ('<td>API keys (unrevoked)</td> <td class="num">3</td> <td class="num">5</td>' in text)
    assert 'href="/portal/quotas" aria-current="page"' in text


def test_the_portal_shows_a_refusal_above_the_form(client: TestClient, tenant: Tenant) -> None:
    _fill(_maker(client, tenant, "api_keys"), DEFAULTS["api_keys"] - 3)
    csrf = sign_in(client, tenant.admin["Authorization"].removeprefix("Bearer "))

    page = client.post("/portal/api-keys", data={"csrf_token": csrf, "name": "one-too-many", "role": "viewer"})

    assert page.status_code == 409
    assert "The tenant&#39;s quota of 5 unrevoked API keys is reached (5 used): revoke one" in page.text
