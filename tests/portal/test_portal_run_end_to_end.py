"""The portal driving a real run: Chromium → the API over HTTP → Redis → ``inlet worker`` →
spark-submit → Delta, against the sandbox Kafka. Its screenshots go to ``artifacts/portal/``; with
``INLET_REFRESH_SCREENSHOTS=1`` it also refreshes the README's ``docs/img/portal-pipeline.png``."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from tests.factories import make_tenant
from tests.fixtures.kafka import produce_keyed
from tests.portal.helpers import screenshot, serve
from tests.portal.test_portal_browser import add_connection, add_pipeline, sign_in, total_lag
from tests.runs.helpers import delta_coordinates

pytestmark = pytest.mark.slow


def _run_now_and_wait(page: Any) -> None:
    page.get_by_role("button", name="Run now").click()
    expect(page.get_by_role("status")).to_contain_text("The run is queued")
    # The page refreshes itself (portal.js) until the run ends.
    expect(page.locator("#run-state")).to_contain_text("succeeded", timeout=240_000)


def test_portal_run_end_to_end(stack, browser_page, sandbox_kafka, kafka_topic) -> None:
    page = browser_page
    tenant = make_tenant(stack.client)
    topic = kafka_topic(partitions=3)
    produce_keyed(sandbox_kafka.bootstrap_servers, topic, 40)
    stack.start_worker()

    with serve(stack.client.app) as base:
        sign_in(page, base, tenant.keys["editor"])
        add_connection(page, base, "sandbox", sandbox_kafka.bootstrap_servers)
        add_pipeline(page, base, name="orders-e2e", connection="sandbox", topic=topic, path="bronze/orders-e2e")
        pipeline_url = page.url.split("?")[0]
        assert total_lag(page) == 40

        _run_now_and_wait(page)
        expect(page.locator("#records-read")).to_have_text("40", timeout=30_000)
        expect(page.get_by_role("region", name="Log")).not_to_contain_text("No log lines yet")
        screenshot(page, "e2e-run")

        page.goto(pipeline_url)
        assert total_lag(page) == 0
        screenshot(page, "e2e-pipeline-after-run")
        page.goto(f"{base}/portal/pipelines")
        row = page.get_by_role("row", name="orders-e2e")
        expect(row).to_contain_text("succeeded")
        expect(row.locator("td[data-lag]")).to_have_attribute("data-lag", "0")

        # Replay partition 0 from its earliest offset (append): a dry run first, then apply it.
        page.goto(pipeline_url)
        page.get_by_role("link", name="Replay…").click()
        for p in (1, 2):
            page.get_by_label(f"Replay {topic} partition {p}").uncheck()
        page.get_by_label("Earliest offset still in the log").check()
        page.get_by_role("button", name="Preview (dry run)").click()
        expect(page.locator("#preview tbody tr")).to_have_count(1)
        replayed = int(page.locator("#preview tbody tr td").nth(2).inner_text())
        expect(page.locator("#preview tbody tr td").nth(3)).to_have_text("0")
        screenshot(page, "e2e-replay-preview")
        page.get_by_role("button", name="Apply this change").click()
        expect(page.get_by_role("status")).to_contain_text("The offsets were moved")
        assert total_lag(page) == replayed

        _run_now_and_wait(page)
        expect(page.locator("#records-read")).to_have_text(str(replayed), timeout=30_000)

        # New records: the next run reads those alone, and the charts show the three runs.
        produce_keyed(sandbox_kafka.bootstrap_servers, topic, 25)
        page.goto(pipeline_url)
        assert total_lag(page) == 25
        _run_now_and_wait(page)
        expect(page.locator("#records-read")).to_have_text("25", timeout=30_000)
        page.goto(pipeline_url)
        assert total_lag(page) == 0
        expect(page.locator("figure.chart")).to_have_count(3)  # records, duration, lag per partition
        expect(page.locator("#chart-records rect.bar")).to_have_count(3)
        screenshot(page, "e2e-pipeline", docs="portal-pipeline")

    pipeline_id = pipeline_url.rsplit("/", 1)[1]
    uri = stack.client.get(f"/pipelines/{pipeline_id}", headers=tenant.viewer).json()["status"]["target_uri"]
    rows = delta_coordinates(uri)
    assert len(rows) == 40 + replayed + 25  # append mode: partition 0 written twice
