"""A pipeline's contract through the portal: its expectations typed a rule a line and its sensitive
fields a field a line in the pipeline form, its schema evolution policy chosen in a select, refused
beside their input, shown on the pipeline's page, kept by edits (thresholds the form cannot show
included), and each rule's count of violating rows on a run's page."""

from __future__ import annotations

import re
import uuid
from html import unescape
from typing import Any

from fastapi.testclient import TestClient

from api.core.db import unit_of_work
from api.pipelines.models import Pipeline
from api.runs import lifecycle
from tests.factories import Tenant, create_connection, create_pipeline
from tests.portal.helpers import created_id, form_fields, save_edit, sign_in

RULES = [{"name": "positive_amount", "predicate": "amount > 0", "action": "quarantine"},
         {"name": "has_id", "predicate": "id IS NOT NULL"}]


def _api(client: TestClient, tenant: Tenant, pipeline_id: str) -> Any:
    response = client.get(f"/pipelines/{pipeline_id}", headers=tenant.viewer)
    assert response.status_code == 200, response.text
    return response


def _errors(html: str, name: str) -> list[str]:
    """Every error shown beside the input ``name`` (an input may have several)."""
    return [unescape(m) for m in re.findall(rf'<p class="error" id="err-{name}">([^<]+)</p>', html)]


def _rows(html: str, table: str) -> list[list[str]]:
    """The body rows of the table with id ``table``, as text per cell."""
    body = html.split(f'id="{table}">')[1].split("</tbody>")[0].split("<tbody>")[1]
    return [[unescape(re.sub(r"<[^>]+>", "", cell)).strip() for cell in re.findall(r"<td[^>]*>(.*?)</td>", row)]
            for row in re.findall(r"<tr>(.*?)</tr>", body, flags=re.DOTALL)]


def _base(client: TestClient, tenant: Tenant) -> dict[str, str]:
    """A json pipeline's form as a person fills it in, signed in as an editor."""
    conn = create_connection(client, tenant)
    csrf = sign_in(client, tenant.keys["editor"])
    return {"csrf_token": csrf, "name": "orders", "connection_id": conn["id"], "topics": "orders",
            "value_format": "json", "schema": "id BIGINT, amount DOUBLE", "target_type": "delta",
            "target_path": "bronze/orders", "schedule_kind": "none", "state": "paused"}


def test_expectations_are_typed_a_rule_a_line_shown_and_kept_by_an_unchanged_edit(
        client: TestClient, tenant: Tenant) -> None:
    data = _base(client, tenant)
    new = client.get("/portal/pipelines/new").text
    assert '<fieldset data-shown-by="target_type" data-when="delta"><legend>Data contract</legend>' in new
    assert form_fields(new, "/portal/pipelines/new")["expectations"] == ""
    made = client.post("/portal/pipelines/new", data={
        **data, "expectations": "positive_amount quarantine: amount > 0\r\n# every row has one\r\nhas_id: id IS NOT NULL\r\n"},
        follow_redirects=False)
    ident = created_id(made)
    assert _api(client, tenant, ident).json()["contract"] == {"expectations": RULES}

    page = client.get(f"/portal/pipelines/{ident}").text
    assert _rows(page, "expectations") == [["positive_amount", "quarantine", "amount > 0", "—"],
                                           ["has_id", "warn", "id IS NOT NULL", "—"]]
    action = f"/portal/pipelines/{ident}/edit"
    assert form_fields(client.get(action).text, action)["expectations"] == (
        "positive_amount quarantine: amount > 0\nhas_id warn: id IS NOT NULL")
    before = _api(client, tenant, ident)
    unchanged = save_edit(client, ident)
    assert unchanged.headers["location"].endswith("?notice=unchanged"), unchanged.text
    after = _api(client, tenant, ident)
    assert after.json() == before.json() and after.headers["etag"] == before.headers["etag"]


def test_a_pipeline_without_a_contract_saved_from_its_form_still_has_none(
        client: TestClient, app: Any, tenant: Tenant) -> None:
    pipeline = create_pipeline(client, tenant, name="orders", state="paused")
    sign_in(client, tenant.keys["editor"])
    page = client.get(f"/portal/pipelines/{pipeline['id']}").text
    assert 'id="expectations"' not in page and 'id="sensitive"' not in page
    before = _api(client, tenant, pipeline["id"])
    unchanged = save_edit(client, pipeline["id"], expectations=" \r\n", sensitive="# none\r\n")
    assert unchanged.headers["location"].endswith("?notice=unchanged"), unchanged.text
    assert _api(client, tenant, pipeline["id"]).headers["etag"] == before.headers["etag"]
    changed = save_edit(client, pipeline["id"], max_offsets_per_run="500")
    assert changed.headers["location"].endswith("?notice=saved"), changed.text
    with unit_of_work(app.state.engine) as session:
        stored = session.get(Pipeline, uuid.UUID(pipeline["id"]))
        assert stored is not None and stored.contract_as_written is None
    assert "contract" not in _api(client, tenant, pipeline["id"]).json()


