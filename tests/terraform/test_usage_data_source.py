"""The ``inlet_usage`` data source read against a running Inlet: the range's sums, the runs by outcome
and the buckets as GET /usage gives them; a refused range is Inlet's problem detail."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

from fastapi.testclient import TestClient
from tf.iface import ReadDataContext
from tf.utils import Diagnostics

from api.core.db import unit_of_work
from api.usage import service as usage
from terraform_provider_inlet.client import InletClient
from terraform_provider_inlet.data_sources import USAGE_ATTRIBUTES, UsageDataSource
from tests.factories import Tenant, create_pipeline

AT = datetime(2026, 11, 20, 10, 15, tzinfo=UTC)


def _read(inlet_url: str, tenant: Tenant, **config: Any) -> tuple[dict[str, Any] | None, Diagnostics]:
    source = UsageDataSource(SimpleNamespace(client=InletClient(inlet_url, tenant.keys["viewer"])))  # type: ignore[arg-type]
    ctx = ReadDataContext(diagnostics=Diagnostics(), type_name="inlet_usage")
    return source.read(ctx, {a.name: None for a in USAGE_ATTRIBUTES} | config), ctx.diagnostics


def test_the_usage_data_source_sums_the_range(inlet_url: str, client: TestClient, tenant: Tenant) -> None:
    pipeline = create_pipeline(client, tenant, state="paused")
    with unit_of_work(client.app.state.engine) as session:  # type: ignore[attr-defined]
        for outcome, records in (("succeeded", 100), ("retried", 40), ("succeeded", 60)):
            usage.meter(session, tenant_id=uuid.UUID(tenant.id), pipeline_id=uuid.UUID(pipeline["id"]),
                        pipeline_name=pipeline["name"], outcome=outcome,  # type: ignore[arg-type]
                        figures=usage.Figures(records_read=records, rows_written=records if outcome == "succeeded"
                                              else 0, bytes_read=records * 10, engine_ms=1500),
                        wall_s=2.0, at=AT)

    state, diags = _read(inlet_url, tenant, **{"from": "2026-11-20T00:00:00Z", "to": "2026-11-21T00:00:00Z",
                                               "granularity": "day"})

    assert not diags.has_errors(), diags
    expected_api = client.get("/usage", params={"from": "2026-11-20T00:00:00Z", "to": "2026-11-21T00:00:00Z",
                                                "granularity": "day"}, headers=tenant.viewer).json()
    assert state is not None
    assert {k: v for k, v in state.items() if k != "buckets"} == {
        "pipeline_id": None, "from": "2026-11-20T00:00:00Z", "to": "2026-11-21T00:00:00Z", "granularity": "day",
        "records_read": 200, "rows_written": 160, "rows_quarantined": 0, "bytes_read": 2000, "bytes_written": 0,
        "wall_seconds": 6.0, "engine_seconds": 4.5,
        "runs": {"succeeded": 2, "failed": 0, "retried": 1, "cancelled": 0, "skipped": 0},
    }
    assert json.loads(state["buckets"]) == expected_api["items"]


def test_a_refused_range_is_an_error_with_inlets_detail(inlet_url: str, tenant: Tenant) -> None:
    state, diags = _read(inlet_url, tenant, **{"from": "2026-11-21T00:00:00Z", "to": "2026-11-20T00:00:00Z"})
    assert state is None
    assert [(d.summary, d.detail) for d in diags.diagnostics] == [
        ("Reading the usage: Inlet answered 422 Invalid request",
         "from must be before to (query.from: from must be before to)")]
