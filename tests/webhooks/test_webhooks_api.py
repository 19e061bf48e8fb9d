"""``/webhooks``: create (the secret shown once, kept in the secret store), read, list, patch, rotate,
delete, the test event and the delivery log; roles, other tenants, bad input, the destination rules."""

from __future__ import annotations

import base64
import uuid
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event, text
from sqlmodel import Session

from api.core.config import Settings
from api.main import create_app
from tests.factories import Tenant, assert_auth_refused, assert_problem
from tests.fixtures.dispatch import RecordingDispatcher
from tests.webhooks.helpers import create_webhook, deliveries

URL = "https://alerts.example.com/inlet?channel=data"
DEFAULT_EVENTS = ["run.failed", "pipeline.recovered", "pipeline.data_loss", "pipeline.lag_exceeded",
                  "pipeline.lag_recovered", "pipeline.expectation_exceeded", "offsets.changed"]
MERGE_PATCH = {"Content-Type": "application/merge-patch+json"}


def _path(tenant_id: str, webhook_id: str) -> str:
    return f"tenants/{tenant_id}/webhooks/{webhook_id}"


def _stored(app: Any, tenant_id: str, webhook_id: str, version: int | None = None) -> str:
    secret: str = app.state.secrets.read(_path(tenant_id, webhook_id), version)["secret"]
    return secret


def test_create_shows_the_secret_once_and_keeps_it_in_the_secret_store(client: TestClient, app: Any, tenant: Tenant) -> None:
    created = client.post("/webhooks", json={"url": URL, "description": "on-call"}, headers=tenant.editor)

    assert created.status_code == 201, created.text
    body = created.json()
    secret = body["secret"]
    assert body == {"id": body["id"], "url": URL, "events": DEFAULT_EVENTS, "description": "on-call", "enabled": True,
                    "secret_rotated_at": None, "created_at": body["created_at"], "updated_at": body["updated_at"],
                    "secret": secret}
    assert secret.startswith("whsec_") and len(base64.b64decode(secret.removeprefix("whsec_"))) == 32
    assert created.headers["location"] == f"/webhooks/{body['id']}"
    assert _stored(app, tenant.id, body["id"]) == secret
    read = client.get(f"/webhooks/{body['id']}", headers=tenant.editor)
    assert read.status_code == 200 and read.json() == {k: v for k, v in body.items() if k != "secret"}
    # A viewer reads the query masked (tests/hostile/test_webhook_masking.py).
    assert client.get(f"/webhooks/{body['id']}", headers=tenant.viewer).json()["url"] == (
        "https://alerts.example.com/inlet?channel=****")
    assert read.headers["etag"] == created.headers["etag"]
    listed = client.get("/webhooks", headers=tenant.viewer).json()
    audit = client.get("/audit-events", headers=tenant.viewer, params={"resource_type": "webhook"}).json()
    assert [e["action"] for e in audit["items"]] == ["create"]
    with app.state.engine.connect() as conn:
        rows = conn.execute(text("SELECT * FROM webhooks")).all()
    assert secret not in read.text + str(listed) + str(audit) + str(rows)


def test_run_succeeded_is_sent_only_where_it_is_named(client: TestClient, tenant: Tenant) -> None:
    chosen = create_webhook(client, tenant, URL, events=["run.succeeded", "run.failed"])
    assert chosen["events"] == ["run.succeeded", "run.failed"]
    assert "run.succeeded" not in create_webhook(client, tenant, URL)["events"]


def test_an_idempotent_create_replays_without_the_secret(client: TestClient, tenant: Tenant) -> None:
    headers = {**tenant.editor, "Idempotency-Key": "hook-1"}
    first = client.post("/webhooks", json={"url": URL}, headers=headers)
    again = client.post("/webhooks", json={"url": URL}, headers=headers)

    assert first.status_code == again.status_code == 201
    assert again.headers["idempotent-replayed"] == "true"
    assert again.json() == first.json() | {"secret": None}
    assert client.get("/webhooks", headers=tenant.viewer).json()["total"] == 1


