"""The portal in headless Chromium against the app served over HTTP: what a tenant does with a
mouse and keyboard. Runs are completed without Spark here (``run_without_spark``: the real
lifecycle and planning against the sandbox Kafka); ``test_portal_run_end_to_end`` drives a real
worker and spark-submit. Every page is saved under ``artifacts/portal/``."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from tests.factories import create_sandbox_pipeline, make_tenant
from tests.fixtures.kafka import produce_keyed
from tests.offsets.helpers import run_without_spark
from tests.portal.helpers import screenshot


def sign_in(page: Page, base_url: str, key: str) -> None:
    page.goto(f"{base_url}/portal")
    expect(page).to_have_url(re.compile(r"/portal/login"))
    page.get_by_label("API key").fill(key)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Pipelines", level=1)).to_be_visible()


def add_connection(page: Page, base_url: str, name: str, bootstrap: str) -> None:
    page.goto(f"{base_url}/portal/connections")
    page.get_by_label("Name", exact=True).fill(name)
    page.get_by_label("Bootstrap servers").fill(bootstrap)
    page.get_by_role("button", name="Save connection").click()
    expect(page.get_by_role("status")).to_contain_text("The connection was saved")


def add_pipeline(page: Page, base_url: str, *, name: str, connection: str, topic: str, path: str) -> None:
    page.goto(f"{base_url}/portal/pipelines/new")
    page.get_by_label("Name", exact=True).fill(name)
    value = page.locator("#connection_id option", has_text=f"{connection} (").first.get_attribute("value")
    page.get_by_label("Connection").select_option(value)
    page.get_by_label("Topics").fill(topic)
    page.get_by_label("Value format").select_option("string")
    page.get_by_label("Path under the tenant's storage root").fill(path)
    page.get_by_label("Manual runs only").check()
    page.get_by_label("Initial state").select_option("paused")
    page.get_by_role("button", name="Create pipeline").click()
    expect(page.get_by_role("heading", name=name, level=1)).to_be_visible()


def total_lag(page: Page) -> int:
    return int(page.locator("#total-lag").inner_text().replace(",", ""))


def test_sign_in_add_connection_and_pipeline_run_and_replay(
    client, live_server, browser_page: Page, sandbox_kafka, kafka_topic
) -> None:
    page, base = browser_page, live_server
    tenant = make_tenant(client)
    topic = kafka_topic(partitions=3)
    placed = produce_keyed(sandbox_kafka.bootstrap_servers, topic, 30)

    page.goto(f"{base}/portal")
    screenshot(page, "login")
    sign_in(page, base, tenant.keys["editor"])

    add_connection(page, base, "sandbox", sandbox_kafka.bootstrap_servers)
    page.get_by_role("button", name="Test connection sandbox").click()
    expect(page.locator("#test-result")).to_contain_text("Connection test passed")
    expect(page.locator("#test-result")).to_contain_text("3 brokers")
    screenshot(page, "connections")

    page.goto(f"{base}/portal/pipelines/new")
    page.get_by_label("Name", exact=True).fill("not a name!")
    page.get_by_label("Cron expression").check()
    expect(page.get_by_label("Interval (seconds)")).to_be_hidden()  # the script shows the chosen kind's inputs
    page.get_by_label("Cron (minute hour day month weekday)").fill("every minute")
    page.get_by_role("button", name="Create pipeline").click()
    expect(page.locator("#err-name")).to_be_visible()
    expect(page.locator("#err-cron")).to_contain_text("cron")
    expect(page.locator("#err-connection_id")).to_be_visible()
    expect(page.get_by_label("Name", exact=True)).to_have_attribute("aria-invalid", "true")
    screenshot(page, "pipeline-new-errors")

    add_pipeline(page, base, name="orders", connection="sandbox", topic=topic, path="bronze/orders")
    expect(page.get_by_role("status")).to_contain_text("The pipeline was created")
    assert total_lag(page) == 30
    pipeline_url = page.url.split("?")[0]
    pipeline_id = pipeline_url.rsplit("/", 1)[1]

    run = run_without_spark(client, tenant, pipeline_id)
    page.goto(pipeline_url)
    assert total_lag(page) == 0
    expect(page.locator("table.offsets tbody tr")).to_have_count(3)
    expect(page.get_by_role("link", name="#1")).to_be_visible()
    expect(page.locator("figure.chart")).to_have_count(3)  # records, duration, lag per partition
    screenshot(page, "pipeline")

    page.get_by_role("link", name="#1").click()
    expect(page.locator("#run-state")).to_contain_text("succeeded")
    plan = page.get_by_role("region", name="Plan per partition").locator("tbody tr")
    expect(plan).to_have_count(3)
    planned = [int(plan.nth(i).locator("td").nth(4).inner_text()) for i in range(3)]
    assert planned == [p["end"] - p["start"] for p in run["partitions"]] and sum(planned) == 30
    screenshot(page, "run")

    page.goto(f"{base}/portal/pipelines")
    row = page.get_by_role("row", name=re.compile("orders"))
    expect(row).to_contain_text("succeeded")
    expect(row.locator("td[data-lag]")).to_have_attribute("data-lag", "0")
    screenshot(page, "pipelines")

    # Replay: an out-of-range explicit offset is refused beside its field, then a dry run and apply.
    page.goto(pipeline_url)
    page.get_by_role("link", name="Replay…").click()
    page.get_by_label("The offsets entered above").check()
    page.get_by_label(f"New offset for {topic} partition 0").fill("999")
    for p in (1, 2):
        page.get_by_label(f"Replay {topic} partition {p}").uncheck()
    page.get_by_role("button", name="Preview (dry run)").click()
    expect(page.locator(f"#err-offset-{topic}-0")).to_contain_text("outside")
    screenshot(page, "replay-error")

    page.get_by_label("Earliest offset still in the log").check()
    for p in (1, 2):
        page.get_by_label(f"Replay {topic} partition {p}").check()
    page.get_by_role("button", name="Preview (dry run)").click()
    preview = page.locator("#preview tbody tr")
    expect(preview).to_have_count(3)
    for p in range(3):
        cells = preview.nth(p).locator("td")
        expect(cells.nth(2)).to_have_text(str(len(placed.get(p, []))))
        expect(cells.nth(3)).to_have_text("0")
    screenshot(page, "replay-preview")
    assert client.get(f"/pipelines/{pipeline_id}/offsets", headers=tenant.viewer).json()["total_lag"] == 0

    page.get_by_role("button", name="Apply this change").click()
    expect(page.get_by_role("status")).to_contain_text("The offsets were moved")
    assert total_lag(page) == 30
    offsets = client.get(f"/pipelines/{pipeline_id}/offsets", headers=tenant.viewer).json()
    assert {p["partition"]: p["committed"] for p in offsets["partitions"]} == {0: 0, 1: 0, 2: 0}


def test_a_viewer_sees_state_but_no_write_controls_even_at_phone_width(
    client, live_server, chromium, sandbox_kafka, kafka_topic
) -> None:
    tenant = make_tenant(client)
    pipeline = create_sandbox_pipeline(client, tenant, sandbox_kafka.bootstrap_servers, [kafka_topic(partitions=2)])
    context = chromium.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    page = context.new_page()
    try:
        sign_in(page, live_server, tenant.keys["viewer"])
        page.get_by_role("link", name=pipeline["name"]).click()
        expect(page.get_by_role("heading", name=pipeline["name"])).to_be_visible()
        expect(page.locator(".head .badge")).to_have_text("‖ paused")
        for name in ("Run now", "Pause", "Resume"):
            expect(page.get_by_role("button", name=name)).to_have_count(0)
        expect(page.get_by_role("link", name="Replay…")).to_have_count(0)
        expect(page.get_by_role("link", name="New pipeline")).to_have_count(0)
        width = page.evaluate("document.documentElement.scrollWidth")
        wide = page.evaluate("""[...document.querySelectorAll('body *')].filter(e => !e.closest('.scroll')
            && e.getBoundingClientRect().right > 391).map(e => e.tagName + '.' + e.className)""")
        assert width <= 390, f"the page scrolls sideways at phone width ({width}px): {wide}"
        screenshot(page, "pipeline-viewer-phone")
        page.goto(f"{live_server}/portal/connections")
        expect(page.get_by_role("button", name=re.compile("Test"))).to_have_count(0)
        expect(page.get_by_role("button", name="Save connection")).to_have_count(0)
        # The keyboard reaches the sign-out control.
        page.keyboard.press("Tab")
        expect(page.locator(".skip")).to_be_focused()
    finally:
        context.close()


def test_registry_inputs_follow_the_chosen_auth_and_value_format(client, live_server, browser_page: Page) -> None:
    page, base = browser_page, live_server
    tenant = make_tenant(client)
    sign_in(page, base, tenant.keys["editor"])

    page.goto(f"{base}/portal/connections")
    expect(page.get_by_label("Registry username")).to_be_hidden()
    expect(page.get_by_label("Registry token")).to_be_hidden()
    page.get_by_label("Registry authentication").select_option("basic")
    expect(page.get_by_label("Registry username")).to_be_visible()
    expect(page.get_by_label("Registry password")).to_be_visible()
    page.get_by_label("Registry authentication").select_option("bearer")
    expect(page.get_by_label("Registry token")).to_be_visible()
    expect(page.get_by_label("Registry password")).to_be_hidden()
    page.get_by_label("Name", exact=True).fill("registry")
    page.get_by_label("Bootstrap servers").fill("127.0.0.1:9092")
    page.get_by_label("Registry URL").fill("http://127.0.0.1:8081")
    page.get_by_label("Registry token").fill("sr-browser-token")
    page.get_by_role("button", name="Save connection").click()
    expect(page.locator("dl.def")).to_contain_text("http://127.0.0.1:8081 (bearer auth)")
    page.goto(f"{base}/portal/connections")
    expect(page.get_by_role("row", name=re.compile("^registry "))).to_contain_text("http://127.0.0.1:8081 (bearer)")

    page.goto(f"{base}/portal/pipelines/new")
    expect(page.get_by_label("Subject of the values (optional)")).to_be_hidden()
    page.get_by_label("Value format").select_option("avro")
    expect(page.get_by_label("Subject of the values (optional)")).to_be_visible()
    expect(page.get_by_label("Schema version (optional)")).to_be_visible()
    expect(page.get_by_label("Schema of JSON values (Spark DDL)")).to_be_hidden()
    page.get_by_label("Value format").select_option("json")
    expect(page.get_by_label("Schema of JSON values (Spark DDL)")).to_be_visible()
    expect(page.get_by_label("Subject of the values (optional)")).to_be_hidden()
    screenshot(page, "pipeline-new-json")
