"""A keyed table (a Delta target in mode upsert: key, sequence_by, changes) through the portal's pipeline
form: created, refused beside the input each rule concerns, shown again, kept and changed by edits."""

from __future__ import annotations

import re
from collections.abc import Callable
from html import unescape
from typing import Any

from fastapi.testclient import TestClient
from playwright.sync_api import Page, expect

from tests.factories import Tenant, create_connection, create_sandbox_pipeline, make_tenant
from tests.fixtures.kafka import SandboxKafka
from tests.portal.helpers import created_id, field_errors, form_fields, save_edit, sign_in
from tests.portal.test_portal_browser import sign_in as browser_sign_in

KEYED = {"type": "delta", "path": "silver/customers", "mode": "upsert", "key": ["id"], "sequence_by": "source.lsn",
         "changes": "debezium"}


def _base(client: TestClient, tenant: Tenant) -> dict[str, str]:
    """A keyed pipeline's form as a person fills it in, signed in as an editor."""
    conn = create_connection(client, tenant)
    csrf = sign_in(client, tenant.keys["editor"])
    return {"csrf_token": csrf, "name": "customers", "connection_id": conn["id"], "topics": "shop.public.customers",
            "value_format": "json", "schema": "id BIGINT, name STRING, tier INT", "target_type": "delta",
            "target_path": "silver/customers", "delta_mode": "upsert", "key_fields": "id",
            "sequence_by": "source.lsn", "changes": "debezium", "schedule_kind": "none", "state": "paused"}


def _target(client: TestClient, tenant: Tenant, pipeline_id: str) -> Any:
    response = client.get(f"/pipelines/{pipeline_id}", headers=tenant.viewer)
    assert response.status_code == 200, response.text
    return response.json()["target"]


def _create(client: TestClient, data: dict[str, str]) -> str:
    return created_id(client.post("/portal/pipelines/new", data=data, follow_redirects=False))


def test_an_upsert_pipeline_is_created_through_the_form(client: TestClient, tenant: Tenant) -> None:
    data = _base(client, tenant)
    new = client.get("/portal/pipelines/new").text
    assert '<option value="append" selected>' in new and 'data-shown-by="delta_mode" data-when="upsert"' in new
    assert client.post("/portal/pipelines/new", data={k: v for k, v in data.items() if k != "csrf_token"}).status_code == 403
    assert client.get("/pipelines", headers=tenant.viewer).json()["total"] == 0

    pipeline_id = _create(client, {**data, "key_fields": " id ,", "sequence_by": " source.lsn "})
    assert _target(client, tenant, pipeline_id) == KEYED
    page = client.get(f"/portal/pipelines/{pipeline_id}").text
    assert ('<span id="keyed">the latest change per key (id), ordered by source.lsn, Debezium envelopes</span>'
            in page)
    rows = _create(client, {**data, "name": "rows", "target_path": "silver/rows", "key_fields": "id, tier",
                            "sequence_by": "", "changes": "rows"})
    # An upsert's defaults (rows, the offset order) are not written, as the API's own body would not.
    assert _target(client, tenant, rows) == {"type": "delta", "path": "silver/rows", "mode": "upsert",
                                             "key": ["id", "tier"]}
    by_kafka_key = _create(client, {**data, "name": "compacted", "target_path": "silver/compacted", "key_from": "kafka_key",
                                    "key_fields": "customer", "sequence_by": "", "changes": "rows"})
    assert _target(client, tenant, by_kafka_key) == {"type": "delta", "path": "silver/compacted", "mode": "upsert",
                                                     "key": ["customer"], "key_from": "kafka_key"}
    assert ('<span id="keyed">the latest change per key (customer: the Kafka key), ordered by Kafka offset</span>'
            in client.get(f"/portal/pipelines/{by_kafka_key}").text)
    # The settings of a mode not chosen are hidden on the page, and not sent.
    plain = _create(client, {**data, "name": "plain", "target_path": "bronze/plain", "delta_mode": "append"})
    assert _target(client, tenant, plain) == {"type": "delta", "path": "bronze/plain"}


