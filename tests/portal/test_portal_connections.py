"""The portal's connection pages over HTTP: a connection's page, every protocol and mechanism the API
takes (OAuth, TLS client certificates, client options), edits that keep write-only credentials, an
edit that conflicts with someone else's, the rotation of credentials, and delete, each checked against
what the API then reads and what the secret store holds."""

from __future__ import annotations

import re
from typing import Any

from fastapi.testclient import TestClient

from tests.factories import PASSWORD, Tenant, create_connection, create_pipeline
from tests.portal.helpers import form_fields, sign_in

CERT = "-----BEGIN CERTIFICATE-----\nMIIBcert\n-----END CERTIFICATE-----"
KEY = "-----BEGIN PRIVATE KEY-----\nMIIEkey-never-shown-7d1\n-----END PRIVATE KEY-----"


def _field_errors(html: str) -> dict[str, str]:
    return dict(re.findall(r'<p class="error" id="err-([\w-]+)">([^<]+)</p>', html))


def _etag(html: str) -> str:
    found = re.search(r'name="etag" value="([^"]+)"', html)
    assert found, "the page has no form with an ETag"
    return found.group(1).replace("&#34;", '"')


def _secret(app: Any, tenant: Tenant, connection: dict[str, Any], version: int | None = None) -> dict[str, Any]:
    return app.state.secrets.read(f"tenants/{tenant.id}/connections/{connection['id']}", version)


def _api(client: TestClient, tenant: Tenant, connection_id: str) -> dict[str, Any]:
    response = client.get(f"/connections/{connection_id}", headers=tenant.viewer)
    assert response.status_code == 200, response.text
    return response.json()


def _edit_form(conn: dict[str, Any], etag: str, csrf: str, **changes: str) -> dict[str, str]:
    """The edit form as the browser sends it untouched (write-only inputs empty), with ``changes``."""
    form = {"csrf_token": csrf, "etag": etag, "name": conn["name"], "bootstrap_servers": conn["bootstrap_servers"],
            "security_protocol": conn["security_protocol"], "sasl_mechanism": conn["sasl_mechanism"] or "",
            "options": "\n".join(f"{k}={v}" for k, v in conn["options"].items()), "registry_auth": "none",
            "endpoint_identification": "https", "registry_endpoint_identification": "https"}
    return {**form, **changes}


def test_a_connections_page_shows_its_settings_and_users_and_a_viewer_no_write_control(
    client: TestClient, tenant: Tenant
) -> None:
    conn = create_connection(client, tenant, name="prod")
    pipeline = create_pipeline(client, tenant, conn["id"], name="orders")
    sign_in(client, tenant.keys["viewer"])
    page = client.get(f"/portal/connections/{conn['id']}")
    assert page.status_code == 200
    assert "<h1>prod</h1>" in page.text and "SASL_SSL / SCRAM-SHA-512" in page.text
    assert "stored, version 1" in page.text and "<code>client.id=inlet-tests</code>" in page.text
    assert f'<a href="/portal/pipelines/{pipeline["id"]}">orders</a> (reads from it)' in page.text
    for control in ("/edit\"", "/delete\"", "/rotate\"", "/test\"", "Rotate credentials"):
        assert control not in page.text, control
    assert PASSWORD not in page.text and "ingest" not in page.text  # the username is in the secret too
    for path in ("edit", "delete"):
        assert client.get(f"/portal/connections/{conn['id']}/{path}").status_code == 403
    listing = client.get("/portal/connections").text
    assert f'<a href="/portal/connections/{conn["id"]}">prod</a>' in listing