def test_list_is_the_tenants_own_paginated(client: TestClient, tenant: Tenant, other_tenant: Tenant) -> None:
    made = [create_webhook(client, tenant, f"https://h{i}.example.com/x") for i in range(3)]
    create_webhook(client, other_tenant, URL)

    page = client.get("/webhooks", headers=tenant.viewer, params={"limit": 2, "sort": "-url"}).json()

    reads = [{k: v for k, v in m.items() if k != "secret"} for m in made]
    assert page == {"items": [reads[2], reads[1]], "total": 3, "limit": 2, "offset": 0}
    assert_problem(client.get("/webhooks", headers=tenant.viewer, params={"sort": "secret"}), 422, fields={"query.sort"})


def test_patch_changes_what_it_names_and_honours_if_match(client: TestClient, tenant: Tenant) -> None:
    hook = create_webhook(client, tenant, URL)
    path = f"/webhooks/{hook['id']}"
    etag = client.get(path, headers=tenant.viewer).headers["etag"]

    patched = client.patch(path, json={"events": ["run.failed"], "enabled": False},
                           headers={**tenant.editor, **MERGE_PATCH, "If-Match": etag})

    assert patched.status_code == 200, patched.text
    assert (patched.json()["events"], patched.json()["enabled"], patched.json()["url"]) == (["run.failed"], False, URL)
    assert patched.headers["etag"] != etag
    stale = client.patch(path, json={"description": "x"}, headers={**tenant.editor, **MERGE_PATCH, "If-Match": etag})
    assert_problem(stale, 412)
    same = client.patch(path, json={"enabled": False}, headers={**tenant.editor, **MERGE_PATCH})
    assert same.headers["etag"] == patched.headers["etag"], "a no-op patch changes nothing"
    assert_problem(client.patch(path, json={"url": "ftp://files.example.com/x"}, headers={**tenant.editor, **MERGE_PATCH}),
                   422, fields={"url"})
    assert client.get(path, headers=tenant.editor).json()["url"] == URL


@pytest.mark.parametrize(("url", "message"), [
    ("ftp://files.example.com/x", "http:// or https://"),
    ("file:///etc/passwd", "http:// or https://"),
    ("javascript:alert(1)", "http:// or https://"),
    ("https://", "no host"),
    ("https://user:hunter2@hooks.example.com/x", "must not hold credentials"),
    ("https://hooks.example.com/x#frag", "fragment"),
    ("https://hooks.example.com/a b", "spaces"),
    ("https://hooks.example.com:99999/x", "port"),
])
def test_only_http_urls_to_a_host_are_taken(client: TestClient, app: Any, tenant: Tenant, url: str, message: str) -> None:
    refused = client.post("/webhooks", json={"url": url}, headers=tenant.editor)

    body = assert_problem(refused, 422, fields={"url"})
    assert message in body["errors"][0]["message"]
    assert "hunter2" not in refused.text
    assert app.state.secrets.list_paths("tenants") == []


@pytest.fixture
def allow_listed(settings: Settings) -> Any:
    application = create_app(settings.model_copy(update={"webhook_allowed_hosts": ["hooks.example.com", "*.corp.example"]}),
                             dispatcher=RecordingDispatcher())
    with TestClient(application, raise_server_exceptions=False) as client:
        yield client
    application.state.engine.dispose()


@pytest.mark.parametrize(("url", "allowed"), [
    ("https://hooks.example.com/inlet", True),
    ("https://HOOKS.Example.com/inlet", True),
    ("http://alerts.corp.example:8080/x", True),
    ("https://deep.alerts.corp.example/x", True),
    ("https://corp.example/x", False),
    ("https://hooks.example.com.evil.example/x", False),
    ("https://127.0.0.1/x", False),
])
def test_the_allow_list_of_hosts_is_a_setting(allow_listed: TestClient, tenant: Tenant, url: str, allowed: bool) -> None:
    response = allow_listed.post("/webhooks", json={"url": url}, headers=tenant.editor)

    if allowed:
        assert response.status_code == 201, response.text
    else:
        body = assert_problem(response, 422, fields={"url"})
        assert "INLET_WEBHOOK_ALLOWED_HOSTS" in body["errors"][0]["message"]