def test_an_edit_keeps_a_rules_thresholds_while_its_name_stays(client: TestClient, tenant: Tenant) -> None:
    pipeline = create_pipeline(client, tenant, name="orders", state="paused", contract={"expectations": [
        {"name": "positive_amount", "predicate": "amount > 0", "action": "quarantine", "alert_over_rows": 100,
         "alert_over_ratio": 0.01},
        {"name": "has_id", "predicate": "id IS NOT NULL", "alert_over_rows": 5}]})
    sign_in(client, tenant.keys["editor"])
    page = client.get(f"/portal/pipelines/{pipeline['id']}").text
    assert _rows(page, "expectations") == [
        ["positive_amount", "quarantine", "amount > 0", "over 100 rows or over 1% of the records read"],
        ["has_id", "warn", "id IS NOT NULL", "over 5 rows"]]

    changed = save_edit(client, pipeline["id"], expectations="positive_amount fail: amount >= 1\nid_known: id IS NOT NULL")
    assert changed.headers["location"].endswith("?notice=saved"), changed.text
    assert _api(client, tenant, pipeline["id"]).json()["contract"] == {"expectations": [
        {"name": "positive_amount", "predicate": "amount >= 1", "action": "fail", "alert_over_rows": 100,
         "alert_over_ratio": 0.01},
        {"name": "id_known", "predicate": "id IS NOT NULL"}]}  # renamed: a new rule, no threshold kept

    emptied = save_edit(client, pipeline["id"], expectations="")
    assert emptied.headers["location"].endswith("?notice=saved"), emptied.text
    assert _api(client, tenant, pipeline["id"]).json()["contract"] == {"expectations": []}
    assert 'id="expectations"' not in client.get(f"/portal/pipelines/{pipeline['id']}").text
    assert save_edit(client, pipeline["id"]).headers["location"].endswith("?notice=unchanged")


def test_the_expectations_refusals_sit_beside_the_input_naming_their_line(client: TestClient, tenant: Tenant) -> None:
    data = _base(client, tenant)
    how = "write name action: predicate, such as positive_amount quarantine: amount > 0 (no action: warn)"
    for fields, expected in (
        ({"expectations": "amount > 0"}, [f"Line 1: {how}"]),
        ({"expectations": "ok: amount > 0\n\nbad: amount >"}, ["Line 3: the predicate ends too soon"]),
        ({"expectations": "ok: amount > 0\nbad: total > 0"}, ["Line 2: not columns of the table (or dropped as sensitive): total"]),
        ({"expectations": "ok maybe: amount > 0"}, ["Line 1: Input should be 'warn', 'quarantine' or 'fail'"]),
        ({"expectations": "ok: amount > 0", "value_format": "string"},
         [("a contract applies to a decoded row's columns: value_format json or a registry format (avro, protobuf, "
           "json_schema)")]),
    ):
        refused = client.post("/portal/pipelines/new", data={**data, **fields})
        assert refused.status_code == 422, fields
        assert _errors(refused.text, "expectations") == expected, fields
        assert re.findall(r'<p class="error" id="err-(\w+)">', refused.text) == ["expectations"] * len(expected)
        assert form_fields(refused.text, "/portal/pipelines/new")["expectations"] == fields["expectations"]
    assert client.get("/pipelines", headers=tenant.viewer).json()["total"] == 0


SENSITIVE_SCHEMA = "id BIGINT, amount DOUBLE, email STRING, customer STRUCT<ssn: STRING>, notes STRING"


