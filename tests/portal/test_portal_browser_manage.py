"""Managing a tenant's objects in headless Chromium, as a person does with a mouse, a keyboard and
sometimes a phone: connections created, edited, rotated and deleted; a pipeline of each target type
created, edited and deleted; an edit conflict resolved; the offsets' history and the run that wrote an
offset; API keys created, copied and revoked with the keyboard alone. Runs are completed without
Spark (``run_without_spark``). Each page is saved under ``artifacts/portal/``, and the documentation's
pictures (``docs/img/``) with ``INLET_REFRESH_SCREENSHOTS=1``."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from fastapi.testclient import TestClient
from playwright.sync_api import Page, expect

from tests.factories import Tenant, create_connection, create_pipeline, create_sandbox_pipeline, make_tenant
from tests.fixtures.kafka import SandboxKafka, produce_keyed
from tests.offsets.helpers import run_without_spark
from tests.portal.helpers import screenshot
from tests.portal.test_portal_browser import add_connection, add_pipeline, sign_in


def _api(client: Any, tenant: Tenant, path: str) -> Any:
    response = client.get(path, headers=tenant.viewer)
    assert response.status_code == 200, response.text
    return response.json()


def _no_sideways_scroll(page: Page) -> None:
    width = page.evaluate("document.documentElement.scrollWidth")
    limit = page.viewport_size["width"] + 1  # not innerWidth: a mobile viewport widens to fit what overflows
    wide = page.evaluate(f"""[...document.querySelectorAll('body *')].filter(e => !e.closest('.scroll')
        && e.getBoundingClientRect().right > {limit}).map(e => e.tagName + '.' + e.className + '#' + e.id)""")
    assert width <= page.viewport_size["width"], f"{page.url} scrolls sideways ({width}px): {wide}"


def test_a_connection_is_created_edited_rotated_and_deleted(client: TestClient, live_server: str, browser_page: Page) -> None:
    page, base = browser_page, live_server
    tenant = make_tenant(client)
    sign_in(page, base, tenant.keys["editor"])

    page.goto(f"{base}/portal/connections")
    page.get_by_label("Name", exact=True).fill("prod")
    page.get_by_label("Bootstrap servers").fill("broker-1.example.com:9093")
    expect(page.get_by_label("Username", exact=True)).to_be_hidden()  # PLAINTEXT has no SASL inputs
    page.get_by_label("Security protocol").select_option("SASL_SSL")
    page.get_by_label("Mechanism").select_option("SCRAM-SHA-512")
    expect(page.get_by_label("OAuth client id")).to_be_hidden()
    page.get_by_label("Username", exact=True).fill("ingest")
    page.get_by_label("Password", exact=True).fill("first-Pa55word")
    expect(page.get_by_label("CA certificate (PEM, optional)")).to_be_visible()  # SASL_SSL: the TLS inputs
    page.get_by_label("Client options (optional)").fill("client.id=inlet-portal")
    page.get_by_role("button", name="Save connection").click()
    expect(page.get_by_role("heading", name="prod", level=1)).to_be_visible()
    expect(page.get_by_role("status")).to_contain_text("The connection was saved")
    expect(page.locator("#credentials")).to_have_text("stored, version 1")
    conn_id = page.url.split("/")[-1].split("?")[0]

    page.get_by_role("link", name="Edit…").click()
    expect(page.get_by_label("Username", exact=True)).to_have_value("")  # write-only: never shown again
    expect(page.get_by_text("A username and password are stored (version 1)")).to_be_visible()
    page.get_by_label("Bootstrap servers").fill("broker-1.example.com:9093,broker-2.example.com:9093")
    page.get_by_label("Registry URL").fill("https://registry.example.com")
    page.get_by_label("Registry authentication").select_option("basic")
    page.get_by_label("Registry username").fill("sr")
    page.get_by_label("Registry password").fill("sr-Pa55")
    page.get_by_role("button", name="Save connection").click()
    expect(page.get_by_role("status")).to_contain_text("The connection was saved")
    expect(page.locator("#credentials")).to_have_text("stored, version 2")

    page.get_by_label("New username").fill("ingest-2")
    page.get_by_label("New password").fill("second-Pa55word")
    page.get_by_role("button", name="Rotate credentials").click()
    expect(page.get_by_role("status")).to_contain_text("The credentials were rotated")
    expect(page.locator("#credentials")).to_have_text("stored, version 3")
    screenshot(page, "connection", docs="portal-connection")
    secret = client.app.state.secrets.read(f"tenants/{tenant.id}/connections/{conn_id}")
    assert secret == {"credentials": {"username": "ingest-2", "password": "second-Pa55word"},
                      "registry_credentials": {"username": "sr", "password": "sr-Pa55"}}
    read = _api(client, tenant, f"/connections/{conn_id}")
    assert read["bootstrap_servers"] == "broker-1.example.com:9093,broker-2.example.com:9093"
    assert read["options"] == {"client.id": "inlet-portal"} and read["schema_registry"]["auth"] == "basic"

    page.get_by_role("link", name="Delete…").click()
    expect(page.locator(".lost")).to_contain_text("Every version of its credentials (now version 3)")
    page.get_by_label("Type the connection’s name, prod, to confirm").fill("prod")
    page.get_by_role("button", name="Delete connection prod").click()
    expect(page.get_by_role("status")).to_contain_text("The connection was deleted")
    expect(page.get_by_text("No connections yet. Add the first one with the form below")).to_be_visible()
    assert client.get(f"/connections/{conn_id}", headers=tenant.viewer).status_code == 404


def test_a_pipeline_of_each_target_type_is_created_edited_and_deleted(
    client: TestClient, live_server: str, browser_page: Page, sandbox_kafka: SandboxKafka, kafka_topic: Callable[..., str]
) -> None:
    page, base = browser_page, live_server
    tenant = make_tenant(client)
    topic = kafka_topic(partitions=2)
    produce_keyed(sandbox_kafka.bootstrap_servers, topic, 12)
    sign_in(page, base, tenant.keys["editor"])
    add_connection(page, base, "sandbox", sandbox_kafka.bootstrap_servers)

    # A Delta target, then edited onto a cron schedule in a time zone: the next firings are shown.
    add_pipeline(page, base, name="to-delta", connection="sandbox", topic=topic, path="bronze/to-delta")
    delta_id = page.url.split("/")[-1].split("?")[0]
    page.get_by_role("link", name="Edit…").click()
    expect(page.get_by_label("Path under the tenant's storage root")).to_have_value("bronze/to-delta")
    page.get_by_label("Cron expression").check()
    page.get_by_label("Cron (minute hour day month weekday)").fill("30 6 * * 1-5")
    page.get_by_label("Time zone").fill("Europe/Paris")
    page.get_by_label("State", exact=True).select_option("active")
    page.get_by_role("button", name="Save pipeline").click()
    expect(page.get_by_role("status")).to_contain_text("The pipeline was saved")
    expect(page.locator("#firings li")).to_have_count(5)
    expect(page.locator("#firings li").first).to_contain_text("06:30 Europe/Paris")
    assert _api(client, tenant, f"/pipelines/{delta_id}")["schedule"] == {"cron": "30 6 * * 1-5", "timezone": "Europe/Paris"}

    # A Kafka target that creates its topic, reading topics by pattern.
    page.goto(f"{base}/portal/pipelines/new")
    page.get_by_label("Name", exact=True).fill("to-kafka")
    value = page.locator("#connection_id option", has_text="sandbox (").first.get_attribute("value")
    page.get_by_label("Connection", exact=True).select_option(value)
    page.get_by_label("By pattern (a regular expression)").check()
    expect(page.get_by_label("Topics", exact=True)).to_be_hidden()
    page.get_by_label("Topic pattern").fill(re.escape(topic))
    page.get_by_label("Value format").select_option("string")
    page.get_by_label("A Kafka topic").check()
    expect(page.get_by_label("Path under the tenant's storage root")).to_be_hidden()
    page.get_by_label("Cluster to write to").select_option(value)
    page.get_by_label("Target topic").fill(f"{topic}-copy")
    page.get_by_label("Create the topic if it does not exist").check()
    page.get_by_label("Partitions of a created topic").fill("2")
    page.get_by_label("Topic configs (optional)").fill("retention.ms=86400000")
    screenshot(page, "pipeline-form-kafka", docs="portal-pipeline-form")
    page.get_by_role("button", name="Create pipeline").click()
    expect(page.get_by_role("status")).to_contain_text("The pipeline was created")
    expect(page.locator("dl.def")).to_contain_text(f"Kafka topic {topic}-copy (created with 2 partitions if missing)")
    kafka_id = page.url.split("/")[-1].split("?")[0]
    assert _api(client, tenant, f"/pipelines/{kafka_id}")["target"] == {
        "type": "kafka", "connection_id": value, "topic": f"{topic}-copy",
        "create_topic": {"partitions": 2, "config": {"retention.ms": "86400000"}}}
    page.get_by_role("link", name="Edit…").click()
    page.get_by_label("Target topic").fill(f"{topic}-mirror")
    page.get_by_role("button", name="Save pipeline").click()
    expect(page.get_by_role("status")).to_contain_text("The pipeline was saved")
    assert _api(client, tenant, f"/pipelines/{kafka_id}")["target"]["topic"] == f"{topic}-mirror"

    for pipeline_id, name in ((kafka_id, "to-kafka"), (delta_id, "to-delta")):
        page.goto(f"{base}/portal/pipelines/{pipeline_id}")
        page.get_by_role("link", name="Delete…").click()
        expect(page.locator("#lost")).to_contain_text("0 runs")
        if name == "to-delta":
            screenshot(page, "pipeline-delete", docs="portal-pipeline-delete")
        page.get_by_label(f"Type the pipeline’s name, {name}, to confirm").fill(name)
        page.get_by_role("button", name=f"Delete pipeline {name}").click()
        expect(page.get_by_role("status")).to_contain_text("The pipeline was deleted")
        assert client.get(f"/pipelines/{pipeline_id}", headers=tenant.viewer).status_code == 404
    expect(page.get_by_role("link", name="Create the first one")).to_be_visible()


def test_two_people_editing_at_once_get_a_conflict_they_can_resolve(client: TestClient, live_server: str, chromium: Any) -> None:
    tenant = make_tenant(client)
    pipeline = create_pipeline(client, tenant, name="orders", state="paused")
    pages = []
    for role in ("editor", "admin"):
        context = chromium.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        page.set_default_timeout(20_000)
        sign_in(page, live_server, tenant.keys[role])
        page.goto(f"{live_server}/portal/pipelines/{pipeline['id']}/edit")
        pages.append(page)
    first, second = pages
    try:
        first.get_by_label("Every N seconds").check()
        first.get_by_label("Interval (seconds)").fill("600")
        first.get_by_role("button", name="Save pipeline").click()
        expect(first.get_by_role("status")).to_contain_text("The pipeline was saved")

        second.get_by_label("Most records per run (optional)").fill("500")
        second.get_by_role("button", name="Save pipeline").click()
        conflict = second.locator("#conflict")
        expect(conflict).to_contain_text("Someone else saved this pipeline after you opened the form")
        expect(conflict).to_contain_text("key “editor-key” (editor)")  # the admin sees who
        rows = conflict.locator("tbody tr")
        expect(rows).to_have_count(4)
        expect(rows.filter(has_text="schedule.interval_seconds")).to_contain_text("600")
        expect(second.get_by_label("Most records per run (optional)")).to_have_value("500")  # nothing typed is lost
        assert _api(client, tenant, f"/pipelines/{pipeline['id']}")["schedule"] == {"interval_seconds": 600}
        screenshot(second, "edit-conflict", docs="portal-edit-conflict")

        # Resolved: keep their interval as well as my cap, and save again.
        second.get_by_label("Every N seconds").check()
        second.get_by_label("Interval (seconds)").fill("600")
        second.get_by_role("button", name="Save pipeline").click()
        expect(second.get_by_role("status")).to_contain_text("The pipeline was saved")
        body = _api(client, tenant, f"/pipelines/{pipeline['id']}")
        assert body["schedule"] == {"interval_seconds": 600} and body["source"]["max_offsets_per_run"] == 500
    finally:
        for page in pages:
            page.context.close()


def test_the_offsets_history_and_the_run_that_wrote_an_offset(
    client: TestClient, live_server: str, browser_page: Page, sandbox_kafka: SandboxKafka, kafka_topic: Callable[..., str]
) -> None:
    page, base = browser_page, live_server
    tenant = make_tenant(client)
    topic = kafka_topic(partitions=3)
    pipeline = create_sandbox_pipeline(client, tenant, sandbox_kafka.bootstrap_servers, [topic], name="orders")
    for batch in (40, 25, 60, 10, 35):
        produce_keyed(sandbox_kafka.bootstrap_servers, topic, batch)
        run_without_spark(client, tenant, pipeline["id"])
    sign_in(page, base, tenant.keys["editor"])

    page.goto(f"{base}/portal/pipelines/{pipeline['id']}")
    expect(page.locator("#chart-records rect.bar")).to_have_count(5)
    expect(page.locator("#chart-records rect.bar").first.locator("title")).to_have_text(
        re.compile(r"^Run #1 · \d\d \w{3} \d\d:\d\d UTC · 40 records · succeeded$"))
    expect(page.locator("#chart-lag .series")).to_have_count(3)
    expect(page.locator("#chart-records text").first).to_have_text("0")
    screenshot(page, "pipeline-charts", docs="portal-charts")

    # Replay partition 0 by shifting it back; the history then says who moved what.
    page.get_by_role("link", name="Replay…").click()
    for p in (1, 2):
        page.get_by_label(f"Replay {topic} partition {p}").uncheck()
    page.get_by_label("Shift by a number of offsets").check()
    page.get_by_label("Shift by (negative goes back)").fill("-5")
    page.get_by_role("button", name="Preview (dry run)").click()
    expect(page.locator("#preview-summary")).to_contain_text("1 of 1 partition would move")
    screenshot(page, "replay-shift-preview", docs="portal-replay")
    page.get_by_role("button", name="Apply this change").click()
    expect(page.get_by_role("status")).to_contain_text("The offsets were moved")

    page.get_by_role("link", name="Offsets history").click()
    row = page.locator("#history tbody tr").first
    expect(row).to_contain_text("you")
    expect(row).to_contain_text("shifted; records read again are appended")
    expect(row).to_contain_text(f"{topic}[0]")
    committed = int(row.locator("td").nth(5).inner_text().replace(",", ""))
    page.get_by_label("Topic", exact=True).select_option(topic)
    page.get_by_label("Partition", exact=True).fill("0")
    page.get_by_label("Offset", exact=True).fill(str(committed))
    page.get_by_role("button", name="Look up").click()
    answer = page.locator("#lookup-answer")
    expect(answer).to_contain_text(f"Offset {committed:,} of {topic}[0] was written by run #")
    screenshot(page, "offsets-history", docs="portal-offsets")
    answer.get_by_role("link").first.click()
    expect(page.get_by_role("heading", name=re.compile(r"^Run #\d$"))).to_be_visible()


def test_api_keys_are_created_copied_and_revoked_with_the_keyboard_alone(client: TestClient, live_server: str, chromium: Any) -> None:
    tenant = make_tenant(client)
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server)
    page = context.new_page()
    page.set_default_timeout(20_000)
    try:
        sign_in(page, live_server, tenant.keys["admin"])
        page.goto(f"{live_server}/portal/api-keys")
        page.get_by_label("Name", exact=True).focus()
        page.keyboard.type("ci deploy")
        page.keyboard.press("Tab")
        expect(page.get_by_label("Role")).to_be_focused()
        page.keyboard.press("ArrowDown")  # viewer → editor
        page.keyboard.press("Tab")
        expect(page.get_by_role("button", name="Create key")).to_be_focused()
        page.keyboard.press("Enter")
        issued = page.locator("#issued")
        expect(issued).to_contain_text("New editor key “ci deploy”")
        key = page.locator("#new-key").input_value()
        assert key.startswith("inlet_")
        page.get_by_role("button", name="Copy").focus()
        page.keyboard.press("Enter")
        expect(page.locator("#copy-status")).to_have_text("Copied to the clipboard.")
        assert page.evaluate("navigator.clipboard.readText()") == key
        screenshot(page, "api-keys", docs="portal-api-keys")
        assert client.get("/me", headers={"Authorization": f"Bearer {key}"}).status_code == 200

        page.reload()
        expect(page.locator("#new-key")).to_have_count(0)  # shown once
        row = page.get_by_role("row", name=re.compile("^ci deploy"))
        row.get_by_text("Revoke…").focus()
        page.keyboard.press("Enter")
        page.keyboard.press("Tab")
        expect(page.get_by_role("button", name="Revoke key ci deploy")).to_be_focused()
        page.keyboard.press("Enter")
        expect(page.get_by_role("status")).to_contain_text("The API key was revoked")
        expect(page.get_by_role("row", name=re.compile("^ci deploy"))).to_contain_text("revoked")
        assert client.get("/me", headers={"Authorization": f"Bearer {key}"}).status_code == 401
    finally:
        context.close()


def test_every_page_reads_at_phone_width_and_a_viewer_sees_no_write_control(
    client: TestClient, live_server: str, chromium: Any, sandbox_kafka: SandboxKafka, kafka_topic: Callable[..., str]
) -> None:
    tenant = make_tenant(client)
    topic = kafka_topic(partitions=2)
    produce_keyed(sandbox_kafka.bootstrap_servers, topic, 10)
    pipeline = create_sandbox_pipeline(client, tenant, sandbox_kafka.bootstrap_servers, [topic], name="orders")
    run = run_without_spark(client, tenant, pipeline["id"])
    other = create_connection(client, tenant, name="spare")
    paths = ["/portal/pipelines", f"/portal/pipelines/{pipeline['id']}", f"/portal/pipelines/{pipeline['id']}/offsets",
             f"/portal/runs/{run['id']}", "/portal/connections", f"/portal/connections/{other['id']}"]
    context = chromium.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    page = context.new_page()
    page.set_default_timeout(20_000)
    try:
        sign_in(page, live_server, tenant.keys["viewer"])
        for path in paths:
            page.goto(f"{live_server}{path}")
            _no_sideways_scroll(page)
            for name in ("Edit…", "Delete…", "Replay…", "New pipeline", "API keys"):
                expect(page.get_by_role("link", name=name, exact=True)).to_have_count(0)
            expect(page.locator("main form[method=post]")).to_have_count(0)
        page.goto(f"{live_server}/portal/pipelines/{pipeline['id']}")
        screenshot(page, "pipeline-viewer-phone-charts", docs="portal-phone")

        page.get_by_role("button", name="Sign out").click()
        sign_in(page, live_server, tenant.keys["admin"])  # an admin's pages at phone width too
        for path in (*paths, f"/portal/pipelines/{pipeline['id']}/edit", f"/portal/pipelines/{pipeline['id']}/replay",
                     f"/portal/pipelines/{pipeline['id']}/delete", f"/portal/connections/{other['id']}/edit",
                     "/portal/api-keys", "/portal/pipelines/new"):
            page.goto(f"{live_server}{path}")
            _no_sideways_scroll(page)
    finally:
        context.close()
