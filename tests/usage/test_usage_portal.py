"""The portal's usage page: each pipeline's totals over the range and a chart of records read per hour
(or day), only the signed-in tenant's; and the chart's geometry."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta

from fastapi.testclient import TestClient

from api.core.db import utcnow
from api.portal.charts import BOTTOM, usage_chart
from api.usage.schemas import RunsByOutcome, UsageRow
from tests.factories import Tenant, create_pipeline
from tests.portal.helpers import sign_in
from tests.usage.helpers import Clock, run_once


def _row(bucket: datetime, records: int) -> UsageRow:
    return UsageRow(tenant_id=uuid.uuid4(), pipeline_id=uuid.uuid4(), pipeline_name="p", bucket=bucket,
                    records_read=records, rows_written=records, rows_quarantined=0, rows_violating=0, bytes_read=0,
                    bytes_written=0,
                    wall_seconds=2.5, engine_seconds=1.0,
                    runs=RunsByOutcome(succeeded=1, failed=0, retried=0, cancelled=0, skipped=0))


def test_a_usage_chart_has_a_slot_per_bucket_and_a_bar_where_there_was_usage() -> None:
    start = datetime(2026, 11, 20, tzinfo=UTC)
    chart = usage_chart("orders", [_row(start, 100), _row(start + timedelta(hours=3), 40)], start=start,
                        end=start + timedelta(hours=4), step=timedelta(hours=1))
    assert chart.label == "orders: records read per hour"
    assert chart.summary == "orders: 140 records read in 2 of 4 hours"
    assert chart.x_title == "each hour (UTC), oldest left"
    assert [t.label for t in chart.y_ticks] == ["0", "25", "50", "75", "100"]
    assert [t.label for t in chart.x_ticks] == ["20 Nov 00:00", "20 Nov 02:00", "20 Nov 03:00"]
    assert [(b.x, b.width, b.y, b.title) for b in chart.bars] == [
        (63.25, 24.0, 8.0, "20 Nov 00:00 UTC · 100 records read · 100 rows written · 2.5 s of runs"),
        (250.75, 24.0, 76.4, "20 Nov 03:00 UTC · 40 records read · 40 rows written · 2.5 s of runs"),
    ]
    assert all(round(b.y + b.height, 2) == BOTTOM for b in chart.bars)


def test_the_usage_page_shows_the_tenants_pipelines_only(client: TestClient, tenant: Tenant, other_tenant: Tenant, clock: Clock) -> None:
    engine = client.app.state.engine
    mine = create_pipeline(client, tenant, state="paused")
    theirs = create_pipeline(client, other_tenant, state="paused")
    clock.now = utcnow()
    run_once(engine, clock, mine["id"], records=1200, written=1100, quarantined=100, bytes_read=50_000,
             bytes_written=9_000)
    run_once(engine, clock, theirs["id"], records=5, written=5)
    sign_in(client, tenant.viewer["Authorization"].removeprefix("Bearer "))

    for granularity in ("hour", "day"):
        page = client.get("/portal/usage", params={"granularity": granularity})
        assert page.status_code == 200, page.text
        text = " ".join(page.text.split())
        assert (f'<td>{mine["name"]}</td> <td class="num">1,200</td> <td class="num">1,100</td> '
                '<td class="num">100</td> <td class="num">50,000</td> <td class="num">9,000</td> '
                '<td class="num">30.0</td> <td class="num">1</td>') in text
        assert f'id="chart-usage-{mine["id"]}"' in text
        unit = "hour" if granularity == "hour" else "day"
        assert f'<figcaption>{mine["name"]}: records read per {unit}</figcaption>' in text
        assert len(re.findall(r'<rect class="bar', text)) == 1
        assert theirs["name"] not in text and theirs["id"] not in text
        assert 'href="/portal/usage" aria-current="page"' in text

    assert client.get("/portal/usage", params={"granularity": "week"}).status_code == 422