def test_sensitive_fields_are_typed_a_field_a_line_listed_and_kept_by_an_unchanged_edit(
        client: TestClient, tenant: Tenant) -> None:
    data = {**_base(client, tenant), "schema": SENSITIVE_SCHEMA}
    new = client.get("/portal/pipelines/new").text
    assert form_fields(new, "/portal/pipelines/new")["sensitive"] == ""
    made = client.post("/portal/pipelines/new", data={
        **data, "sensitive": "email hash\r\n# the customer's\r\ncustomer.ssn redact\r\n\r\nnotes drop\r\n"},
        follow_redirects=False)
    ident = created_id(made)
    fields = [{"field": "email", "action": "hash"}, {"field": "customer.ssn", "action": "redact"},
              {"field": "notes", "action": "drop"}]
    assert _api(client, tenant, ident).json()["contract"] == {"sensitive": fields}

    page = client.get(f"/portal/pipelines/{ident}").text
    assert _rows(page, "sensitive") == [["email", "hash"], ["customer.ssn", "redact"], ["notes", "drop"]]
    assert 'id="expectations"' not in page
    action = f"/portal/pipelines/{ident}/edit"
    assert form_fields(client.get(action).text, action)["sensitive"] == "email hash\ncustomer.ssn redact\nnotes drop"
    before = _api(client, tenant, ident)
    unchanged = save_edit(client, ident)
    assert unchanged.headers["location"].endswith("?notice=unchanged"), unchanged.text
    after = _api(client, tenant, ident)
    assert after.json() == before.json() and after.headers["etag"] == before.headers["etag"]

    changed = save_edit(client, ident, sensitive="email redact", expectations="has_id: id IS NOT NULL")
    assert changed.headers["location"].endswith("?notice=saved"), changed.text
    assert _api(client, tenant, ident).json()["contract"] == {
        "expectations": [{"name": "has_id", "predicate": "id IS NOT NULL"}],
        "sensitive": [{"field": "email", "action": "redact"}]}
    assert _rows(client.get(f"/portal/pipelines/{ident}").text, "sensitive") == [["email", "redact"]]


def test_the_sensitive_fields_refusals_sit_beside_their_input_naming_their_line(
        client: TestClient, tenant: Tenant) -> None:
    data = {**_base(client, tenant), "schema": SENSITIVE_SCHEMA}
    how = "write field action, such as customer.email hash (hash, redact or drop)"
    for fields, expected in (
        ({"sensitive": "email"}, [f"Line 1: {how}"]),
        ({"sensitive": "email hash\n\nmail hash"}, ["Line 3: not a column of the table (a field of the value, or key)"]),
        ({"sensitive": "# first\nemail mask"}, ["Line 2: Input should be 'hash', 'redact' or 'drop'"]),
        ({"sensitive": "notes drop\ncustomer.ssn drop"},
         ["Line 2: drop takes a top-level column; hash or redact a field of a struct"]),
        ({"sensitive": "email hash\nEmail drop"}, ["a field is named once (in any case)"]),
        ({"sensitive": "email hash", "value_format": "string"},
         [("a contract applies to a decoded row's columns: value_format json or a registry format (avro, protobuf, "
           "json_schema)")]),
    ):
        refused = client.post("/portal/pipelines/new", data={**data, **fields})
        assert refused.status_code == 422, fields
        assert _errors(refused.text, "sensitive") == expected, fields
        assert re.findall(r'<p class="error" id="err-(\w+)">', refused.text) == ["sensitive"] * len(expected)
        assert form_fields(refused.text, "/portal/pipelines/new")["sensitive"] == fields["sensitive"]
    assert client.get("/pipelines", headers=tenant.viewer).json()["total"] == 0


def _evolution(html: str) -> str | None:
    """The schema evolution policy the pipeline page shows (None: not shown)."""
    found = re.search(r'<dd id="evolution">([^<]+)</dd>', html)
    return unescape(found.group(1)) if found else None


def test_the_schema_evolution_policy_is_chosen_shown_and_kept_by_an_unchanged_edit(
        client: TestClient, tenant: Tenant) -> None:
    data = _base(client, tenant)
    new = client.get("/portal/pipelines/new").text
    assert form_fields(new, "/portal/pipelines/new")["evolution"] == "add"
    assert '<select id="evolution" name="evolution"' in new
    made = client.post("/portal/pipelines/new", data={**data, "evolution": "widen"}, follow_redirects=False)
    ident = created_id(made)
    assert _api(client, tenant, ident).json()["contract"] == {"evolution": "widen"}

    page = client.get(f"/portal/pipelines/{ident}").text
    assert (_evolution(page) or "").startswith("widen: new fields become nullable columns, a type that widens")
    assert 'id="expectations"' not in page and 'id="sensitive"' not in page
    action = f"/portal/pipelines/{ident}/edit"
    assert form_fields(client.get(action).text, action)["evolution"] == "widen"
    before = _api(client, tenant, ident)
    unchanged = save_edit(client, ident)
    assert unchanged.headers["location"].endswith("?notice=unchanged"), unchanged.text
    after = _api(client, tenant, ident)
    assert after.json() == before.json() and after.headers["etag"] == before.headers["etag"]

    # Changed beside rules the form keeps; back to add, the policy written stays written.
    changed = save_edit(client, ident, evolution="fail", expectations="has_id: id IS NOT NULL")
    assert changed.headers["location"].endswith("?notice=saved"), changed.text
    assert _api(client, tenant, ident).json()["contract"] == {
        "expectations": [{"name": "has_id", "predicate": "id IS NOT NULL"}], "evolution": "fail"}
    assert _evolution(client.get(f"/portal/pipelines/{ident}").text) == "fail: any new field or changed type fails the run"
    assert save_edit(client, ident, evolution="add").headers["location"].endswith("?notice=saved")
    assert _api(client, tenant, ident).json()["contract"] == {
        "expectations": [{"name": "has_id", "predicate": "id IS NOT NULL"}], "evolution": "add"}