def test_every_protocol_and_mechanism_of_the_api_can_be_saved_from_the_form(
    client: TestClient, app: Any, tenant: Tenant
) -> None:
    csrf = sign_in(client, tenant.keys["editor"])
    oauth = client.post("/portal/connections", data={
        "csrf_token": csrf, "name": "oauth", "bootstrap_servers": "broker-1.example.com:9093",
        "security_protocol": "SASL_SSL", "sasl_mechanism": "OAUTHBEARER", "oauth_client_id": "inlet",
        "oauth_client_secret": PASSWORD, "oauth_token_endpoint_url": "https://idp.example.com/token",
        "oauth_scope": "kafka", "username": "left-in-a-hidden-input", "ca_pem": CERT,
        "options": "client.id=inlet-portal\nsocket.timeout.ms=5000\n\n# comment\nsocket.keepalive.enable=true",
    }, follow_redirects=False)
    assert oauth.status_code == 303, oauth.text
    made = _api(client, tenant, oauth.headers["location"].split("/")[3].split("?")[0])
    assert made["sasl_mechanism"] == "OAUTHBEARER" and made["ssl"]["ca_pem"] == CERT
    assert made["options"] == {"client.id": "inlet-portal", "socket.timeout.ms": 5000, "socket.keepalive.enable": True}
    assert _secret(app, tenant, made) == {"credentials": {"client_id": "inlet", "client_secret": PASSWORD,
                                                          "token_endpoint_url": "https://idp.example.com/token",
                                                          "scope": "kafka"}}

    mtls = client.post("/portal/connections", data={
        "csrf_token": csrf, "name": "mtls", "bootstrap_servers": "broker-1.example.com:9093", "security_protocol": "SSL",
        "certificate_pem": CERT, "key_pem": KEY, "key_password": "kp", "endpoint_identification": "none",
    }, follow_redirects=False)
    assert mtls.status_code == 303, mtls.text
    made = _api(client, tenant, mtls.headers["location"].split("/")[3].split("?")[0])
    assert made["ssl"] == {"ca_pem": None, "certificate_pem": CERT, "endpoint_identification": "none", "has_key": True}
    assert _secret(app, tenant, made) == {"ssl_key": {"key_pem": KEY, "key_password": "kp"}}
    page = client.get(f"/portal/connections/{made['id']}/edit").text
    assert KEY not in page and "kp" not in re.findall(r'value="([^"]*)"', page)

    no_key = client.post("/portal/connections", data={
        "csrf_token": csrf, "name": "half", "bootstrap_servers": "broker-1.example.com:9093", "security_protocol": "SSL",
        "certificate_pem": CERT, "options": "no equals sign"})
    assert no_key.status_code == 422
    assert _field_errors(no_key.text) == {"options": "Line 1: write name=value, such as client.id=inlet"}
    no_key = client.post("/portal/connections", data={
        "csrf_token": csrf, "name": "half", "bootstrap_servers": "broker-1.example.com:9093", "security_protocol": "SSL",
        "certificate_pem": CERT})
    assert no_key.status_code == 422
    assert _field_errors(no_key.text) == {"key_pem": "TLS client authentication needs both certificate_pem and key_pem"}
    assert CERT.splitlines()[1] in no_key.text  # shown back: a certificate is public


def test_an_unchanged_connection_form_saved_changes_nothing(client: TestClient, tenant: Tenant) -> None:
    conn = create_connection(client, tenant, name="prod", ssl={"ca_pem": CERT}, schema_registry={
        "url": "https://sr.example.com", "credentials": {"token": "sr-t0ken"}})
    before = client.get(f"/connections/{conn['id']}", headers=tenant.viewer)
    sign_in(client, tenant.keys["editor"])
    action = f"/portal/connections/{conn['id']}/edit"
    saved = client.post(action, data=form_fields(client.get(action).text, action), follow_redirects=False)
    assert saved.status_code == 303 and saved.headers["location"].endswith("?notice=unchanged"), saved.text
    after = client.get(f"/connections/{conn['id']}", headers=tenant.viewer)
    assert after.json() == before.json() and after.headers["etag"] == before.headers["etag"]
    assert [e["action"] for e in client.get(f"/audit-events?resource_id={conn['id']}",
                                            headers=tenant.viewer).json()["items"]] == ["create"]


