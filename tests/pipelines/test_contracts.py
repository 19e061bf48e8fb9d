"""A pipeline's data contract through the API (``contract``; api.pipelines.contract): it reads back as
written, its predicates are parsed and their columns checked when it is written, and what cannot apply
is refused with a 422 naming the field, the pipeline left as it was."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.core.config import Settings
from api.core.db import unit_of_work
from api.main import create_app
from api.pipelines.models import Pipeline
from api.runs.job_spec import build_spec
from api.runs.models import Run
from tests.factories import Tenant, assert_problem, create_connection, make_tenant, pipeline_body
from tests.fixtures.database import truncate_all

PATCH = {"Content-Type": "application/merge-patch+json"}
RULES = [{"name": "positive_amount", "predicate": "amount IS NOT NULL AND amount > 0", "action": "quarantine",
          "alert_over_ratio": 0.01},
         {"name": "known_id", "predicate": "id BETWEEN 1 AND 1000000"}]


def _body(conn: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    return pipeline_body(conn["id"], contract={"expectations": RULES}, **overrides)


def test_a_contract_reads_back_as_written_and_none_reads_back_as_none(client: TestClient, tenant: Tenant) -> None:
    conn = create_connection(client, tenant)
    created = client.post("/pipelines", json=_body(conn), headers=tenant.editor)
    assert created.status_code == 201, created.text
    assert created.json()["contract"] == {"expectations": RULES}  # known_id's action left out stays out
    read = client.get(f"/pipelines/{created.json()['id']}", headers=tenant.viewer).json()
    assert read["contract"] == {"expectations": RULES}

    plain = client.post("/pipelines", json=pipeline_body(conn["id"], name="plain"), headers=tenant.editor).json()
    assert "contract" not in plain

    removed = client.patch(f"/pipelines/{read['id']}", json={"contract": None},
                           headers={**tenant.editor, **PATCH, "If-Match": created.headers["etag"]})
    assert removed.status_code == 200, removed.text
    assert "contract" not in removed.json()


@pytest.mark.parametrize(("contract", "field", "says"), [
    ({"expectations": [{"name": "p", "predicate": "amount >"}]}, "contract.expectations[0].predicate", "ends"),
    ({"expectations": [RULES[0], {"name": "t", "predicate": "total > 0"}]}, "contract.expectations[1].predicate",
     "not columns of the table (or dropped as sensitive): total"),
    ({"expectations": [{"name": "p", "predicate": "amount > 0; DROP TABLE x"}]}, "contract.expectations[0].predicate",
     "unexpected character at 11"),
    ({"expectations": [{"name": "p", "predicate": "reflect('java.lang.Runtime', 'exec', 'id')"}]},
     "contract.expectations[0].predicate", "calls only length, lower"),
    ({"expectations": [RULES[1], {**RULES[1], "name": "KNOWN_ID"}]}, "contract.expectations", "must not repeat"),
    ({"expectations": [{"name": "1st", "predicate": "id > 0"}]}, "contract.expectations[0].name", "pattern"),
    ({"expectations": [{"name": "p", "predicate": "id > 0", "action": "drop"}]}, "contract.expectations[0].action",
     "warn"),
    ({"expectations": [{"name": "p", "predicate": "id > 0", "alert_over_ratio": 0}]},
     "contract.expectations[0].alert_over_ratio", "greater than 0"),
    ({"rules": []}, "contract.rules", "Extra inputs"),
])
def test_what_cannot_apply_is_a_422_naming_the_field(client: TestClient, tenant: Tenant, contract: dict[str, Any],
                                                     field: str, says: str) -> None:
    conn = create_connection(client, tenant)
    refused = client.post("/pipelines", json=pipeline_body(conn["id"], contract=contract), headers=tenant.editor)
    problem = assert_problem(refused, 422, fields={field})
    assert any(says in e["message"] for e in problem["errors"] if e["field"] == field), problem
    assert client.get("/pipelines", headers=tenant.viewer).json()["items"] == []


def test_expectations_need_decoded_rows_of_a_delta_table(client: TestClient, tenant: Tenant) -> None:
    conn = create_connection(client, tenant)
    string = _body(conn, source={**pipeline_body(conn["id"])["source"], "value_format": "string", "schema": None})
    assert_problem(client.post("/pipelines", json=string, headers=tenant.editor), 422, fields={"contract.expectations"})
    kafka = _body(conn, target={"type": "kafka", "connection_id": conn["id"], "topic": "out"})
    assert_problem(client.post("/pipelines", json=kafka, headers=tenant.editor), 422, fields={"contract.expectations"})


def test_a_patch_that_breaks_a_predicate_changes_nothing(client: TestClient, tenant: Tenant) -> None:
    conn = create_connection(client, tenant)
    created = client.post("/pipelines", json=_body(conn), headers=tenant.editor)
    broken = {"contract": {"expectations": [{"name": "p", "predicate": "amount >> 0"}]}}
    refused = client.patch(f"/pipelines/{created.json()['id']}", json=broken,
                           headers={**tenant.editor, **PATCH, "If-Match": created.headers["etag"]})
    assert_problem(refused, 422, fields={"contract.expectations[0].predicate"})
    after = client.get(f"/pipelines/{created.json()['id']}", headers=tenant.viewer)
    assert after.headers["etag"] == created.headers["etag"] and after.json()["contract"] == {"expectations": RULES}


@pytest.mark.parametrize(("sensitive", "target", "field", "says"), [
    ([{"field": "mail", "action": "hash"}], None, "contract.sensitive[0].field", "not a column"),
    ([{"field": "amount.x", "action": "drop"}], None, "contract.sensitive[0].field", "top-level"),
    ([{"field": "amount", "action": "mask"}], None, "contract.sensitive[0].action", "hash"),
    ([{"field": "id", "action": "hash"}, {"field": "ID", "action": "drop"}], None, "contract.sensitive", "once"),
    ([{"field": "id", "action": "drop"}], {"mode": "upsert", "key": ["id"]}, "contract.sensitive[0].action",
     "hash it"),
    ([{"field": "amount", "action": "redact"}], {"partition_by": ["amount"]}, "contract.sensitive[0].action",
     "hash it"),
])
def test_a_sensitive_field_that_cannot_be_is_a_422(client: TestClient, tenant: Tenant, sensitive: list[dict[str, str]],
                                                  target: dict[str, Any] | None, field: str, says: str) -> None:
    conn = create_connection(client, tenant)
    body = pipeline_body(conn["id"], contract={"sensitive": sensitive})
    body["target"] |= target or {}
    problem = assert_problem(client.post("/pipelines", json=body, headers=tenant.editor), 422, fields={field})
    assert any(says in e["message"] for e in problem["errors"] if e["field"] == field), problem


def test_a_dropped_field_is_no_column_an_expectation_may_test(client: TestClient, tenant: Tenant) -> None:
    conn = create_connection(client, tenant)
    contract = {"sensitive": [{"field": "amount", "action": "drop"}, {"field": "key", "action": "hash"}],
                "expectations": [{"name": "positive", "predicate": "amount > 0"}]}
    refused = client.post("/pipelines", json=pipeline_body(conn["id"], contract=contract), headers=tenant.editor)
    assert_problem(refused, 422, fields={"contract.expectations[0].predicate"})
    contract["expectations"] = [{"name": "known", "predicate": "id IS NOT NULL"}]
    created = client.post("/pipelines", json=pipeline_body(conn["id"], contract=contract), headers=tenant.editor)
    assert created.status_code == 201, created.text
    assert created.json()["contract"] == contract


def test_the_evolution_policy_reads_back_reaches_the_run_and_is_refused_where_it_cannot_apply(
        client: TestClient, tenant: Tenant) -> None:
    conn = create_connection(client, tenant)
    created = client.post("/pipelines", json=pipeline_body(conn["id"], contract={"evolution": "widen"}),
                          headers=tenant.editor)
    assert created.status_code == 201, created.text
    assert created.json()["contract"] == {"evolution": "widen"}
    run = client.post(f"/pipelines/{created.json()['id']}/runs", headers=tenant.editor)
    assert run.status_code == 202, run.text
    with unit_of_work(client.app.state.engine) as session:  # type: ignore[attr-defined]  # the app under test
        row = session.get(Run, uuid.UUID(run.json()["id"]))
        assert row is not None
        spec = build_spec(session, row, session.get(Pipeline, row.pipeline_id),  # type: ignore[arg-type]  # it exists
                          settings=client.app.state.settings, secrets=client.app.state.secrets)  # type: ignore[attr-defined]
    assert spec.contract.evolution == "widen"

    source = pipeline_body(conn["id"])["source"]
    for body, says in [
        (pipeline_body(conn["id"], contract={"evolution": "fail"},
                       source={**source, "value_format": "string", "schema": None}), "decoded row"),
        (pipeline_body(conn["id"], contract={"evolution": "fail"},
                       target={"type": "kafka", "connection_id": conn["id"], "topic": "out"}), "Delta table"),
        (pipeline_body(conn["id"], contract={"evolution": "widen"},
                       target={"type": "delta", "path": "silver/o", "mode": "upsert", "key": ["id"]}), "append tables"),
        (pipeline_body(conn["id"], contract={"evolution": "rename"}), "'add', 'widen' or 'fail'"),
    ]:
        problem = assert_problem(client.post("/pipelines", json=body, headers=tenant.editor), 422,
                                 fields={"contract.evolution"})
        assert any(says in e["message"] for e in problem["errors"]), problem
    assert [p["id"] for p in client.get("/pipelines", headers=tenant.viewer).json()["items"]] == [created.json()["id"]]


def test_widen_on_an_object_store_table_is_a_422(settings: Settings) -> None:
    """delta-spark widens the table, and the run's Spark reaches no object store: refused when written."""
    app = create_app(settings.model_copy(update={"storage_root": "s3://lake/inlet"}))
    try:
        with TestClient(app, raise_server_exceptions=False) as client:
            tenant = make_tenant(client)
            conn = create_connection(client, tenant)
            refused = client.post("/pipelines", json=pipeline_body(conn["id"], contract={"evolution": "widen"}),
                                  headers=tenant.editor)
            problem = assert_problem(refused, 422, fields={"contract.evolution"})
            assert "file system only" in problem["errors"][0]["message"]
            added = client.post("/pipelines", json=pipeline_body(conn["id"], contract={"evolution": "fail"}),
                                headers=tenant.editor)
            assert added.status_code == 201, added.text
    finally:
        truncate_all(app.state.engine)
        app.state.engine.dispose()