def test_bad_bodies_are_422_naming_the_field(client: TestClient, tenant: Tenant) -> None:
    for body, field in [
        ({"url": URL, "events": ["run.exploded"]}, "events[0]"),
        ({"url": URL, "events": ["webhook.test"]}, "events[0]"),
        ({"url": URL, "events": []}, "events"),
        ({"url": URL, "events": ["run.failed", "run.failed"]}, "events"),
        ({"url": URL, "description": "x" * 501}, "description"),
        ({"url": URL, "secret": "whsec_mine"}, "secret"),
        ({}, "url"),
    ]:
        assert_problem(client.post("/webhooks", json=body, headers=tenant.editor), 422, fields={field})
    assert client.get("/webhooks", headers=tenant.viewer).json()["total"] == 0


def test_rotation_shows_a_new_secret_once_and_keeps_the_previous_readable(client: TestClient, app: Any, tenant: Tenant) -> None:
    hook = create_webhook(client, tenant, URL)
    path = f"/webhooks/{hook['id']}/rotate-secret"

    stale = client.post(path, headers={**tenant.editor, "If-Match": '"stale"'})
    assert_problem(stale, 412)
    rotated = client.post(path, headers=tenant.editor)

    assert rotated.status_code == 200, rotated.text
    body = rotated.json()
    assert body["secret"].startswith("whsec_") and body["secret"] != hook["secret"]
    assert body["secret_rotated_at"] is not None
    assert _stored(app, tenant.id, hook["id"]) == body["secret"]
    assert _stored(app, tenant.id, hook["id"], 1) == hook["secret"]  # still signing during the overlap
    read = client.get(f"/webhooks/{hook['id']}", headers=tenant.viewer)
    assert "secret" not in read.json() and read.headers["etag"] == rotated.headers["etag"]
    audit = client.get("/audit-events", headers=tenant.viewer, params={"resource_id": hook["id"]}).json()
    assert [e["action"] for e in audit["items"]] == ["rotate-secret", "create"]
    assert body["secret"] not in str(audit) and hook["secret"] not in str(audit)


def test_delete_destroys_the_secret_after_the_commit(client: TestClient, app: Any, tenant: Tenant) -> None:
    hook = create_webhook(client, tenant, URL)
    client.post(f"/webhooks/{hook['id']}/test", headers=tenant.editor)
    path = f"/webhooks/{hook['id']}"

    assert_problem(client.delete(path, headers={**tenant.editor, "If-Match": '"stale"'}), 412)
    assert app.state.secrets.describe(_path(tenant.id, hook["id"])) is not None
    assert client.delete(path, headers=tenant.editor).status_code == 204

    assert app.state.secrets.describe(_path(tenant.id, hook["id"])) is None
    assert_problem(client.get(path, headers=tenant.viewer), 404)
    with app.state.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM webhook_deliveries")).scalar() == 0


def test_a_failed_commit_destroys_the_secret_it_wrote(client: TestClient, app: Any, tenant: Tenant) -> None:
    seen: list[str] = []

    def fail_commit(session: Session) -> None:
        seen.extend(app.state.secrets.list_paths("tenants"))
        raise RuntimeError("simulated commit failure")

    event.listen(Session, "before_commit", fail_commit)
    try:
        response = client.post("/webhooks", json={"url": URL}, headers=tenant.editor)
    finally:
        event.remove(Session, "before_commit", fail_commit)

    assert_problem(response, 500)
    assert len(seen) == 1 and seen[0].startswith(f"tenants/{tenant.id}/webhooks/")
    assert app.state.secrets.list_paths("tenants") == []
    assert client.get("/webhooks", headers=tenant.viewer).json()["total"] == 0