def test_an_edit_keeps_what_it_leaves_empty_and_changes_what_it_sends(client: TestClient, app: Any, tenant: Tenant) -> None:
    conn = create_connection(client, tenant, name="prod")
    csrf = sign_in(client, tenant.keys["editor"])
    form = client.get(f"/portal/connections/{conn['id']}/edit")
    assert form.status_code == 200
    assert 'value="broker-1.example.com:9092,broker-2.example.com:9092"' in form.text
    assert "A username and password are stored (version 1)" in form.text and PASSWORD not in form.text
    etag = _etag(form.text)
    saved = client.post(f"/portal/connections/{conn['id']}/edit", data=_edit_form(
        conn, etag, csrf, bootstrap_servers="broker-3.example.com:9092", registry_url="https://sr.example.com",
        registry_auth="bearer", registry_token="sr-t0ken"), follow_redirects=False)
    assert saved.status_code == 303 and saved.headers["location"].endswith("?notice=connection-saved"), saved.text
    after = _api(client, tenant, conn["id"])
    assert after["bootstrap_servers"] == "broker-3.example.com:9092" and after["credentials_version"] == 2
    assert after["schema_registry"]["auth"] == "bearer"
    assert _secret(app, tenant, after) == {"credentials": {"username": "ingest", "password": PASSWORD},
                                           "registry_credentials": {"token": "sr-t0ken"}}

    # To PLAINTEXT: the SASL credentials go, the registry's stay; the old ETag no longer matches.
    stale = client.post(f"/portal/connections/{conn['id']}/edit",
                        data=_edit_form(after, etag, csrf, security_protocol="PLAINTEXT", registry_url="https://sr.example.com",
                                        registry_auth="bearer"))
    assert stale.status_code == 412 and 'id="conflict"' in stale.text
    plain = client.post(f"/portal/connections/{conn['id']}/edit", data=_edit_form(
        after, _etag(client.get(f"/portal/connections/{conn['id']}/edit").text), csrf, security_protocol="PLAINTEXT",
        registry_url="https://sr.example.com", registry_auth="bearer"), follow_redirects=False)
    assert plain.status_code == 303, plain.text
    final = _api(client, tenant, conn["id"])
    assert final["security_protocol"] == "PLAINTEXT" and final["sasl_mechanism"] is None
    assert _secret(app, tenant, final) == {"registry_credentials": {"token": "sr-t0ken"}}

    # Another kind of credentials must be entered: the stored password is no OAuth client.
    oauth = client.post(f"/portal/connections/{conn['id']}/edit", data=_edit_form(
        final, _etag(client.get(f"/portal/connections/{conn['id']}/edit").text), csrf, security_protocol="SASL_SSL",
        sasl_mechanism="OAUTHBEARER", registry_url="https://sr.example.com", registry_auth="bearer"))
    assert oauth.status_code == 422
    assert _field_errors(oauth.text) == {"oauth_client_id": "sasl_mechanism OAUTHBEARER needs credentials"}


def test_an_edit_made_after_someone_elses_shows_both_and_saving_again_replaces_theirs(
    client: TestClient, tenant: Tenant
) -> None:
    conn = create_connection(client, tenant, name="prod")
    csrf = sign_in(client, tenant.keys["editor"])
    etag = _etag(client.get(f"/portal/connections/{conn['id']}/edit").text)
    theirs = client.patch(f"/connections/{conn['id']}", json={"bootstrap_servers": "theirs.example.com:9092"},
                          headers={**tenant.admin, "Content-Type": "application/merge-patch+json"})
    assert theirs.status_code == 200
    mine = _edit_form(conn, etag, csrf, bootstrap_servers="mine.example.com:9092")
    conflict = client.post(f"/portal/connections/{conn['id']}/edit", data=mine)
    assert conflict.status_code == 412
    assert "Someone else saved this connection after you opened the form" in conflict.text
    assert re.search(r"<th scope=\"row\"><code>bootstrap_servers</code></th><td>theirs.example.com:9092</td>"
                     r"<td>mine.example.com:9092</td>", conflict.text)
    assert 'value="mine.example.com:9092"' in conflict.text  # the form keeps what was typed
    assert _api(client, tenant, conn["id"])["bootstrap_servers"] == "theirs.example.com:9092"
    again = client.post(f"/portal/connections/{conn['id']}/edit", data={**mine, "etag": _etag(conflict.text)},
                        follow_redirects=False)
    assert again.status_code == 303, again.text
    assert _api(client, tenant, conn["id"])["bootstrap_servers"] == "mine.example.com:9092"


