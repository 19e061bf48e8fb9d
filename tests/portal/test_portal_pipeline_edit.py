"""The portal's pipeline forms over HTTP beyond creation: every source and target option the API takes,
edits (an unchanged form saved is no change at all, as Terraform needs), an edit that conflicts with
someone else's, the schedule's next firings, and delete with what it loses."""

from __future__ import annotations

import re
from typing import Any

from fastapi.testclient import TestClient

from tests.factories import Tenant, create_connection, create_pipeline
from tests.portal.helpers import created_id, field_errors, form_fields, save_edit, sign_in


def _api(client: TestClient, tenant: Tenant, pipeline_id: str) -> Any:
    response = client.get(f"/pipelines/{pipeline_id}", headers=tenant.viewer)
    assert response.status_code == 200, response.text
    return response


def _events(client: TestClient, tenant: Tenant, pipeline_id: str) -> list[str]:
    items = client.get(f"/audit-events?resource_id={pipeline_id}", headers=tenant.viewer).json()["items"]
    return [e["action"] for e in items]


def test_an_unchanged_edit_form_saved_changes_nothing(client: TestClient, tenant: Tenant) -> None:
    # The factory's body writes defaults explicitly (include_headers false, on_data_loss fail, no
    # partition_by): the form keeps them written, so nothing, not even the ETag, moves.
    pipeline = create_pipeline(client, tenant, name="orders", state="paused")
    before = _api(client, tenant, pipeline["id"])
    sign_in(client, tenant.keys["editor"])
    saved = save_edit(client, pipeline["id"])
    assert saved.status_code == 303 and saved.headers["location"].endswith("?notice=unchanged"), saved.text
    after = _api(client, tenant, pipeline["id"])
    assert after.json() == before.json() and after.headers["etag"] == before.headers["etag"]
    assert _events(client, tenant, pipeline["id"]) == ["create"]

    changed = save_edit(client, pipeline["id"], cron="0 6 * * 1-5", include_headers="on")
    assert changed.headers["location"].endswith("?notice=saved")
    body = _api(client, tenant, pipeline["id"]).json()
    assert body["schedule"] == {"cron": "0 6 * * 1-5", "timezone": "Europe/Paris"}
    assert body["source"] == {**pipeline["source"], "include_headers": True}
    assert body["target"] == pipeline["target"] and body["state"] == "paused"
    assert _events(client, tenant, pipeline["id"]) == ["update", "create"]


def test_every_source_option_of_the_api_is_on_the_form(client: TestClient, tenant: Tenant) -> None:
    conn = create_connection(client, tenant, schema_registry={"url": "https://sr.example.com"})
    csrf = sign_in(client, tenant.keys["editor"])
    base = {"csrf_token": csrf, "connection_id": conn["id"], "target_type": "delta", "schedule_kind": "none",
            "state": "paused"}
    made = client.post("/portal/pipelines/new", data={
        **base, "name": "everything", "topics_kind": "pattern", "topic_pattern": r"orders\..*", "topics": "hidden",
        "value_format": "avro", "value_subject": "orders-value", "value_version": "2", "key_format": "protobuf",
        "key_subject": "orders-key", "starting_offsets": "offsets",
        "starting_offsets_json": '{"orders.eu": {"0": 42, "1": -2}}', "max_offsets_per_run": "1000",
        "commit_to_group": "inlet-orders", "include_headers": "on", "on_data_loss": "skip",
        "target_path": "bronze/everything", "partition_by": "event_date, region",
    }, follow_redirects=False)
    body = _api(client, tenant, created_id(made)).json()
    assert body["source"] == {
        "connection_id": conn["id"], "topic_pattern": r"orders\..*", "value_format": "avro",
        "value_schema": {"subject": "orders-value", "version": 2}, "key_format": "protobuf",
        "key_schema": {"subject": "orders-key"}, "starting_offsets": {"orders.eu": {"0": 42, "1": -2}},
        "max_offsets_per_run": 1000, "commit_to_group": "inlet-orders", "include_headers": True, "on_data_loss": "skip"}
    assert body["target"] == {"type": "delta", "path": "bronze/everything", "partition_by": ["event_date", "region"]}

    timed = client.post("/portal/pipelines/new", data={
        **base, "name": "from-a-time", "topics": "orders", "value_format": "string", "starting_offsets": "timestamp",
        "starting_timestamp": "2024-05-14T13:05", "starting_timestamp_strategy": "latest", "target_path": "bronze/t",
    }, follow_redirects=False)
    source = _api(client, tenant, created_id(timed)).json()["source"]
    assert source["starting_timestamp"] == "2024-05-14T13:05:00Z" and source["starting_timestamp_strategy"] == "latest"
    assert "starting_offsets" not in source
    edit = client.get(f"/portal/pipelines/{created_id(timed)}/edit").text
    assert 'value="2024-05-14T13:05:00"' in edit


