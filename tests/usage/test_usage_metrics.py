"""/metrics' usage counters: per tenant (ids), per pipeline only with the operator's switch, and
never lower after old runs are pruned or when another API instance answers the scrape."""

from __future__ import annotations

import uuid

from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import delete

from api.core.config import Settings
from api.core.db import unit_of_work
from api.main import create_app
from api.runs.models import Run
from tests.factories import Tenant, create_pipeline, operator
from tests.usage.helpers import Clock, run_once

USAGE = ("inlet_records_ingested_total", "inlet_rows_written_total", "inlet_bytes_ingested_total",
         "inlet_bytes_written_total", "inlet_rows_quarantined_total", "inlet_rows_violating_expectations_total",
         "inlet_run_wall_seconds_total",
         "inlet_run_engine_seconds_total", "inlet_run_outcomes_total")


def _usage(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples if s.name in USAGE}


def _expected(labels: tuple[tuple[str, str], ...], records: int, written: int, runs: int) -> dict:  # type: ignore[type-arg]
    return {
        ("inlet_records_ingested_total", labels): records, ("inlet_rows_written_total", labels): written,
        ("inlet_bytes_ingested_total", labels): records * 10, ("inlet_bytes_written_total", labels): 0,
        ("inlet_rows_quarantined_total", labels): 0, ("inlet_rows_violating_expectations_total", labels): 0,
        ("inlet_run_wall_seconds_total", labels): 30.0 * runs,
        ("inlet_run_engine_seconds_total", labels): 20.0 * runs,
        **{("inlet_run_outcomes_total", tuple(sorted(labels + (("outcome", o),)))): (runs if o == "succeeded" else 0)
           for o in ("succeeded", "failed", "retried", "cancelled", "skipped")},
    }


def test_counters_per_tenant_and_per_pipeline_with_the_switch(client: TestClient, tenant: Tenant, other_tenant: Tenant, settings: Settings,
                                                              clock: Clock) -> None:
    engine = client.app.state.engine
    a = create_pipeline(client, tenant, state="paused")["id"]
    b = create_pipeline(client, tenant, state="paused")["id"]
    c = create_pipeline(client, other_tenant, state="paused")["id"]
    for pid, n in ((a, 10), (b, 20), (c, 7)):
        run_once(engine, clock, pid, records=n, written=n, bytes_read=n * 10)

    by_tenant = _usage(client.get("/metrics", headers=operator()).text)
    assert by_tenant == {**_expected((("tenant_id", tenant.id),), 30, 30, 2),
                         **_expected((("tenant_id", other_tenant.id),), 7, 7, 1)}

    per_pipeline = create_app(settings.model_copy(update={"metrics_pipeline_labels": True}))
    with TestClient(per_pipeline) as second:
        by_pipeline = _usage(second.get("/metrics", headers=operator()).text)
    per_pipeline.state.engine.dispose()
    assert by_pipeline == {**_expected((("pipeline_id", a), ("tenant_id", tenant.id)), 10, 10, 1),
                           **_expected((("pipeline_id", b), ("tenant_id", tenant.id)), 20, 20, 1),
                           **_expected((("pipeline_id", c), ("tenant_id", other_tenant.id)), 7, 7, 1)}


def test_counters_never_go_down_across_pruning_and_two_instances(client: TestClient, tenant: Tenant, settings: Settings, clock: Clock) -> None:
    engine = client.app.state.engine
    pid = create_pipeline(client, tenant, state="paused")["id"]
    replica = create_app(settings)
    labels = (("tenant_id", tenant.id),)
    seen: list[dict] = []  # type: ignore[type-arg]
    with TestClient(replica) as second:
        for i, scrape in enumerate((client, second, client, second)):
            run_once(engine, clock, pid, records=10, written=10, bytes_read=100)
            if i % 2:  # prune every run so far, as a retention sweep would
                with unit_of_work(engine) as session:
                    session.execute(delete(Run).where(Run.pipeline_id == uuid.UUID(pid)))
            seen.append(_usage(scrape.get("/metrics", headers=operator()).text))
    replica.state.engine.dispose()
    assert [s[("inlet_records_ingested_total", labels)] for s in seen] == [10, 20, 30, 40]
    assert seen[-1] == _expected(labels, 40, 40, 4)
