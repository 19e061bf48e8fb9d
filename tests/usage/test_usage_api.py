"""``GET /usage`` (a tenant's own), ``GET /tenants/{id}/usage`` and ``GET /usage/tenants`` (the
operator's): whole bodies, CSV, ranges and granularity, roles, 404 and 422."""

from __future__ import annotations

import uuid
from datetime import timedelta

from fastapi.testclient import TestClient

from tests.factories import Tenant, assert_auth_refused, assert_problem, create_pipeline, operator
from tests.usage.helpers import T0, Clock, run_once

HOUR = T0.replace(minute=0)
RANGE = {"from": "2026-11-20T00:00:00Z", "to": "2026-11-22T00:00:00Z"}


def _row(tenant_id: str, pipeline: dict | None, bucket: str, **figures: object) -> dict:  # type: ignore[type-arg]
    runs = {"succeeded": 0, "failed": 0, "retried": 0, "cancelled": 0, "skipped": 0} | figures.pop("runs", {})  # type: ignore[operator]
    return {"tenant_id": tenant_id, "pipeline_id": pipeline["id"] if pipeline else None,
            "pipeline_name": pipeline["name"] if pipeline else None, "bucket": bucket, "records_read": 0,
            "rows_written": 0, "rows_quarantined": 0, "rows_violating": 0, "bytes_read": 0, "bytes_written": 0, "wall_seconds": 0.0,
            "engine_seconds": 0.0, "runs": runs} | figures


def _feed(client: TestClient, tenant: Tenant, clock: Clock) -> tuple[dict, dict]:
    engine = client.app.state.engine
    a = create_pipeline(client, tenant, state="paused")
    b = create_pipeline(client, tenant, state="paused")
    run_once(engine, clock, a["id"], records=10, written=10, bytes_read=100, bytes_written=1000)
    clock.now = T0 + timedelta(hours=1)
    run_once(engine, clock, a["id"], records=20, written=20, bytes_read=200, bytes_written=2000)
    clock.now = T0 + timedelta(days=1)
    run_once(engine, clock, b["id"], records=5, written=4, quarantined=1, bytes_read=50)
    return a, b


def test_a_tenant_reads_its_usage_by_hour_and_by_day(client: TestClient, tenant: Tenant, other_tenant: Tenant, clock: Clock) -> None:
    a, b = _feed(client, tenant, clock)
    run_once(client.app.state.engine, clock, create_pipeline(client, other_tenant, state="paused")["id"],
             records=999, written=999)
    one = {"wall_seconds": 30.0, "engine_seconds": 20.0, "runs": {"succeeded": 1}}

    hourly = client.get("/usage", params=RANGE, headers=tenant.viewer)
    assert hourly.status_code == 200, hourly.text
    assert hourly.json() == {"from": "2026-11-20T00:00:00Z", "to": "2026-11-22T00:00:00Z", "granularity": "hour",
                             "pipeline_id": None, "items": [
        _row(tenant.id, a, "2026-11-20T10:00:00Z", records_read=10, rows_written=10, bytes_read=100,
             bytes_written=1000, **one),
        _row(tenant.id, a, "2026-11-20T11:00:00Z", records_read=20, rows_written=20, bytes_read=200,
             bytes_written=2000, **one),
        _row(tenant.id, b, "2026-11-21T10:00:00Z", records_read=5, rows_written=4, rows_quarantined=1,
             bytes_read=50, **one),
    ]}

    daily = client.get("/usage", params=RANGE | {"granularity": "day"}, headers=tenant.viewer)
    assert daily.json()["items"] == [
        _row(tenant.id, a, "2026-11-20T00:00:00Z", records_read=30, rows_written=30, bytes_read=300,
             bytes_written=3000, wall_seconds=60.0, engine_seconds=40.0, runs={"succeeded": 2}),
        _row(tenant.id, b, "2026-11-21T00:00:00Z", records_read=5, rows_written=4, rows_quarantined=1,
             bytes_read=50, **one),
    ]

    narrowed = client.get("/usage", params={"from": "2026-11-20T11:00:00Z", "to": "2026-11-21T00:00:00Z",
                                            "pipeline_id": a["id"]}, headers=tenant.viewer)
    assert narrowed.json() == {"from": "2026-11-20T11:00:00Z", "to": "2026-11-21T00:00:00Z", "granularity": "hour",
                               "pipeline_id": a["id"], "items": [
        _row(tenant.id, a, "2026-11-20T11:00:00Z", records_read=20, rows_written=20, bytes_read=200,
             bytes_written=2000, **one)]}