def test_the_sources_rules_are_shown_beside_the_input_they_concern(client: TestClient, tenant: Tenant) -> None:
    conn = create_connection(client, tenant)
    csrf = sign_in(client, tenant.keys["editor"])
    base = {"csrf_token": csrf, "name": "p", "connection_id": conn["id"], "topics": "orders", "target_path": "b/p"}
    for fields, expected in (
        ({"value_format": "json"}, {"schema": "value_format json needs a schema (Spark DDL)"}),
        ({"value_format": "json", "schema": "key STRING"},
         {"schema": "schema: fields key clash with the columns Inlet writes beside the decoded ones ("}),
        ({"starting_offsets": "offsets", "starting_offsets_json": "[1]"},
         {"starting_offsets_json": 'Enter JSON such as {"orders": {"0": 42, "1": -2}} (-2: earliest, -1: latest)'}),
        ({"starting_offsets": "offsets", "starting_offsets_json": '{"refunds": {"0": 1}}'},
         {"starting_offsets_json": "starting_offsets names topics the pipeline does not read: refunds"}),
        ({"starting_offsets": "timestamp", "starting_timestamp": "yesterday"},
         {"starting_timestamp": "Enter a date and time (UTC)"}),
        ({"topics_kind": "pattern", "topic_pattern": "orders[", "value_format": "string"},
         {"topic_pattern": "topic_pattern is not a valid regex: unterminated character set at position 6"}),
        ({"target_type": "kafka", "target_topic": "bad topic!", "create_topic": "on", "create_config": "retention"},
         {"target_connection_id": "Field required", "target_topic": "String should match pattern",
          "create_partitions": "Field required",
          "create_config": "Line 1: write name=value, such as retention.ms=604800000"}),
    ):
        refused = client.post("/portal/pipelines/new", data={**base, **fields})
        assert refused.status_code == 422, fields
        shown = field_errors(refused.text)
        assert shown.keys() == expected.keys() and all(shown[k].startswith(v) for k, v in expected.items()), shown


def test_a_pipeline_moves_to_a_kafka_target_with_a_created_topic_and_back(client: TestClient, tenant: Tenant) -> None:
    pipeline = create_pipeline(client, tenant, name="orders", state="paused")
    sink = create_connection(client, tenant, name="sink", security_protocol="PLAINTEXT", sasl_mechanism=None,
                             credentials=None)
    sign_in(client, tenant.keys["editor"])
    kafka = save_edit(client, pipeline["id"], target_type="kafka", target_connection_id=sink["id"], target_topic="orders-copy",
                  create_topic="on", create_partitions="6", create_config="retention.ms=86400000\ncleanup.policy=delete")
    assert kafka.headers["location"].endswith("?notice=saved"), kafka.text
    assert _api(client, tenant, pipeline["id"]).json()["target"] == {
        "type": "kafka", "connection_id": sink["id"], "topic": "orders-copy",
        "create_topic": {"partitions": 6, "config": {"cleanup.policy": "delete", "retention.ms": "86400000"}}}
    page = client.get(f"/portal/pipelines/{pipeline['id']}").text
    assert "Kafka topic <code>orders-copy</code> (created with 6 partitions if missing)" in page
    users = client.get(f"/portal/connections/{sink['id']}").text
    assert f'<a href="/portal/pipelines/{pipeline["id"]}">orders</a> (writes to it)' in users
    assert save_edit(client, pipeline["id"]).headers["location"].endswith("?notice=unchanged")  # the form reads it back
    delta = save_edit(client, pipeline["id"], target_type="delta", target_path="bronze/orders-2")
    assert delta.headers["location"].endswith("?notice=saved")
    assert _api(client, tenant, pipeline["id"]).json()["target"] == {"type": "delta", "path": "bronze/orders-2"}