def test_a_pipeline_without_a_policy_shows_add_and_an_edit_writes_none(client: TestClient, tenant: Tenant) -> None:
    rules = create_pipeline(client, tenant, name="orders", state="paused", contract={"expectations": RULES})
    plain = create_pipeline(client, tenant, name="plain", state="paused")
    raw = create_pipeline(client, tenant, name="raw", state="paused", source={
        "connection_id": plain["source"]["connection_id"], "topics": ["orders"], "value_format": "raw"})
    sign_in(client, tenant.keys["editor"])
    add = "add: new fields become nullable columns; a changed type fails the run"
    assert _evolution(client.get(f"/portal/pipelines/{rules['id']}").text) == add
    assert _evolution(client.get(f"/portal/pipelines/{plain['id']}").text) == add
    assert _evolution(client.get(f"/portal/pipelines/{raw['id']}").text) is None  # raw values: no columns to follow
    for pipeline in (rules, plain):
        action = f"/portal/pipelines/{pipeline['id']}/edit"
        assert form_fields(client.get(action).text, action)["evolution"] == "add"
        before = _api(client, tenant, pipeline["id"])
        unchanged = save_edit(client, pipeline["id"])
        assert unchanged.headers["location"].endswith("?notice=unchanged"), unchanged.text
        assert _api(client, tenant, pipeline["id"]).headers["etag"] == before.headers["etag"]
    assert _api(client, tenant, rules["id"]).json()["contract"] == {"expectations": RULES}
    assert "contract" not in _api(client, tenant, plain["id"]).json()


def test_the_evolution_policys_refusals_sit_beside_the_select(client: TestClient, tenant: Tenant) -> None:
    data = _base(client, tenant)
    for fields, expected in (
        ({"evolution": "merge"}, ["Input should be 'add', 'widen' or 'fail'"]),
        ({"evolution": "widen", "delta_mode": "upsert", "key_fields": "id"},
         [("widen applies to append tables: a keyed table's MERGE matches on columns whose type a widening would "
           "change (use add or fail)")]),
        ({"evolution": "fail", "value_format": "string"},
         [("a contract applies to a decoded row's columns: value_format json or a registry format (avro, protobuf, "
           "json_schema)")]),
    ):
        refused = client.post("/portal/pipelines/new", data={**data, **fields})
        assert refused.status_code == 422, fields
        assert _errors(refused.text, "evolution") == expected, fields
        assert re.findall(r'<p class="error" id="err-(\w+)">', refused.text) == ["evolution"], fields
        if fields["evolution"] != "merge":  # shown again as chosen (an unknown one selects nothing)
            assert form_fields(refused.text, "/portal/pipelines/new")["evolution"] == fields["evolution"]
    assert client.get("/pipelines", headers=tenant.viewer).json()["total"] == 0


def test_a_runs_page_shows_each_rules_count_of_violating_rows(client: TestClient, app: Any, tenant: Tenant) -> None:
    pipeline = create_pipeline(client, tenant, state="paused", contract={"expectations": RULES})
    with unit_of_work(app.state.engine) as session:
        row = session.get(Pipeline, uuid.UUID(pipeline["id"]))
        assert row is not None
        run = lifecycle.create_run(session, row, trigger="manual")
        run.plan = {"partitions": []}
        lifecycle.claim(session, run.id, worker="w", lease_s=30)
        lifecycle.commit_succeeded(session, run, summary={
            "records_read": 2000, "rows_written": 1988, "rows_quarantined": 12, "bytes_read": 40000,
            "result": {"partitions": [], "rows_violating": 1215, "expectations": [
                {"name": "positive_amount", "action": "quarantine", "rows_violating": 12},
                {"name": "has_id", "action": "warn", "rows_violating": 1205}]}})
        run_id = run.id
    sign_in(client, tenant.keys["viewer"])
    page = client.get(f"/portal/runs/{run_id}")
    assert page.status_code == 200, page.text
    assert _rows(page.text, "expectations") == [["positive_amount", "quarantine", "12"], ["has_id", "warn", "1,205"]]
    assert '<p id="rows-violating">1,215 rows violated at least one rule.</p>' in page.text
    assert "Rows written</dt><dd>1,988 (12 quarantined)" in page.text

    plain = create_pipeline(client, tenant, state="paused")
    queued = client.post(f"/pipelines/{plain['id']}/runs", headers=tenant.editor).json()
    assert 'id="expectations"' not in client.get(f"/portal/runs/{queued['id']}").text
