"""A viewer reads webhook URLs with their query values, user information and fragment masked (a
receiver's token often rides in the query); editors and admins, who may change the URL, read it whole.
The audit trail, which viewers read too, keeps the masked URL.

Row of issue 29: "Viewers see webhook URLs with their query and userinfo masked."
"""

from __future__ import annotations

import html
import uuid
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session

from api.core.redaction import masked_url
from api.webhooks.models import Webhook
from tests.factories import Tenant
from tests.portal.helpers import sign_in
from tests.webhooks.helpers import create_webhook

RECEIVER_TOKEN = "rcv-T0ken-7d0c2a"
URL = f"https://alerts.example.com/inlet/hook?token={RECEIVER_TOKEN}&channel=data"
MASKED = "https://alerts.example.com/inlet/hook?token=****&channel=****"


@pytest.mark.parametrize(("url", "shown"), [
    (URL, MASKED),
    ("https://alerts.example.com:8443/x", "https://alerts.example.com:8443/x"),
    ("http://alerts.example.com/x?s3cr3t", "http://alerts.example.com/x?****"),
    ("https://alerts.example.com/x?a=&b=1&&c", "https://alerts.example.com/x?a=****&b=****&&****"),
    ("https://user:pa55@alerts.example.com/x?t=1#frag", "https://****@alerts.example.com/x?t=****#****"),
    ("https://t0ken@[2001:db8::1]:9000/x", "https://****@[2001:db8::1]:9000/x"),
])
def test_what_a_masked_url_keeps(url: str, shown: str) -> None:
    assert masked_url(url) == shown


def test_a_viewer_reads_the_url_masked_and_an_editor_or_admin_whole(client: TestClient, tenant: Tenant) -> None:
    created = create_webhook(client, tenant, URL, description="pager")
    expected = {k: v for k, v in created.items() if k != "secret"}
    path = f"/webhooks/{created['id']}"

    viewer_read = client.get(path, headers=tenant.viewer)
    viewer_list = client.get("/webhooks", headers=tenant.viewer).json()

    assert viewer_read.status_code == 200
    assert viewer_read.json() == expected | {"url": MASKED}
    assert viewer_list == {"items": [expected | {"url": MASKED}], "total": 1, "limit": viewer_list["limit"], "offset": 0}
    assert RECEIVER_TOKEN not in viewer_read.text + str(viewer_list)
    for role in ("editor", "admin"):
        read = client.get(path, headers=tenant.as_(role))
        assert read.status_code == 200 and read.json() == expected
        assert client.get("/webhooks", headers=tenant.as_(role)).json()["items"] == [expected]
    assert viewer_read.headers["etag"] == client.get(path, headers=tenant.editor).headers["etag"]


def test_the_audit_trail_keeps_the_url_masked(client: TestClient, app: Any, tenant: Tenant) -> None:
    created = create_webhook(client, tenant, URL)
    patched = client.patch(f"/webhooks/{created['id']}", json={"url": URL.replace("data", "ops")},
                           headers={**tenant.editor, "Content-Type": "application/merge-patch+json"})
    assert patched.status_code == 200 and patched.json()["url"] == URL.replace("data", "ops"), patched.text

    audit = client.get("/audit-events", headers=tenant.viewer, params={"resource_type": "webhook"}).json()

    assert [e["action"] for e in audit["items"]] == ["update", "create"]
    assert [(e["before"] or {}).get("url") for e in audit["items"]] == [MASKED, None]
    assert [e["after"]["url"] for e in audit["items"]] == [MASKED, MASKED]
    assert RECEIVER_TOKEN not in str(audit)
    with Session(app.state.engine) as session:
        stored = session.get(Webhook, uuid.UUID(created["id"]))
        assert stored is not None and stored.url == URL.replace("data", "ops"), "deliveries still go to the whole URL"


@pytest.mark.parametrize(("role", "shown"), [("viewer", MASKED), ("editor", URL), ("admin", URL)])
def test_the_portal_page_masks_the_url_for_a_viewer(client: TestClient, tenant: Tenant, role: str, shown: str) -> None:
    hook = create_webhook(client, tenant, URL)
    client.post(f"/webhooks/{hook['id']}/test", headers=tenant.editor)
    sign_in(client, tenant.keys[role])

    page = client.get("/portal/webhooks")

    assert page.status_code == 200, page.text
    text = html.unescape(page.text)
    assert text.count(f"<code>{shown}</code>") == 2, "in the list and beside its delivery"
    assert (RECEIVER_TOKEN in text) is (role != "viewer")