def test_an_edit_made_after_someone_elses_shows_both_and_saving_again_replaces_theirs(
    client: TestClient, tenant: Tenant
) -> None:
    pipeline = create_pipeline(client, tenant, name="orders", state="paused")
    csrf = sign_in(client, tenant.keys["editor"])
    action = f"/portal/pipelines/{pipeline['id']}/edit"
    mine = form_fields(client.get(action).text, action)
    theirs = client.patch(f"/pipelines/{pipeline['id']}",
                          json={"schedule": {"cron": None, "timezone": None, "interval_seconds": 600}},
                          headers={**tenant.admin, "Content-Type": "application/merge-patch+json"})
    assert theirs.status_code == 200
    conflict = client.post(action, data={**mine, "csrf_token": csrf, "max_offsets_per_run": "500"})
    assert conflict.status_code == 412
    assert "Someone else saved this pipeline after you opened the form</strong>: key “admin-key” (admin)" \
        not in conflict.text  # an editor does not see key names
    assert re.search(r"Someone else saved this pipeline after you opened the form</strong>: API key [0-9a-f]{8} "
                     r"\(update, ", conflict.text)
    differences = re.findall(r'<th scope="row"><code>([^<]+)</code></th><td>([^<]*)</td><td>([^<]*)</td>', conflict.text)
    assert differences == [
        ("schedule.cron", "—", "*/5 * * * *"), ("schedule.interval_seconds", "600", "—"),
        ("schedule.timezone", "—", "Europe/Paris"), ("source.max_offsets_per_run", "10000", "500")]
    assert _api(client, tenant, pipeline["id"]).json()["schedule"] == {"interval_seconds": 600}
    again = client.post(action, data=form_fields(conflict.text, action), follow_redirects=False)
    assert again.headers["location"].endswith("?notice=saved"), again.text
    body = _api(client, tenant, pipeline["id"]).json()
    assert body["schedule"] == {"cron": "*/5 * * * *", "timezone": "Europe/Paris"}
    assert body["source"]["max_offsets_per_run"] == 500


def test_the_schedules_next_firings_are_shown(client: TestClient, tenant: Tenant) -> None:
    active = create_pipeline(client, tenant, name="daily", schedule={"cron": "30 6 * * *", "timezone": "Europe/Paris"})
    paused = create_pipeline(client, tenant, name="hourly", schedule={"interval_seconds": 3600}, state="paused")
    sign_in(client, tenant.keys["viewer"])
    page = client.get(f"/portal/pipelines/{active['id']}").text
    firings = re.findall(r'<li><time datetime="([^"]+)">([^<]+)</time>', page)
    assert len(firings) == 5 and firings[0][0] == active["status"]["next_run_at"].replace("Z", "+00:00")
    assert all(text.endswith("06:30 Europe/Paris") for _, text in firings)
    held = client.get(f"/portal/pipelines/{paused['id']}").text
    assert "paused — resumed now, it would run at" in held
    assert len(re.findall(r'<li><time datetime="[^"]+">[^<]+ UTC</time>', held)) == 5


def test_deleting_a_pipeline_names_what_is_lost_and_waits_for_its_run(client: TestClient, tenant: Tenant) -> None:
    pipeline = create_pipeline(client, tenant, name="orders", state="paused",
                               source={**create_pipeline(client, tenant)["source"], "commit_to_group": "inlet-orders"})
    run = client.post(f"/pipelines/{pipeline['id']}/runs", headers=tenant.editor).json()
    csrf = sign_in(client, tenant.keys["editor"])
    action = f"/portal/pipelines/{pipeline['id']}/delete"
    page = client.get(action).text
    lost = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", page.split('<ul id="lost">')[1].split("</ul>")[0])).strip()
    assert lost == ("Its definition: reading orders from " + client.get(
        f"/connections/{pipeline['source']['connection_id']}", headers=tenant.viewer).json()["name"]
        + " into the Delta table bronze/orders, cron */5 * * * * (Europe/Paris). "
        "1 run, with its plans and logs, and the record of which run wrote which offsets. "
        "The committed offsets of 0 partitions: a new pipeline starts again from its starting offsets. "
        "The consumer group inlet-orders Inlet copied the offsets to: deleted from the cluster.")
    assert f'Run <a href="/portal/runs/{run["id"]}">#1</a> is queued' in page
    fields = form_fields(page, action)
    wrong = client.post(action, data={**fields, "confirm_name": "order"})
    assert wrong.status_code == 422 and field_errors(wrong.text) == {"confirm_name": "Type orders to confirm"}
    busy = client.post(action, data={**fields, "confirm_name": "orders"})
    assert busy.status_code == 409 and "cancel it or let it finish first" in busy.text
    assert client.post(f"/runs/{run['id']}/cancel", headers=tenant.editor).status_code == 200
    deleted = client.post(action, data={**fields, "csrf_token": csrf, "confirm_name": "orders"}, follow_redirects=False)
    assert deleted.status_code == 303 and deleted.headers["location"] == "/portal/pipelines?notice=pipeline-deleted"
    assert client.get(f"/pipelines/{pipeline['id']}", headers=tenant.viewer).status_code == 404
    assert "The pipeline was deleted." in client.get(deleted.headers["location"]).text