def test_a_keyed_tables_refusals_sit_beside_their_inputs(client: TestClient, tenant: Tenant) -> None:
    data = _base(client, tenant)
    for fields, expected in (
        ({"key_fields": "customer_id"}, {"key_fields": "1 key column(s) are not fields of source.schema"}),
        ({"key_fields": ""}, {"key_fields": "mode upsert needs key: the columns that identify a row"}),
        ({"key_fields": "id, id"}, {"key_fields": "key columns must not repeat"}),
        ({"key_fields": "id, 2nd"}, {"key_fields": "String should match pattern"}),
        ({"sequence_by": "lsn", "changes": "rows"},
         {"sequence_by": "sequence_by: its first name is not a field of source.schema"}),
        ({"sequence_by": "after.lsn"}, {"sequence_by": "sequence_by names a field of the envelope's source or ts_ms"}),
        ({"sequence_by": "source..lsn"}, {"sequence_by": "String should match pattern"}),
        ({"changes": "cdc"}, {"changes": "Input should be 'rows' or 'debezium'"}),
        ({"delta_mode": "merge"}, {"delta_mode": "Input should be 'append' or 'upsert'"}),
        ({"value_format": "string"}, {"delta_mode": "a keyed table reads json values or a registry format's"}),
        ({"schema": "id BIGINT, _inlet_deleted BOOLEAN"}, {"schema": "schema: fields _inlet_deleted clash with the columns"}),
        ({"partition_by": "region"}, {"partition_by": "a keyed table is partitioned by fields of source.schema"}),
        ({"key_from": "kafka_key", "key_fields": "id", "changes": "rows", "sequence_by": ""},
         {"key_fields": "the key column holds the Kafka key: name it apart from source.schema's fields"}),
        ({"key_from": "kafka_key", "key_fields": "k"}, {"key_from": "a Debezium envelope holds its row's key"}),
        ({"key_from": "headers"}, {"key_from": "Input should be 'value' or 'kafka_key'"}),
    ):
        refused = client.post("/portal/pipelines/new", data={**data, **fields})
        assert refused.status_code == 422, fields
        shown = field_errors(refused.text)
        assert shown.keys() == expected.keys() and all(shown[k].startswith(v) for k, v in expected.items()), shown
    assert client.get("/pipelines", headers=tenant.viewer).json()["total"] == 0

    typed = client.post("/portal/pipelines/new", data={**data, "key_fields": '<b>id</b>"', "sequence_by": "<i>"})
    assert typed.status_code == 422 and "<b>id</b>" not in typed.text and "<i>" not in typed.text
    assert 'name="key_fields" value="&lt;b&gt;id&lt;/b&gt;&#34;"' in typed.text
    assert set(field_errors(typed.text)) == {"key_fields", "sequence_by"}


def test_an_edit_shows_keeps_and_changes_a_keyed_tables_settings(client: TestClient, tenant: Tenant) -> None:
    pipeline_id = _create(client, _base(client, tenant))
    shown = form_fields(client.get(f"/portal/pipelines/{pipeline_id}/edit").text, f"/portal/pipelines/{pipeline_id}/edit")
    assert {k: shown[k] for k in ("delta_mode", "key_fields", "sequence_by", "changes")} == {
        "delta_mode": "upsert", "key_fields": "id", "sequence_by": "source.lsn", "changes": "debezium"}
    etag = client.get(f"/pipelines/{pipeline_id}", headers=tenant.viewer).headers["etag"]

    unchanged = save_edit(client, pipeline_id)
    assert unchanged.headers["location"].endswith("?notice=unchanged"), unchanged.text
    assert client.get(f"/pipelines/{pipeline_id}", headers=tenant.viewer).headers["etag"] == etag

    changed = save_edit(client, pipeline_id, key_fields="id, name", sequence_by="ts_ms")
    assert changed.headers["location"].endswith("?notice=saved"), changed.text
    assert _target(client, tenant, pipeline_id) == {**KEYED, "key": ["id", "name"], "sequence_by": "ts_ms"}
    offset_order = save_edit(client, pipeline_id, sequence_by="", changes="rows")
    assert offset_order.headers["location"].endswith("?notice=saved"), offset_order.text
    # Options the pipeline had written stay written at their defaults, as the form's other options do.
    assert _target(client, tenant, pipeline_id) == {**KEYED, "key": ["id", "name"], "sequence_by": None,
                                                    "changes": "rows"}

    refused = save_edit(client, pipeline_id, key_fields="nope")
    assert refused.status_code == 422 and field_errors(refused.text) == {
        "key_fields": "1 key column(s) are not fields of source.schema"}
    assert _target(client, tenant, pipeline_id)["key"] == ["id", "name"]

    # Back to append: the keyed settings are dropped; the mode, written before, stays written.
    append = save_edit(client, pipeline_id, delta_mode="append")
    assert append.headers["location"].endswith("?notice=saved"), append.text
    assert _target(client, tenant, pipeline_id) == {"type": "delta", "path": "silver/customers", "mode": "append"}
    assert save_edit(client, pipeline_id).headers["location"].endswith("?notice=unchanged")


