"""A webhook's signing secret under the orphan sweep (kept while its webhook lives, destroyed once it is
orphaned), and the deliveries counted in ``/metrics`` by outcome and event type."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update
from sqlmodel import col, select

from api.connections.orphans import sweep_orphaned_secrets
from api.core.db import unit_of_work
from api.webhooks.events import emit
from api.webhooks.models import WebhookDelivery
from tests.factories import Tenant, create_connection, operator
from tests.webhooks.helpers import create_webhook


def test_the_sweep_keeps_live_webhook_secrets_and_destroys_orphaned_ones(client: TestClient, app: Any, tenant: Tenant, caplog: pytest.LogCaptureFixture) -> None:
    store = app.state.secrets
    live = create_webhook(client, tenant, "https://alerts.example.com/")
    conn = create_connection(client, tenant)
    orphan = f"tenants/{tenant.id}/webhooks/{uuid.uuid4()}"
    store.write(orphan, {"secret": "whsec_left-by-a-failed-create"})

    with unit_of_work(app.state.engine) as session:
        young = sweep_orphaned_secrets(session=session, secrets=store, grace_s=3600)
    with unit_of_work(app.state.engine) as session:
        swept = sweep_orphaned_secrets(session=session, secrets=store, grace_s=0)

    assert (young.destroyed, young.too_young) == ([], [orphan]), "a create in flight keeps its secret"
    assert (swept.checked, swept.destroyed) == (3, [orphan])
    assert store.list_paths("tenants") == sorted([f"tenants/{tenant.id}/webhooks/{live['id']}",
                                                  f"tenants/{tenant.id}/connections/{conn['id']}"])
    assert f"orphaned secret at {orphan} destroyed: no webhook refers to it" in caplog.text


def _metric(text: str, name: str) -> dict[str, float]:
    """``{labels: value}`` of one metric in Prometheus' text format."""
    out = {}
    for line in text.splitlines():
        if line.startswith((name + "{", name + " ")):
            labels, _, value = line.rpartition(" ")
            out[labels.removeprefix(name)] = float(value)
    return out


def test_metrics_count_deliveries_by_outcome(client: TestClient, app: Any, tenant: Tenant) -> None:
    create_webhook(client, tenant, "https://alerts.example.com/")
    create_webhook(client, tenant, "https://pager.example.com/", events=["run.failed"])
    with unit_of_work(app.state.engine) as session:
        for _ in range(3):
            emit(session, uuid.UUID(tenant.id), "run.failed", {"run_id": "r"})
        emit(session, uuid.UUID(tenant.id), "offsets.changed", {"pipeline_id": "p"})
    with unit_of_work(app.state.engine) as session:
        ids = session.exec(select(WebhookDelivery.id).where(WebhookDelivery.event_type == "run.failed")).all()
        session.execute(update(WebhookDelivery).where(col(WebhookDelivery.id).in_(ids[:4]))
                        .values(state="succeeded", attempts=2))
        session.execute(update(WebhookDelivery).where(col(WebhookDelivery.id).in_(ids[4:5]))
                        .values(state="failed", attempts=9))

    text = client.get("/metrics", headers=operator()).text

    assert _metric(text, "inlet_webhook_deliveries_total") == {
        '{event_type="run.failed",outcome="succeeded"}': 4.0, '{event_type="run.failed",outcome="failed"}': 1.0}
    assert _metric(text, "inlet_webhook_deliveries_pending") == {
        '{event_type="run.failed"}': 1.0, '{event_type="offsets.changed"}': 1.0}
    assert _metric(text, "inlet_webhook_delivery_attempts_total") == {"": 17.0}