def test_usage_as_csv(client: TestClient, tenant: Tenant, clock: Clock) -> None:
    a, b = _feed(client, tenant, clock)
    header = ("tenant_id,pipeline_id,pipeline_name,bucket,records_read,rows_written,rows_quarantined,rows_violating,"
              "bytes_read,"
              "bytes_written,wall_seconds,engine_seconds,runs_succeeded,runs_failed,runs_retried,runs_cancelled,"
              "runs_skipped\n")
    expected = header + (
        f"{tenant.id},{a['id']},{a['name']},2026-11-20T00:00:00Z,30,30,0,0,300,3000,60.0,40.0,2,0,0,0,0\n"
        f"{tenant.id},{b['id']},{b['name']},2026-11-21T00:00:00Z,5,4,1,0,50,0,30.0,20.0,1,0,0,0,0\n")
    by_accept = client.get("/usage", params=RANGE | {"granularity": "day"},
                           headers=tenant.viewer | {"Accept": "text/csv"})
    by_param = client.get("/usage", params=RANGE | {"granularity": "day", "format": "csv"}, headers=tenant.viewer)
    for response in (by_accept, by_param):
        assert response.status_code == 200
        assert response.headers["content-type"] == "text/csv; charset=utf-8"
        assert response.text == expected


def test_the_operator_reads_one_tenant_and_every_tenant(client: TestClient, tenant: Tenant, other_tenant: Tenant, clock: Clock) -> None:
    _feed(client, tenant, clock)
    clock.now = T0
    run_once(client.app.state.engine, clock, create_pipeline(client, other_tenant, state="paused")["id"],
             records=1, written=1)
    mine = client.get("/usage", params=RANGE, headers=tenant.viewer).json()
    assert client.get(f"/tenants/{tenant.id}/usage", params=RANGE, headers=operator()).json() == mine

    across = client.get("/usage/tenants", params=RANGE | {"granularity": "day"}, headers=operator())
    assert across.status_code == 200
    one = {"wall_seconds": 30.0, "engine_seconds": 20.0, "runs": {"succeeded": 1}}
    expected = sorted([
        _row(tenant.id, None, "2026-11-20T00:00:00Z", records_read=30, rows_written=30, bytes_read=300,
             bytes_written=3000, wall_seconds=60.0, engine_seconds=40.0, runs={"succeeded": 2}),
        _row(other_tenant.id, None, "2026-11-20T00:00:00Z", records_read=1, rows_written=1, **one),
        _row(tenant.id, None, "2026-11-21T00:00:00Z", records_read=5, rows_written=4, rows_quarantined=1,
             bytes_read=50, **one),
    ], key=lambda r: (r["bucket"], r["tenant_id"]))
    assert across.json()["items"] == expected


def test_roles_404_and_422(client: TestClient, tenant: Tenant, other_tenant: Tenant, clock: Clock) -> None:
    theirs = create_pipeline(client, other_tenant, state="paused")
    assert_auth_refused(client, "GET", "/usage", tenant, "viewer")
    assert_problem(client.get("/usage", params={"pipeline_id": theirs["id"]}, headers=tenant.viewer), 404)
    assert_problem(client.get("/usage", params={"pipeline_id": str(uuid.uuid4())}, headers=tenant.viewer), 404)
    for path in (f"/tenants/{tenant.id}/usage", "/usage/tenants"):
        assert_problem(client.get(path), 401)
        assert_problem(client.get(path, headers=tenant.admin), 403)
    assert_problem(client.get(f"/tenants/{uuid.uuid4()}/usage", headers=operator()), 404)
    assert_problem(client.get(f"/tenants/{tenant.id}/usage", params={"pipeline_id": theirs["id"]},
                              headers=operator()), 404)
    for params, field in (
        ({"from": "2026-11-21T00:00:00Z", "to": "2026-11-20T00:00:00Z"}, "query.from"),
        ({"from": "2026-01-01T00:00:00Z", "to": "2026-03-01T00:00:00Z"}, "query.from"),  # over 31 days by hour
        ({"from": "2026-11-20T00:00:00", "to": "2026-11-21T00:00:00Z"}, "query.from"),  # no time zone
        ({"granularity": "week"}, "query.granularity"),
        ({"format": "xml"}, "query.format"),
        ({"pipeline_id": "nope"}, "query.pipeline_id"),
    ):
        for path, headers in (("/usage", tenant.viewer), (f"/tenants/{tenant.id}/usage", operator()),
                              ("/usage/tenants", operator())):
            assert_problem(client.get(path, params=params, headers=headers), 422, fields={field})
    # a year by day is allowed
    year = client.get("/usage", params={"from": "2026-01-01T00:00:00Z", "to": "2027-01-01T00:00:00Z",
                                        "granularity": "day"}, headers=tenant.viewer)
    assert year.status_code == 200 and year.json()["items"] == []