def test_a_stale_delete_is_refused(client: TestClient, tenant: Tenant) -> None:
    pipeline = create_pipeline(client, tenant, name="orders")
    sign_in(client, tenant.keys["editor"])
    action = f"/portal/pipelines/{pipeline['id']}/delete"
    fields = {**form_fields(client.get(action).text, action), "confirm_name": "orders"}
    assert client.post(f"/pipelines/{pipeline['id']}/pause", headers=tenant.editor).status_code == 200
    stale = client.post(action, data=fields)
    assert stale.status_code == 412 and "changed by someone else after this page was shown" in stale.text
    assert _api(client, tenant, pipeline["id"]).json()["state"] == "paused"


def test_a_viewer_sees_no_edit_or_delete_and_a_forged_one_is_refused(client: TestClient, tenant: Tenant) -> None:
    pipeline = create_pipeline(client, tenant, name="orders")
    csrf = sign_in(client, tenant.keys["viewer"])
    page = client.get(f"/portal/pipelines/{pipeline['id']}").text
    assert "/edit\"" not in page and "/delete\"" not in page and "Offsets history" in page
    for path in ("edit", "delete"):
        assert client.get(f"/portal/pipelines/{pipeline['id']}/{path}").status_code == 403
        forged = client.post(f"/portal/pipelines/{pipeline['id']}/{path}",
                             data={"csrf_token": csrf, "name": "orders", "confirm_name": "orders"})
        assert forged.status_code == 403 and "needs the editor role" in forged.text
    assert _api(client, tenant, pipeline["id"]).json() == pipeline


def test_the_table_maintenance_policy_is_on_the_form_and_the_tables_health_on_the_page(
    client: TestClient, tenant: Tenant,
) -> None:
    conn = create_connection(client, tenant)
    csrf = sign_in(client, tenant.keys["editor"])
    base = {"csrf_token": csrf, "connection_id": conn["id"], "topics": "orders", "value_format": "string",
            "target_type": "delta", "schedule_kind": "none", "state": "paused"}
    made = client.post("/portal/pipelines/new", data={
        **base, "name": "kept", "target_path": "bronze/kept", "target_file_mb": "256", "z_order_by": "id, region",
        "vacuum_retention_hours": "336"}, follow_redirects=False)
    ident = created_id(made)
    assert _api(client, tenant, ident).json()["target"] == {
        "type": "delta", "path": "bronze/kept",
        "maintenance": {"compaction": {"target_file_mb": 256, "z_order_by": ["id", "region"]},
                        "vacuum": {"retention_hours": 336}}}
    page = client.get(f"/portal/pipelines/{ident}").text
    assert "Table health" in page and 'id="table-files">0<' in page

    off = save_edit(client, ident, maintenance_off="on", target_file_mb="")
    assert off.headers["location"].endswith("?notice=saved"), off.text
    assert _api(client, tenant, ident).json()["target"]["maintenance"] == {
        "enabled": False, "compaction": {"target_file_mb": 128, "z_order_by": ["id", "region"]},
        "vacuum": {"retention_hours": 336}}

    refused = client.post("/portal/pipelines/new", data={
        **base, "name": "short", "target_path": "bronze/short", "vacuum_retention_hours": "24"}, follow_redirects=False)
    assert refused.status_code == 422
    assert "minimum" in field_errors(refused.text)["vacuum_retention_hours"]