def test_the_test_event_is_queued_after_the_commit_and_logged(client: TestClient, tenant: Tenant, dispatcher: RecordingDispatcher) -> None:
    hook = create_webhook(client, tenant, URL, enabled=False)

    sent = client.post(f"/webhooks/{hook['id']}/test", headers=tenant.editor)

    assert sent.status_code == 202, sent.text
    body = sent.json()
    assert body == {"id": body["id"], "webhook_id": hook["id"], "event_id": body["event_id"], "event_type": "webhook.test",
                    "state": "pending", "attempts": 0, "response_status": None, "latency_ms": None, "last_error": None,
                    "next_attempt_at": body["next_attempt_at"], "last_attempt_at": None,
                    "created_at": body["created_at"], "finished_at": None}
    assert dispatcher.deliveries == [uuid.UUID(body["id"])]
    assert deliveries(client, tenant, hook["id"]) == [body]
    assert deliveries(client, tenant, hook["id"], state="succeeded") == []
    assert deliveries(client, tenant, hook["id"], event_type="webhook.test") == [body]
    assert_problem(client.get(f"/webhooks/{hook['id']}/deliveries", headers=tenant.viewer, params={"state": "lost"}),
                   422, fields={"query.state"})


def test_a_tenant_has_a_bounded_number_of_webhooks(client: TestClient, tenant: Tenant, settings: Settings) -> None:
    for i in range(settings.quota_webhooks):  # the webhooks quota (tests/hostile/test_quotas.py: all of them)
        create_webhook(client, tenant, f"https://h{i}.example.com/")
    refused = client.post("/webhooks", json={"url": URL}, headers=tenant.editor)
    assert_problem(refused, 409)
    assert (refused.json()["quota"], refused.json()["limit"]) == ("webhooks", 50)


ROUTES = [
    ("GET", "/webhooks", "viewer", None),
    ("POST", "/webhooks", "editor", {"url": URL}),
    ("GET", "/webhooks/{id}", "viewer", None),
    ("PATCH", "/webhooks/{id}", "editor", {"enabled": False}),
    ("DELETE", "/webhooks/{id}", "editor", None),
    ("POST", "/webhooks/{id}/rotate-secret", "editor", None),
    ("POST", "/webhooks/{id}/test", "editor", None),
    ("GET", "/webhooks/{id}/deliveries", "viewer", None),
]


@pytest.mark.parametrize(("method", "template", "role", "body"), ROUTES)
def test_every_route_refuses_strangers_and_low_roles(client: TestClient, tenant: Tenant, method: str, template: str, role: str, body: Any) -> None:
    hook = create_webhook(client, tenant, URL)
    assert_auth_refused(client, method, template.format(id=hook["id"]), tenant, role, json=body)


@pytest.mark.parametrize(("method", "template", "role", "body"), [r for r in ROUTES if "{id}" in r[1]])
def test_another_tenant_can_neither_see_nor_trigger_a_webhook(
    client: TestClient, app: Any, tenant: Tenant, other_tenant: Tenant, dispatcher: RecordingDispatcher, method: str, template: str, role: str, body: Any,
) -> None:
    hook = create_webhook(client, tenant, URL)
    before = client.get(f"/webhooks/{hook['id']}", headers=tenant.viewer).json()

    response = client.request(method, template.format(id=hook["id"]), json=body, headers=other_tenant.admin)

    assert_problem(response, 404)
    assert hook["id"] in response.json()["detail"] and URL not in response.text
    assert client.get(f"/webhooks/{hook['id']}", headers=tenant.viewer).json() == before
    assert deliveries(client, tenant, hook["id"]) == [] and dispatcher.deliveries == []
    assert _stored(app, tenant.id, hook["id"]) == hook["secret"]


def test_unknown_ids_are_404(client: TestClient, tenant: Tenant) -> None:
    missing = uuid.uuid4()
    for method, template, _, body in ROUTES:
        if "{id}" in template:
            assert_problem(client.request(method, template.format(id=missing), json=body, headers=tenant.admin), 404)
    assert_problem(client.get("/webhooks/not-a-uuid", headers=tenant.viewer), 422)
