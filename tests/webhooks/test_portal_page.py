"""The portal's webhooks page: the tenant's endpoints and their recent deliveries, for a viewer, and
nothing of another tenant's; never a secret."""

from __future__ import annotations

import html
import uuid
from typing import Any

from fastapi.testclient import TestClient

from api.core.db import unit_of_work
from api.webhooks.events import emit
from tests.factories import Tenant
from tests.portal.helpers import sign_in
from tests.webhooks.helpers import create_webhook


def test_the_page_lists_webhooks_and_their_recent_deliveries(client: TestClient, app: Any, tenant: Tenant, other_tenant: Tenant) -> None:
    hook = create_webhook(client, tenant, "https://alerts.example.com/inlet?team=data", description="on-call pager")
    theirs = create_webhook(client, other_tenant, "https://theirs.example.com/hook")
    test = client.post(f"/webhooks/{hook['id']}/test", headers=tenant.editor).json()
    with unit_of_work(app.state.engine) as session:
        emit(session, uuid.UUID(tenant.id), "pipeline.lag_exceeded", {"pipeline_id": "p"})

    sign_in(client, tenant.keys["viewer"])
    page = client.get("/portal/webhooks")

    assert page.status_code == 200, page.text
    text = html.unescape(page.text)
    assert '<a href="/portal/webhooks" aria-current="page">Webhooks</a>' in page.text
    assert "https://alerts.example.com/inlet?team=****" in text and "on-call pager" in text
    assert "team=data" not in text  # a viewer reads the query masked
    assert "run.failed, pipeline.recovered" in text
    assert test["event_id"] in text and "webhook.test" in text and "pipeline.lag_exceeded" in text
    assert text.count("pending") >= 2
    assert hook["secret"] not in text
    assert theirs["id"] not in text and "theirs.example.com" not in text and theirs["secret"] not in text
