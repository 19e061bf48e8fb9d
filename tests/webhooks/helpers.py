"""Checking a delivery the way a receiver would, written from the Standard Webhooks specification
(https://www.standardwebhooks.com) and not with Inlet's own signing code; and test data builders."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from typing import Any

from fastapi.testclient import TestClient

from tests.factories import Tenant
from tests.fixtures.webhook_receiver import Received


def signature_ok(secret: str, received: Received, *, tolerance_s: float = 300) -> bool:
    """Whether one of the ``v1`` signatures is HMAC-SHA256, keyed with the base64 after ``whsec_``, of
    ``{webhook-id}.{webhook-timestamp}.{body}``, and the timestamp is within the tolerance."""
    headers = received.headers
    message_id, timestamp = headers["webhook-id"], headers["webhook-timestamp"]
    if abs(time.time() - int(timestamp)) > tolerance_s:
        return False
    key = base64.b64decode(secret.removeprefix("whsec_"))
    signed = f"{message_id}.{timestamp}.".encode() + received.body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    for entry in headers["webhook-signature"].split(" "):
        version, _, signature = entry.partition(",")
        if version == "v1" and hmac.compare_digest(signature, expected):
            return True
    return False


def payload(received: Received) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(received.body)
    return body


def create_webhook(client: TestClient, tenant: Tenant, url: str, **fields: Any) -> dict[str, Any]:
    """A webhook of ``tenant``; its body as created (with the secret, shown only here)."""
    response = client.post("/webhooks", json={"url": url, **fields}, headers=tenant.editor)
    assert response.status_code == 201, response.text
    return response.json()


def deliveries(client: TestClient, tenant: Tenant, webhook_id: str, **params: Any) -> list[dict[str, Any]]:
    response = client.get(f"/webhooks/{webhook_id}/deliveries", headers=tenant.viewer, params={"limit": 500, **params})
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items
