"""The portal over HTTP without a browser: sign-in and its cookie, CSRF on every form, roles (a
viewer's forged write is a 403), tenant isolation, form validation from the API's own schemas and
services, and write-only credentials."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from api.portal.session import LOGIN_COOKIE, SESSION_COOKIE
from tests.factories import PASSWORD, Tenant, create_connection, create_pipeline
from tests.fixtures.dispatch import RecordingDispatcher
from tests.portal.helpers import csrf_of, sign_in

WRITE_CONTROLS = ("/pause\"", "/resume\"", "/run\"", "Run now", "Replay…", "New pipeline", "Save connection")


def _pipeline_state(client: TestClient, tenant: Tenant, pipeline_id: str) -> str:
    return client.get(f"/pipelines/{pipeline_id}", headers=tenant.viewer).json()["state"]


def test_sign_in_sets_an_httponly_strict_cookie_that_does_not_hold_the_key(client: TestClient, tenant) -> None:
    login = client.get("/portal/login")
    assert login.status_code == 200 and 'for="api_key"' in login.text
    assert "HttpOnly" in login.headers["set-cookie"] and "SameSite=strict" in login.headers["set-cookie"]
    done = client.post("/portal/login", data={"api_key": tenant.keys["viewer"], "csrf_token": csrf_of(login.text),
                                              "next": "/portal/connections"}, follow_redirects=False)
    assert done.status_code == 303 and done.headers["location"] == "/portal/connections"
    cookie = next(c for c in done.headers.get_list("set-cookie") if c.startswith(SESSION_COOKIE + "="))
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/portal" in cookie
    value = client.cookies.get(SESSION_COOKIE)
    assert value and tenant.keys["viewer"] not in value and tenant.keys["viewer"][6:20] not in value
    page = client.get("/portal/pipelines")
    assert page.status_code == 200 and "Role: <strong>viewer</strong>" in page.text
    assert page.headers["cache-control"] == "no-store" and "frame-ancestors 'none'" in page.headers["content-security-policy"]


def test_pages_send_an_anonymous_visitor_to_sign_in(client: TestClient, tenant) -> None:
    for path in ("/portal", "/portal/pipelines", "/portal/connections", "/portal/pipelines/new"):
        response = client.get(path, follow_redirects=True)
        assert response.status_code == 200 and response.url.path == "/portal/login", path
    client.cookies.set(SESSION_COOKIE, "not-a-fernet-token", path="/portal")
    forged = client.get("/portal/pipelines", follow_redirects=False)
    assert forged.status_code == 303 and forged.headers["location"].startswith("/portal/login")


def test_a_wrong_key_is_refused_and_no_session_is_made(client: TestClient, tenant) -> None:
    login = client.get("/portal/login")
    refused = client.post("/portal/login", data={"api_key": "inlet_" + "x" * 43, "csrf_token": csrf_of(login.text)})
    assert refused.status_code == 401 and "unknown or revoked" in refused.text
    assert SESSION_COOKIE not in client.cookies


def test_the_sign_in_form_needs_its_csrf_token(client: TestClient, tenant) -> None:
    client.get("/portal/login")
    refused = client.post("/portal/login", data={"api_key": tenant.keys["admin"], "csrf_token": "guess"})
    assert refused.status_code == 403 and SESSION_COOKIE not in client.cookies
    client.cookies.delete(LOGIN_COOKIE, path="/portal")
    other = client.post("/portal/login", data={"api_key": tenant.keys["admin"]})
    assert other.status_code == 403 and SESSION_COOKIE not in client.cookies


def test_a_post_without_the_csrf_token_is_refused_and_changes_nothing(client: TestClient, tenant) -> None:
    pipeline = create_pipeline(client, tenant)
    csrf = sign_in(client, tenant.keys["editor"])
    for data in ({}, {"csrf_token": ""}, {"csrf_token": csrf[:-2] + "xx"}):
        refused = client.post(f"/portal/pipelines/{pipeline['id']}/pause", data=data)
        assert refused.status_code == 403 and "security token" in refused.text
    json_body = client.post(f"/portal/pipelines/{pipeline['id']}/pause", json={"csrf_token": csrf})
    assert json_body.status_code == 403
    assert _pipeline_state(client, tenant, pipeline["id"]) == "active"
    done = client.post(f"/portal/pipelines/{pipeline['id']}/pause", data={"csrf_token": csrf}, follow_redirects=False)
    assert done.status_code == 303 and done.headers["location"].endswith("?notice=paused")
    assert _pipeline_state(client, tenant, pipeline["id"]) == "paused"


def test_an_editor_pauses_resumes_and_runs_a_pipeline(client: TestClient, tenant, dispatcher: RecordingDispatcher) -> None:
    pipeline = create_pipeline(client, tenant)
    csrf = sign_in(client, tenant.keys["editor"])
    page = client.get(f"/portal/pipelines/{pipeline['id']}")
    assert page.status_code == 200 and "Run now" in page.text and f"/portal/pipelines/{pipeline['id']}/pause" in page.text
    for path in (f"/portal/pipelines/{pipeline['id']}", "/portal/connections", "/portal/pipelines/new"):
        tokens = re.findall(r'name="csrf_token" value="([^"]*)"', client.get(path).text)
        assert len(tokens) > 1 and set(tokens) == {csrf}, path  # every form carries the session's token
    client.post(f"/portal/pipelines/{pipeline['id']}/pause", data={"csrf_token": csrf})
    resumed = client.post(f"/portal/pipelines/{pipeline['id']}/resume", data={"csrf_token": csrf})
    assert resumed.status_code == 200 and "The pipeline is active again." in resumed.text
    ran = client.post(f"/portal/pipelines/{pipeline['id']}/run", data={"csrf_token": csrf}, follow_redirects=False)
    assert ran.status_code == 303
    run_id = re.fullmatch(r"/portal/runs/([0-9a-f-]+)\?notice=run-queued", ran.headers["location"]).group(1)
    assert [str(r) for r in dispatcher.runs] == [run_id]
    run_page = client.get(ran.headers["location"])
    assert run_page.status_code == 200 and "Run #1" in run_page.text and 'data-refresh="2000"' in run_page.text
    again = client.post(f"/portal/pipelines/{pipeline['id']}/run", data={"csrf_token": csrf})
    assert again.status_code == 409 and "active run" in again.text.lower()
    api = client.get(f"/pipelines/{pipeline['id']}/runs", headers=tenant.viewer).json()
    assert [r["id"] for r in api["items"]] == [run_id]


def test_a_viewer_sees_no_write_controls_and_a_forged_write_is_refused(client: TestClient, tenant) -> None:
    pipeline = create_pipeline(client, tenant)
    csrf = sign_in(client, tenant.keys["viewer"])
    for path in (f"/portal/pipelines/{pipeline['id']}", "/portal/pipelines", "/portal/connections"):
        page = client.get(path)
        assert page.status_code == 200
        assert not [c for c in WRITE_CONTROLS if c in page.text], (path, [c for c in WRITE_CONTROLS if c in page.text])
    for path in ("/portal/pipelines/new", f"/portal/pipelines/{pipeline['id']}/replay"):
        assert client.get(path).status_code == 403
    forged = [
        (f"/portal/pipelines/{pipeline['id']}/pause", {}),
        (f"/portal/pipelines/{pipeline['id']}/run", {}),
        (f"/portal/pipelines/{pipeline['id']}/replay", {"tp": "orders|0", "mode": "earliest", "action": "preview"}),
        ("/portal/pipelines/new", {"name": "x"}),
        ("/portal/connections", {"name": "x", "bootstrap_servers": "a:1"}),
        (f"/portal/connections/{pipeline['source']['connection_id']}/test", {}),
    ]
    for path, data in forged:
        refused = client.post(path, data={"csrf_token": csrf, **data})
        assert refused.status_code == 403 and "needs the editor role" in refused.text, path
    assert _pipeline_state(client, tenant, pipeline["id"]) == "active"
    assert client.get(f"/pipelines/{pipeline['id']}/runs", headers=tenant.viewer).json()["total"] == 0


def test_tenant_b_sees_none_of_tenant_a(client: TestClient, tenant, other_tenant) -> None:
    mine = create_pipeline(client, tenant, name="alpha-orders")
    create_pipeline(client, other_tenant, name="beta-clicks")
    csrf = sign_in(client, other_tenant.keys["admin"])
    listing = client.get("/portal/pipelines")
    assert "beta-clicks" in listing.text and "alpha-orders" not in listing.text
    assert "alpha-orders" not in client.get("/portal/pipelines?name=alpha").text
    assert mine["source"]["connection_id"] not in client.get("/portal/connections").text
    for path in (f"/portal/pipelines/{mine['id']}", f"/portal/pipelines/{mine['id']}/replay"):
        assert client.get(path).status_code == 404
    assert client.post(f"/portal/pipelines/{mine['id']}/pause", data={"csrf_token": csrf}).status_code == 404
    assert client.post(f"/portal/connections/{mine['source']['connection_id']}/test",
                       data={"csrf_token": csrf}).status_code == 404
    assert _pipeline_state(client, tenant, mine["id"]) == "active"


def test_the_pipeline_list_filters_and_pages(client: TestClient, tenant) -> None:
    conn = create_connection(client, tenant)
    for i in range(23):
        create_pipeline(client, tenant, conn["id"], name=f"p-{i:02d}", state="paused" if i % 2 else "active")
    sign_in(client, tenant.keys["viewer"])
    first = client.get("/portal/pipelines").text
    assert "23 pipelines" in first and "Page 1 of 2" in first and "p-00" in first and "p-20" not in first
    second = client.get("/portal/pipelines?page=2").text
    assert "p-20" in second and "p-22" in second and "p-00" not in second
    paused = client.get("/portal/pipelines?state=paused&name=p-1").text
    names = set(re.findall(r">(p-\d\d)</a>", paused))
    assert names == {"p-11", "p-13", "p-15", "p-17", "p-19"}


def test_new_pipeline_form_shows_the_schemas_messages_beside_their_fields(client: TestClient, tenant) -> None:
    conn = create_connection(client, tenant)
    create_pipeline(client, tenant, conn["id"], name="taken")
    csrf = sign_in(client, tenant.keys["editor"])
    form = client.get("/portal/pipelines/new").text
    assert f'value="{conn["id"]}"' in form and 'for="topics"' in form
    bad = client.post("/portal/pipelines/new", data={
        "csrf_token": csrf, "name": "bad name!", "connection_id": conn["id"], "topics": "", "value_format": "json",
        "schema": "", "target_path": "", "schedule_kind": "cron", "cron": "every minute", "timezone": "Mars/Base",
        "state": "active",
    })
    assert bad.status_code == 422
    errors = dict(re.findall(r'<p class="error" id="err-([\w-]+)">([^<]+)</p>', bad.text))
    assert set(errors) >= {"name", "target_path", "cron", "timezone", "topics"}, errors
    assert "interval_seconds" not in errors
    assert 'id="name" name="name" value="bad name!"' in bad.text
    taken = client.post("/portal/pipelines/new", data={
        "csrf_token": csrf, "name": "taken", "connection_id": conn["id"], "topics": "orders", "value_format": "string",
        "target_path": "bronze/x", "schedule_kind": "none", "state": "paused",
    })
    assert taken.status_code == 409 and "already exists" in taken.text
    made = client.post("/portal/pipelines/new", data={
        "csrf_token": csrf, "name": "fresh", "connection_id": conn["id"], "topics": "orders, refunds",
        "value_format": "string", "target_path": "bronze/fresh", "schedule_kind": "interval",
        "interval_seconds": "60", "state": "paused",
    }, follow_redirects=False)
    assert made.status_code == 303
    pipeline_id = made.headers["location"].split("/")[3].split("?")[0]
    api = client.get(f"/pipelines/{pipeline_id}", headers=tenant.viewer).json()
    assert api["source"]["topics"] == ["orders", "refunds"] and api["schedule"] == {"interval_seconds": 60}
    assert api["state"] == "paused" and api["target"] == {"type": "delta", "path": "bronze/fresh"}


def test_connection_form_keeps_credentials_write_only(client: TestClient, tenant) -> None:
    csrf = sign_in(client, tenant.keys["editor"])
    base = {"csrf_token": csrf, "name": "secure", "bootstrap_servers": "broker-1.example.com:9093",
            "security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512", "username": "ingest"}
    missing = client.post("/portal/connections", data={**base, "bootstrap_servers": "no-port"})
    assert missing.status_code == 422 and 'id="err-bootstrap_servers"' in missing.text
    rejected = client.post("/portal/connections", data={**base, "password": PASSWORD, "bootstrap_servers": "bad"})
    assert rejected.status_code == 422 and PASSWORD not in rejected.text
    saved = client.post("/portal/connections", data={**base, "password": PASSWORD}, follow_redirects=False)
    assert saved.status_code == 303
    listing = client.get("/portal/connections").text
    assert "secure" in listing and "stored (version 1)" in listing and PASSWORD not in listing
    api = client.get("/connections?name=secure", headers=tenant.viewer).json()["items"][0]
    assert api["has_credentials"] is True and api["sasl_mechanism"] == "SCRAM-SHA-512"


def test_connection_form_takes_a_schema_registry_and_keeps_its_secrets_write_only(client: TestClient, tenant: Tenant) -> None:
    token = "sr-portal-T0ken-never-shown-81aa"
    csrf = sign_in(client, tenant.keys["editor"])
    form = client.get("/portal/connections").text
    assert 'name="registry_url"' in form and 'name="registry_token"' in form
    base = {"csrf_token": csrf, "name": "with-registry", "bootstrap_servers": "broker-1.example.com:9092",
            "security_protocol": "PLAINTEXT", "registry_url": "https://sr.example.com", "registry_auth": "bearer"}
    refused = client.post("/portal/connections", data={**base, "registry_token": token, "registry_url": "sr.example.com"})
    assert refused.status_code == 422 and 'id="err-registry_url"' in refused.text and token not in refused.text
    assert 'value="sr.example.com"' in refused.text  # the URL is shown back, the token is not
    saved = client.post("/portal/connections", data={**base, "registry_token": token}, follow_redirects=False)
    assert saved.status_code == 303
    listing = client.get("/portal/connections").text
    assert "<code>https://sr.example.com</code> (bearer)" in listing and token not in listing
    api = client.get("/connections?name=with-registry", headers=tenant.viewer).json()["items"][0]
    assert api["schema_registry"] == {"url": "https://sr.example.com", "ca_pem": None, "endpoint_identification": "https",
                                      "auth": "bearer"}

    pipeline = client.post("/portal/pipelines/new", data={
        "csrf_token": csrf, "name": "avro-orders", "connection_id": api["id"], "topics": "orders", "value_format": "avro",
        "value_version": "2", "target_path": "bronze/avro", "schedule_kind": "none", "state": "paused",
    }, follow_redirects=False)
    assert pipeline.status_code == 303, pipeline.text
    made = client.get(f"/pipelines/{pipeline.headers['location'].split('/')[3].split('?')[0]}", headers=tenant.viewer)
    assert made.json()["source"]["value_format"] == "avro" and made.json()["source"]["value_schema"] == {"version": 2}


def test_a_connection_test_failure_is_shown_on_the_page(client: TestClient, tenant) -> None:
    conn = create_connection(client, tenant, bootstrap_servers="127.0.0.1:1", security_protocol="PLAINTEXT",
                             sasl_mechanism=None, credentials=None)
    csrf = sign_in(client, tenant.keys["editor"])
    tested = client.post(f"/portal/connections/{conn['id']}/test", data={"csrf_token": csrf})
    assert tested.status_code == 200 and "Connection test failed" in tested.text and 'id="test-result"' in tested.text


def test_sign_out_ends_the_session(client: TestClient, tenant) -> None:
    csrf = sign_in(client, tenant.keys["viewer"])
    assert client.post("/portal/logout", data={}).status_code == 403
    out = client.post("/portal/logout", data={"csrf_token": csrf}, follow_redirects=False)
    assert out.status_code == 303 and out.headers["location"] == "/portal/login?notice=signed-out"
    assert SESSION_COOKIE not in client.cookies
    assert client.get("/portal/pipelines", follow_redirects=False).status_code == 303


def test_a_revoked_key_ends_its_portal_session(client: TestClient, tenant) -> None:
    sign_in(client, tenant.keys["viewer"])
    me = client.get("/api-keys", headers=tenant.admin).json()["items"]
    viewer_key = next(k for k in me if k["role"] == "viewer")
    assert client.delete(f"/api-keys/{viewer_key['id']}", headers=tenant.admin).status_code == 204
    after = client.get("/portal/pipelines", follow_redirects=False)
    assert after.status_code == 303 and after.headers["location"].startswith("/portal/login")


def test_the_portal_is_not_part_of_the_api_contract(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert not [p for p in paths if p.startswith("/portal")]


def test_static_files_come_from_an_allow_list(client: TestClient) -> None:
    css = client.get("/portal/static/portal.css")
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
    assert client.get("/portal/static/portal.js").headers["content-type"].startswith("text/javascript")
    for name in ("..%2Frouter.py", "router.py", "%2e%2e%2f%2e%2e%2fmain.py"):
        assert client.get(f"/portal/static/{name}").status_code == 404


def test_json_bodies_elsewhere_stay_json_only(client: TestClient, tenant) -> None:
    refused = client.post("/connections", content="name=x", headers={**tenant.editor,
                          "Content-Type": "application/x-www-form-urlencoded"})
    assert refused.status_code == 415


def test_the_connections_page_says_when_stored_credentials_are_missing(client: TestClient, app, tenant) -> None:
    kept = create_connection(client, tenant, name="kept")
    lost = create_connection(client, tenant, name="lost")
    app.state.secrets.destroy(f"tenants/{tenant.id}/connections/{lost['id']}")  # as if the store lost it
    sign_in(client, tenant.keys["viewer"])
    page = client.get("/portal/connections")
    assert page.status_code == 200
    rows = {name: row for name, row in re.findall(r'<tr[^>]*>\s*<td><a href="[^"]+">([^<]+)</a></td>(.*?)</tr>',
                                                  page.text, re.DOTALL)}
    assert "stored (version 1)" in rows["kept"] and "missing" not in rows["kept"]
    assert ('<strong class="missing">missing</strong> — version 1 is gone from the secret store; send new credentials'
            in rows["lost"])
    assert kept["credentials_status"] == "ok"