def test_an_scd_type_2_table_is_chosen_shown_kept_and_refused_beside_its_input(client: TestClient, tenant: Tenant) -> None:
    data = _base(client, tenant)
    assert '<option value="1" selected>the latest per key (SCD type 1)</option>' in client.get("/portal/pipelines/new").text
    pipeline_id = _create(client, {**data, "scd_type": "2"})
    assert _target(client, tenant, pipeline_id) == {**KEYED, "scd_type": 2}
    page = client.get(f"/portal/pipelines/{pipeline_id}").text
    assert ('<span id="keyed">every version (SCD type 2) of each key (id), ordered by source.lsn, Debezium envelopes'
            '</span>') in page
    shown = form_fields(client.get(f"/portal/pipelines/{pipeline_id}/edit").text, f"/portal/pipelines/{pipeline_id}/edit")
    assert shown["scd_type"] == "2"
    assert save_edit(client, pipeline_id).headers["location"].endswith("?notice=unchanged")
    latest_only = save_edit(client, pipeline_id, scd_type="1")
    assert latest_only.headers["location"].endswith("?notice=saved"), latest_only.text
    assert _target(client, tenant, pipeline_id) == {**KEYED, "scd_type": 1}  # written before: stays written
    soft = save_edit(client, pipeline_id, deletes="soft")
    assert soft.headers["location"].endswith("?notice=saved"), soft.text
    assert _target(client, tenant, pipeline_id) == {**KEYED, "scd_type": 1, "deletes": "soft"}
    assert ", Debezium envelopes, soft deletes</span>" in client.get(f"/portal/pipelines/{pipeline_id}").text
    assert form_fields(client.get(f"/portal/pipelines/{pipeline_id}/edit").text,
                       f"/portal/pipelines/{pipeline_id}/edit")["deletes"] == "soft"

    for fields, expected in (
        ({"scd_type": "3"}, {"scd_type": "Input should be 1 or 2"}),
        ({"scd_type": "2", "deletes": "soft"}, {"deletes": "a delete that keeps its row's values goes with scd_type 1"}),
        ({"scd_type": "2", "schema": "id BIGINT, _inlet_current BOOLEAN"},
         {"schema": "schema: fields _inlet_current clash with the columns Inlet writes"}),
    ):
        refused = client.post("/portal/pipelines/new", data={**data, "name": "other", **fields})
        assert refused.status_code == 422, fields
        errors = field_errors(refused.text)
        assert errors.keys() == expected.keys() and all(errors[k].startswith(v) for k, v in expected.items()), errors


def test_a_keyed_tables_replay_preview_says_the_changes_are_reapplied_by_sequence(
        client: TestClient, tenant: Tenant, sandbox_kafka: SandboxKafka, kafka_topic: Callable[..., str]) -> None:
    topic = kafka_topic(partitions=1)
    pipeline = create_sandbox_pipeline(client, tenant, sandbox_kafka.bootstrap_servers, [topic],
                                       source={"value_format": "json", "schema": "id BIGINT, name STRING"},
                                       target={"type": "delta", "path": "silver/c", "mode": "upsert", "key": ["id"]})
    csrf = sign_in(client, tenant.keys["editor"])
    preview = client.post(f"/portal/pipelines/{pipeline['id']}/replay", data={
        "csrf_token": csrf, "tp": f"{topic}|0", "mode": "earliest", "replay_mode": "replace", "action": "preview"})
    assert preview.status_code == 200, preview.text
    text = re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", preview.text)))
    assert "records read again are re-applied by sequence." in text
    assert ("A keyed table (upsert by id): The replayed changes are re-applied per key, ordered by Kafka offset: a "
            "change sets a row only if it is newer than the one the row holds") in text
    assert "replay_mode replace behaves as append for a keyed table: nothing is taken out first." in text


def test_the_keyed_inputs_show_for_upsert_and_a_refusal_sits_beside_key_fields_in_a_browser(
        client: TestClient, live_server: str, browser_page: Page) -> None:
    page, base = browser_page, live_server
    tenant = make_tenant(client)
    conn = create_connection(client, tenant, name="cdc")
    browser_sign_in(page, base, tenant.keys["editor"])
    page.goto(f"{base}/portal/pipelines/new")
    expect(page.get_by_label("The table holds")).to_have_value("append")
    expect(page.get_by_label("Key fields")).to_be_hidden()
    page.get_by_label("The table holds").select_option("upsert")
    expect(page.get_by_label("Key fields")).to_be_visible()
    expect(page.get_by_label("Order a key’s changes by (optional)")).to_be_visible()
    page.get_by_label("Name", exact=True).fill("customers")
    page.get_by_label("Connection", exact=True).select_option(conn["id"])
    page.get_by_label("Topics", exact=True).fill("shop.public.customers")
    page.get_by_label("Value format").select_option("json")
    page.get_by_label("Schema of JSON values (Spark DDL)").fill("id BIGINT, name STRING")
    page.get_by_label("Path under the tenant's storage root").fill("silver/customers")
    page.get_by_label("Key fields").fill("customer_id")
    page.get_by_label("Each value is").select_option("debezium")
    page.get_by_role("button", name="Create pipeline").click()
    expect(page.locator("#err-key_fields")).to_have_text("1 key column(s) are not fields of source.schema")
    expect(page.get_by_label("Key fields")).to_be_visible()  # the choice of upsert is shown again, with its inputs
    page.get_by_label("Key fields").fill("id")
    page.get_by_role("button", name="Create pipeline").click()
    expect(page.get_by_role("status")).to_contain_text("created")
    pipeline_id = page.url.split("/")[-1].split("?")[0]
    assert _target(client, tenant, pipeline_id) == {"type": "delta", "path": "silver/customers", "mode": "upsert",
                                                    "key": ["id"], "changes": "debezium"}
