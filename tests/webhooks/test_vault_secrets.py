"""A webhook's signing secret in a real Vault (OpenBao, tests/fixtures/vault.py), reached with an AppRole
that holds only the shipped policy (deploy/vault/inlet-policy.hcl): written at the tenant's path,
rotated as a new version with the previous one still signing, read by the sender, destroyed with its
webhook."""

from __future__ import annotations

import uuid

from fastapi.testclient import TestClient
from pydantic import SecretStr

from api.core.config import Settings
from api.main import create_app
from tests.factories import Tenant
from tests.fixtures.dispatch import RecordingDispatcher
from tests.fixtures.vault import TestVault, vault_backed
from tests.fixtures.webhook_receiver import Receiver
from tests.webhooks.helpers import create_webhook, signature_ok
from worker.webhooks import WebhookSender


def test_the_secret_lives_rotates_and_dies_in_vault(settings: Settings, tenant: Tenant, vault: TestVault,
                                                    webhook_receiver: Receiver) -> None:
    role_id, secret_id = vault.approle_for_inlet()
    least = vault_backed(settings, vault, vault_token=None, vault_role_id=role_id, vault_secret_id=SecretStr(secret_id))
    app = create_app(least, dispatcher=RecordingDispatcher())
    try:
        with TestClient(app, raise_server_exceptions=False) as client:
            hook = create_webhook(client, tenant, webhook_receiver.url)
            path = f"tenants/{tenant.id}/webhooks/{hook['id']}"
            assert vault.paths() == [path] and vault.read(path) == {"secret": hook["secret"]}

            rotated = client.post(f"/webhooks/{hook['id']}/rotate-secret", headers=tenant.editor).json()["secret"]
            assert vault.metadata(path)["current_version"] == 2
            assert (vault.read(path, 1), vault.read(path, 2)) == ({"secret": hook["secret"]}, {"secret": rotated})

            sent = client.post(f"/webhooks/{hook['id']}/test", headers=tenant.editor).json()
            sender = WebhookSender(least, app.state.engine, app.state.secrets)
            assert sender.deliver(uuid.UUID(sent["id"])).state == "succeeded"
            (received,) = webhook_receiver.requests
            assert signature_ok(rotated, received) and signature_ok(hook["secret"], received)

            assert client.delete(f"/webhooks/{hook['id']}", headers=tenant.editor).status_code == 204
            assert vault.metadata(path) is None and vault.paths() == []
    finally:
        app.state.engine.dispose()
