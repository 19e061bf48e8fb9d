"""Portal pages over HTTP where the page, not the service, decides: a form's own rules shown beside its
inputs, a refused role's page that still says who is signed in, forms refused when not sent as forms,
and a failed write undone (compensations included) before its error page is shown."""

from __future__ import annotations

import re
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.secrets.store import SecretBackendUnavailable
from tests.factories import PASSWORD, Tenant, create_pipeline
from tests.portal.helpers import sign_in


def _field_errors(html: str) -> dict[str, str]:
    return dict(re.findall(r'<p class="error" id="err-([\w-]+)">([^<]+)</p>', html))


def _alerts(html: str) -> list[str]:
    return re.findall(r'<div class="alert" role="alert"><p>([^<]+)</p></div>', html)


def test_the_replay_forms_own_rules_are_shown_beside_its_inputs(client: TestClient, tenant: Tenant) -> None:
    pipeline = create_pipeline(client, tenant, state="paused")
    csrf = sign_in(client, tenant.keys["editor"])
    refused = client.post(f"/portal/pipelines/{pipeline['id']}/replay",
                          data={"csrf_token": csrf, "mode": "shift", "shift": "back a bit", "action": "preview"})
    assert refused.status_code == 422
    assert _field_errors(refused.text) == {"partitions": "Choose at least one partition",
                                           "shift": "Enter a whole number of offsets, negative to go back"}
    assert _alerts(refused.text) == []
    assert 'id="shift" name="shift" inputmode="numeric" value="back a bit"' in refused.text


def test_an_unreadable_confirmation_is_refused_on_the_page_and_moves_nothing(client: TestClient, tenant: Tenant) -> None:
    pipeline = create_pipeline(client, tenant, state="paused")
    history = f"/pipelines/{pipeline['id']}/offsets/history"
    before = client.get(history, headers=tenant.viewer).json()
    csrf = sign_in(client, tenant.keys["editor"])
    refused = client.post(f"/portal/pipelines/{pipeline['id']}/replay",
                          data={"csrf_token": csrf, "action": "apply", "patch": "{not json", "etag": "W/\"x\""})
    assert refused.status_code == 422
    assert _alerts(refused.text) == ["The change to apply could not be read; preview it again"]
    assert _field_errors(refused.text) == {}
    assert client.get(history, headers=tenant.viewer).json() == before


def test_a_page_refused_for_its_role_still_says_who_is_signed_in(client: TestClient, tenant: Tenant) -> None:
    csrf = sign_in(client, tenant.keys["viewer"])
    refused = client.get("/portal/pipelines/new")
    assert refused.status_code == 403
    assert "<h1>Not allowed</h1>" in refused.text
    assert _alerts(refused.text) == []  # the error page's alert has its status in bold
    assert "<strong>403</strong> — This action needs the editor role; the key has viewer" in refused.text
    assert "Role: <strong>viewer</strong>" in refused.text
    assert f'<input type="hidden" name="csrf_token" value="{csrf}">' in refused.text  # sign-out still works


def test_a_form_not_sent_as_a_form_fails_its_csrf_check_and_changes_nothing(client: TestClient, tenant: Tenant) -> None:
    pipeline = create_pipeline(client, tenant)
    csrf = sign_in(client, tenant.keys["editor"])
    forms = {
        "/portal/pipelines/new": {"name": "by-json", "connection_id": pipeline["source"]["connection_id"],
                                  "topics": "orders", "value_format": "string", "target_path": "bronze/j"},
        "/portal/connections": {"name": "by-json", "bootstrap_servers": "broker-1:9092"},
        f"/portal/pipelines/{pipeline['id']}/replay": {"tp": "orders|0", "mode": "earliest"},
    }
    for path, fields in forms.items():
        refused = client.post(path, json={"csrf_token": csrf, **fields})
        assert refused.status_code == 403, path
        assert "The form&#39;s security token is missing or wrong" in refused.text, path
    assert client.get("/pipelines?name=by-json", headers=tenant.viewer).json()["total"] == 0
    assert client.get("/connections?name=by-json", headers=tenant.viewer).json()["total"] == 0


def test_a_failed_write_is_undone_with_its_compensations_before_the_error_page(
    client: TestClient, app: Any, tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = app.state.secrets
    written = store.write

    def write_then_time_out(path: str, data: dict[str, Any]) -> int:
        written(path, data)  # the backend applied it, and then the answer never came
        raise SecretBackendUnavailable("The secret backend did not answer in time")

    monkeypatch.setattr(store, "write", write_then_time_out)
    csrf = sign_in(client, tenant.keys["editor"])
    failed = client.post("/portal/connections", data={
        "csrf_token": csrf, "name": "secure", "bootstrap_servers": "broker-1.example.com:9093",
        "security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512", "username": "ingest",
        "password": PASSWORD})
    assert failed.status_code == 503
    assert "<strong>503</strong> — The secret backend did not answer in time" in failed.text
    assert "Role: <strong>editor</strong>" in failed.text and PASSWORD not in failed.text
    assert client.get("/connections", headers=tenant.viewer).json()["total"] == 0  # the row was rolled back
    assert store.list_paths(f"tenants/{tenant.id}") == []  # and the secret written for it destroyed
