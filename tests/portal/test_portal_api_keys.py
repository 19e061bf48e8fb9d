"""The portal's API keys page over HTTP: admins only, a new key shown once (and working), refusals
beside their inputs, and revocation (another's key, a stale page, and the key signed in with)."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from api.portal.session import FLASH_COOKIE, SESSION_COOKIE
from tests.factories import Tenant, bearer
from tests.portal.helpers import form_fields, sign_in


def test_only_an_admin_has_the_page_and_its_link(client: TestClient, tenant: Tenant) -> None:
    for role in ("viewer", "editor"):
        csrf = sign_in(client, tenant.keys[role])
        assert "/portal/api-keys" not in client.get("/portal/pipelines").text
        refused = client.get("/portal/api-keys")
        assert refused.status_code == 403 and "needs the admin role" in refused.text
        forged = client.post("/portal/api-keys", data={"csrf_token": csrf, "name": "mine", "role": "admin"})
        assert forged.status_code == 403
    assert [k["name"] for k in client.get("/api-keys", headers=tenant.admin).json()["items"]] == [
        "admin-key", "editor-key", "viewer-key"]
    sign_in(client, tenant.keys["admin"])
    page = client.get("/portal/api-keys")
    assert page.status_code == 200 and '<a href="/portal/api-keys" aria-current="page">API keys</a>' in page.text
    names = re.findall(r"<tr[^>]*>\s*<td>([\w-]+)", page.text)
    assert sorted(names) == ["admin-key", "editor-key", "viewer-key"]
    assert "admin-key <small>(you are signed in with it)</small>" in page.text
    assert not [k for k in tenant.keys.values() if k in page.text]


def test_a_new_key_is_shown_once_and_works(client: TestClient, tenant: Tenant) -> None:
    csrf = sign_in(client, tenant.keys["admin"])
    bad = client.post("/portal/api-keys", data={"csrf_token": csrf, "name": "no/slashes", "role": "owner"})
    assert bad.status_code == 422
    assert dict(re.findall(r'<p class="error" id="err-([\w-]+)">([^<]+)</p>', bad.text)) == {
        "name": "String should match pattern &#39;^[A-Za-z0-9][A-Za-z0-9 ._-]*$&#39;",
        "role": "Input should be &#39;viewer&#39;, &#39;editor&#39; or &#39;admin&#39;"}
    made = client.post("/portal/api-keys", data={"csrf_token": csrf, "name": "ci deploy", "role": "editor"},
                       follow_redirects=False)
    assert made.status_code == 303 and made.headers["location"] == "/portal/api-keys"
    assert not [k for k in client.get("/api-keys", headers=tenant.admin).json()["items"] if k["prefix"] in made.text]
    flash = next(c for c in made.headers.get_list("set-cookie") if c.startswith(FLASH_COOKIE + "="))
    assert "HttpOnly" in flash and "SameSite=strict" in flash and "Path=/portal/api-keys" in flash
    shown = client.get(made.headers["location"])
    assert shown.status_code == 200 and shown.headers["cache-control"] == "no-store"
    key = re.search(r'<input id="new-key" value="(inlet_[\w-]+)" readonly', shown.text)
    assert key and 'data-copy="new-key"' in shown.text and "it is shown only this once" in shown.text
    assert key.group(1) not in flash  # the cookie holds it encrypted
    me = client.get("/me", headers=bearer(key.group(1))).json()
    assert me["role"] == "editor" and me["tenant_id"] == tenant.id
    listing = client.get("/portal/api-keys").text  # a reload: the list, not the key again nor another key
    assert "ci deploy" in listing and key.group(1) not in listing and key.group(1)[:12] in listing  # its prefix
    assert len(client.get("/api-keys", headers=tenant.admin).json()["items"]) == 4


def test_a_revoked_key_stops_working_and_a_stale_revoke_is_refused(client: TestClient, tenant: Tenant) -> None:
    sign_in(client, tenant.keys["admin"])
    page = client.get("/portal/api-keys").text
    viewer_id = next(k["id"] for k in client.get("/api-keys", headers=tenant.admin).json()["items"] if k["role"] == "viewer")
    action = f"/portal/api-keys/{viewer_id}/revoke"
    fields = form_fields(page, action)
    revoked = client.post(action, data=fields, follow_redirects=False)
    assert revoked.status_code == 303 and revoked.headers["location"] == "/portal/api-keys?notice=key-revoked"
    assert client.get("/me", headers=tenant.viewer).status_code == 401
    after = client.get(revoked.headers["location"]).text
    assert "The API key was revoked" in after and f'/portal/api-keys/{viewer_id}/revoke' not in after
    assert re.search(r'<tr class="revoked">\s*<td>viewer-key</td>', after)
    stale = client.post(action, data=fields)  # the page before: the key has changed since
    assert stale.status_code == 412 and "nothing was done" in stale.text


def test_revoking_the_key_signed_in_with_signs_out(client: TestClient, tenant: Tenant) -> None:
    sign_in(client, tenant.keys["admin"])
    admin_id = next(k["id"] for k in client.get("/api-keys", headers=tenant.admin).json()["items"] if k["role"] == "admin")
    action = f"/portal/api-keys/{admin_id}/revoke"
    page = client.get("/portal/api-keys").text
    assert "This is the key you are signed in with: revoking it signs you out." in page
    out = client.post(action, data=form_fields(page, action), follow_redirects=False)
    assert out.status_code == 303 and out.headers["location"] == "/portal/login?notice=own-key-revoked"
    assert SESSION_COOKIE not in client.cookies
    assert "The key you were signed in with was revoked" in client.get(out.headers["location"]).text
    assert client.get("/me", headers=tenant.admin).status_code == 401