def test_rotating_credentials_writes_a_new_version(client: TestClient, app: Any, tenant: Tenant) -> None:
    conn = create_connection(client, tenant, name="prod", schema_registry={
        "url": "https://sr.example.com", "credentials": {"username": "sr", "password": "sr-old"}})
    csrf = sign_in(client, tenant.keys["editor"])
    page = client.get(f"/portal/connections/{conn['id']}").text
    assert "The cluster’s SCRAM-SHA-512 credentials" in page and "New registry password" in page
    etag = _etag(page)
    empty = client.post(f"/portal/connections/{conn['id']}/rotate", data={"csrf_token": csrf, "etag": etag})
    assert empty.status_code == 422 and "Enter the new credentials: nothing was changed" in empty.text
    half = client.post(f"/portal/connections/{conn['id']}/rotate",
                       data={"csrf_token": csrf, "etag": etag, "username": "ingest-2"})
    assert half.status_code == 422 and _field_errors(half.text) == {
        "password": "Value should have at least 1 item after validation, not 0"}
    rotated = client.post(f"/portal/connections/{conn['id']}/rotate", data={
        "csrf_token": csrf, "etag": etag, "username": "ingest-2", "password": "n3w-Pa55"}, follow_redirects=False)
    assert rotated.status_code == 303 and rotated.headers["location"].endswith("?notice=rotated")
    after = _api(client, tenant, conn["id"])
    assert after["credentials_version"] == 2 and after["credentials_status"] == "ok"
    assert _secret(app, tenant, after) == {"credentials": {"username": "ingest-2", "password": "n3w-Pa55"},
                                           "registry_credentials": {"username": "sr", "password": "sr-old"}}
    assert _secret(app, tenant, after, 1)["credentials"]["password"] == PASSWORD  # runs planned before keep it
    # The page shown before the rotation is stale now: a second rotation from it is refused.
    again = client.post(f"/portal/connections/{conn['id']}/rotate", data={
        "csrf_token": csrf, "etag": etag, "registry_username": "sr", "registry_password": "sr-new"})
    assert again.status_code == 412 and "changed by someone else after this page was shown" in again.text
    registry = client.post(f"/portal/connections/{conn['id']}/rotate", data={
        "csrf_token": csrf, "etag": _etag(client.get(f"/portal/connections/{conn['id']}").text),
        "registry_username": "sr", "registry_password": "sr-new"}, follow_redirects=False)
    assert registry.status_code == 303
    assert _secret(app, tenant, _api(client, tenant, conn["id"]))["registry_credentials"]["password"] == "sr-new"
    assert "sr-new" not in client.get(f"/portal/connections/{conn['id']}").text
    events = client.get(f"/audit-events?resource_id={conn['id']}", headers=tenant.viewer).json()["items"]
    assert [e["action"] for e in events] == ["update", "update", "create"]


def test_a_connection_in_use_is_not_deleted_and_a_free_one_is_with_its_secret(
    client: TestClient, app: Any, tenant: Tenant
) -> None:
    used = create_connection(client, tenant, name="used")
    pipeline = create_pipeline(client, tenant, used["id"], name="orders")
    free = create_connection(client, tenant, name="free")
    csrf = sign_in(client, tenant.keys["editor"])
    page = client.get(f"/portal/connections/{used['id']}/delete").text
    assert "cannot be deleted while pipelines use it" in page and f"/portal/pipelines/{pipeline['id']}" in page
    assert 'name="confirm_name"' not in page  # no delete control
    forced = client.post(f"/portal/connections/{used['id']}/delete", data={
        "csrf_token": csrf, "confirm_name": "used", "etag": _etag(client.get(f"/portal/connections/{used['id']}").text)})
    assert forced.status_code == 409 and "is used by 1 pipeline(s)" in forced.text

    confirm = client.get(f"/portal/connections/{free['id']}/delete").text
    assert "Every version of its credentials (now version 1): destroyed in the secret store" in confirm
    wrong = client.post(f"/portal/connections/{free['id']}/delete",
                        data={"csrf_token": csrf, "confirm_name": "fre", "etag": _etag(confirm)})
    assert wrong.status_code == 422 and _field_errors(wrong.text) == {"confirm_name": "Type free to confirm"}
    deleted = client.post(f"/portal/connections/{free['id']}/delete",
                          data={"csrf_token": csrf, "confirm_name": "free", "etag": _etag(confirm)},
                          follow_redirects=False)
    assert deleted.status_code == 303 and deleted.headers["location"] == "/portal/connections?notice=connection-deleted"
    assert client.get(f"/connections/{free['id']}", headers=tenant.viewer).status_code == 404
    assert app.state.secrets.describe(f"tenants/{tenant.id}/connections/{free['id']}") is None


def test_a_viewers_forged_connection_writes_are_refused(client: TestClient, tenant: Tenant) -> None:
    conn = create_connection(client, tenant, name="prod")
    csrf = sign_in(client, tenant.keys["viewer"])
    for path, data in ((f"/portal/connections/{conn['id']}/edit", {"name": "taken", "bootstrap_servers": "x:1"}),
                       (f"/portal/connections/{conn['id']}/rotate", {"username": "u", "password": "p"}),
                       (f"/portal/connections/{conn['id']}/delete", {"confirm_name": "prod"})):
        refused = client.post(path, data={"csrf_token": csrf, **data})
        assert refused.status_code == 403 and "needs the editor role" in refused.text, path
    assert _api(client, tenant, conn["id"]) == {**conn, "credentials_status": "ok"}
