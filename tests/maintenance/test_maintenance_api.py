"""``/pipelines/{id}/maintenance`` and the maintenance task end to end, in process: the policy in the
definition, the table's health, a dry run, a task asked for (once), taken by one worker at a time, done
with delta-rs on the pipeline's real table folder, recorded (table, audit log, metrics); and runs'
commits making compaction due. The broker is the recording stand-in (tests/fixtures/dispatch.py)."""

from __future__ import annotations

import logging
import uuid
from datetime import datetime, timedelta
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from api.core.db import unit_of_work, utcnow
from api.maintenance import execution
from api.maintenance.models import TableMaintenance
from api.maintenance.triggers import record_commit
from api.pipelines.models import Pipeline
from tests.factories import assert_auth_refused, assert_problem, create_connection, create_pipeline, operator
from tests.fixtures.dispatch import RecordingDispatcher, app, dispatcher  # noqa: F401  (the fixtures)
from tests.portal.helpers import sign_in
from worker.maintenance import TableMaintainer

SMALL = {"compaction": {"min_small_files": 3, "max_commits": 5}, "vacuum": {"retention_hours": 168}}


def _pipeline(client: TestClient, tenant: Any, maintenance: dict[str, Any] | None = None) -> dict[str, Any]:
    target: dict[str, Any] = {"type": "delta", "path": f"bronze/t{uuid.uuid4().hex[:6]}", "partition_by": []}
    if maintenance is not None:
        target["maintenance"] = maintenance
    return create_pipeline(client, tenant, target=target, state="paused")


def _fill(uri: str, appends: int) -> None:
    for i in range(appends):
        write_deltalake(uri, pa.table({"topic": ["t"] * 5, "partition": [0] * 5, "offset": list(range(i * 5, i * 5 + 5))}),
                        mode="append")


def test_the_policy_is_in_the_definition_with_its_defaults_and_its_floor(client: TestClient, tenant) -> None:  # type: ignore[no-untyped-def]
    plain = _pipeline(client, tenant)
    assert "maintenance" not in plain["target"]  # read back as written: defaults stay out
    status = client.get(f"/pipelines/{plain['id']}/maintenance", headers=tenant.viewer)
    assert status.status_code == 200, status.text
    body = status.json()
    assert body["policy"] == {
        "enabled": True,
        "compaction": {"enabled": True, "target_file_mb": 128, "min_small_files": 50, "max_commits": 100,
                       "z_order_by": []},
        "vacuum": {"enabled": True, "retention_hours": 168, "interval_hours": 24},
        "checkpoints": {"interval": 10, "log_retention_days": 30},
    }
    assert body["table"] == {"files": 0, "small_files": 0, "bytes": 0, "version": None, "observed_at": None,
                             "files_since_compaction": 0, "small_files_since_compaction": 0,
                             "commits_since_compaction": 0}
    assert (body["last_compaction"], body["last_vacuum"], body["running"]) == (None, None, False)

    written = _pipeline(client, tenant, {"compaction": {"z_order_by": ["id"]}})
    assert written["target"]["maintenance"] == {"compaction": {"z_order_by": ["id"]}}

    conn = create_connection(client, tenant)
    for bad, field in (({"vacuum": {"retention_hours": 24}}, "target.maintenance.vacuum.retention_hours"),
                       # pydantic names the tagged union's member: target.delta.*
                       ({"compaction": {"target_file_mb": 0}}, "target.delta.maintenance.compaction.target_file_mb"),
                       ({"compaction": {"z_order_by": ["no-dash"]}},
                        "target.delta.maintenance.compaction.z_order_by[0]"),
                       ({"vacuums": {}}, "target.delta.maintenance.vacuums")):
        refused = client.post("/pipelines", headers=tenant.editor, json={
            "name": f"bad-{uuid.uuid4().hex[:6]}", "source": {"connection_id": conn["id"], "topics": ["orders"]},
            "target": {"type": "delta", "path": "bronze/bad", "maintenance": bad}})
        assert_problem(refused, 422, fields={field})


def test_a_continuous_pipeline_takes_its_own_defaults_where_its_policy_is_silent(  # type: ignore[no-untyped-def]
    client: TestClient, tenant, dispatcher: RecordingDispatcher,  # noqa: F811 (the fixture imported above)
) -> None:
    target = {"type": "delta", "path": f"bronze/c{uuid.uuid4().hex[:6]}",
              "maintenance": {"compaction": {"max_commits": 500}}}
    made = create_pipeline(client, tenant, target=target, state="paused", schedule={"continuous": True})
    assert made["target"]["maintenance"] == {"compaction": {"max_commits": 500}}  # read back as written
    policy = client.get(f"/pipelines/{made['id']}/maintenance", headers=tenant.viewer).json()["policy"]
    # the continuous defaults where the policy is silent; what it wrote stays
    assert (policy["compaction"]["min_small_files"], policy["compaction"]["max_commits"]) == (10, 500)
    assert policy["checkpoints"] == {"interval": 10, "log_retention_days": 7}

    ident, engine = uuid.UUID(made["id"]), client.app.state.engine
    small_run = {"files_written": 1, "bytes_written": 4000, "delta_version": 1}
    asked = []
    for _ in range(10):
        with unit_of_work(engine) as session:
            asked.append(record_commit(session, session.get(Pipeline, ident), small_run))
    assert asked == [False] * 9 + [True]  # the tenth small file made it due
    assert dispatcher.table_maintenance == [ident]
    read = client.get(f"/pipelines/{made['id']}", headers=tenant.viewer).json()
    assert read["status"]["table"]["compaction_due"] is True

    # the schedule decides: made a batch pipeline, it takes the batch defaults again
    changed = client.patch(f"/pipelines/{made['id']}", headers=tenant.editor,
                           json={"schedule": {"continuous": None, "interval_seconds": 60}})  # a merge patch
    assert changed.status_code == 200, changed.text
    assert changed.json()["status"]["table"]["compaction_due"] is False  # 10 small files of 50
    policy = client.get(f"/pipelines/{made['id']}/maintenance", headers=tenant.viewer).json()["policy"]
    assert (policy["compaction"]["min_small_files"], policy["checkpoints"]["log_retention_days"]) == (50, 30)


def test_dry_run_then_a_task_compacts_vacuums_and_records_it(  # type: ignore[no-untyped-def]
    client: TestClient, tenant, dispatcher: RecordingDispatcher,  # noqa: F811 (the fixture imported above)
) -> None:
    created = _pipeline(client, tenant, SMALL)
    ident, uri = created["id"], created["status"]["target_uri"]
    empty = client.post(f"/pipelines/{ident}/maintenance", json={"dry_run": True}, headers=tenant.editor)
    assert empty.status_code == 202, empty.text
    assert empty.json()["preview"]["table"] is None  # no table yet: nothing to do

    _fill(uri, 6)
    dry = client.post(f"/pipelines/{ident}/maintenance", json={"dry_run": True}, headers=tenant.editor).json()
    assert (dry["dry_run"], dry["queued"], dry["steps"]) == (True, False, ["compact", "vacuum", "checkpoint"])
    preview = dry["preview"]
    assert (preview["files_to_compact"], preview["files_to_write"], preview["files_to_vacuum"]) == (6, 1, 0)
    assert preview["table"]["files"] == preview["table"]["small_files"] == 6
    assert preview["properties_to_set"]["delta.checkpointInterval"] == "10"
    assert preview["protocol"] == {"reader_version": 1, "writer_version": 2, "features": ["appendOnly", "invariants"],
                                   "refused": {}, "by_delta_spark": []}
    assert client.get(f"/pipelines/{ident}/maintenance", headers=tenant.viewer).json()["protocol"] is None  # none read yet
    assert dispatcher.table_maintenance == []  # a dry run sends nothing

    asked = client.post(f"/pipelines/{ident}/maintenance", json={"steps": ["compact"]}, headers=tenant.editor)
    assert asked.status_code == 202 and asked.json()["queued"] is True
    again = client.post(f"/pipelines/{ident}/maintenance", json={}, headers=tenant.editor)
    assert again.json()["queued"] is False  # one task pending: it does these steps too
    assert dispatcher.table_maintenance == [uuid.UUID(ident)]

    engine = client.app.state.engine
    settings = client.app.state.settings
    assert TableMaintainer(settings, engine).maintain(uuid.UUID(ident)) == "done"

    status = client.get(f"/pipelines/{ident}/maintenance", headers=tenant.viewer).json()
    assert status["last_compaction"]["outcome"] == "done"
    assert (status["last_compaction"]["files_removed"], status["last_compaction"]["files_added"]) == (6, 1)
    assert status["last_vacuum"]["outcome"] == "nothing"  # nothing removed long enough ago
    assert status["last_checkpoint"]["outcome"] == "done"
    assert (status["table"]["files"], status["table"]["small_files"]) == (1, 1)
    assert status["totals"]["compactions"] == 1 and status["running"] is False and status["requested_at"] is None
    assert status["protocol"] == preview["protocol"]  # as the task read it
    assert DeltaTable(uri).to_pyarrow_table().num_rows == 30
    assert sorted(DeltaTable(uri).to_pyarrow_table().column("offset").to_pylist()) == list(range(30))

    events = client.get("/audit-events", params={"resource_id": ident, "sort": "created_at"},
                        headers=tenant.viewer).json()["items"]
    maintained = [e for e in events if e["action"] in ("maintenance_requested", "maintain")]
    assert [e["action"] for e in maintained] == ["maintenance_requested", "maintenance_requested", "maintain"]
    assert maintained[-1]["after"]["compaction"]["outcome"] == "done"
    assert maintained[-1]["actor"] == maintained[0]["actor"]  # the task is recorded as asked by its caller

    scraped = client.get("/metrics", headers=operator())
    samples = {(s.name, s.labels.get("pipeline_id")): s.value
               for family in text_string_to_metric_families(scraped.text) for s in family.samples}
    assert samples[("inlet_table_files", ident)] == 1
    assert samples[("inlet_table_compactions_total", ident)] == 1


def test_the_tables_protocol_and_the_operations_its_features_refuse_are_shown(  # type: ignore[no-untyped-def]
    client: TestClient, tenant,
) -> None:
    created = _pipeline(client, tenant, SMALL)
    ident, uri = created["id"], created["status"]["target_uri"]
    _fill(uri, 2)
    DeltaTable(uri).alter.add_constraint({"non_negative": '"offset" >= 0'})  # as another engine's ADD CONSTRAINT

    preview = client.post(f"/pipelines/{ident}/maintenance", json={"dry_run": True}, headers=tenant.editor).json()["preview"]

    protocol = preview["protocol"]
    assert (protocol["reader_version"], protocol["writer_version"]) == (1, 3)
    assert protocol["features"] == ["appendOnly", "checkConstraints", "invariants"]
    assert sorted(protocol["refused"]) == ["history_merge", "merge"]  # maintenance still runs
    assert all("CHECK constraints (non_negative)" in why for why in protocol["refused"].values())
    assert protocol["by_delta_spark"] == ["append", "replace"]  # which checks them (docs/maintenance.md)
    assert preview["files_to_compact"] == 2

    # A task reads it too: the maintenance status and the portal's page show it from then on.
    assert TableMaintainer(client.app.state.settings, client.app.state.engine).maintain(uuid.UUID(ident)) == "done"
    assert client.get(f"/pipelines/{ident}/maintenance", headers=tenant.viewer).json()["protocol"] == protocol
    sign_in(client, tenant.keys["viewer"])
    page = client.get(f"/portal/pipelines/{ident}").text
    shown = page[page.index('id="table-protocol"'):]
    shown = shown[:shown.index("</dd>")]
    assert "reader 1, writer 3" in shown and "checkConstraints" in shown and "by delta-spark: append, replace" in shown
    assert "merge refused: " in shown and "non_negative" in shown


@pytest.mark.slow
def test_a_compaction_past_the_platforms_size_runs_as_a_spark_job_and_is_recorded_alike(  # type: ignore[no-untyped-def]
    client: TestClient, tenant, dispatcher: RecordingDispatcher, caplog: pytest.LogCaptureFixture,  # noqa: F811
) -> None:
    created = _pipeline(client, tenant, SMALL)
    ident, uri = created["id"], created["status"]["target_uri"]
    _fill(uri, 6)
    assert client.post(f"/pipelines/{ident}/maintenance", json={"steps": ["compact"]}, headers=tenant.editor).json()["queued"]
    # INLET_SPARK_COMPACT_MIN_MB=0: every compaction goes to a spark-submit of its own (here on a local master).
    settings = client.app.state.settings.model_copy(update={"spark_compact_min_mb": 0, "spark_master": "local[2]"})

    with caplog.at_level(logging.INFO, logger="worker.launch.compaction"):
        assert TableMaintainer(settings, client.app.state.engine).maintain(uuid.UUID(ident)) == "done"

    assert any("compaction of" in r.getMessage() and ": done" in r.getMessage() for r in caplog.records
               if r.name == "worker.launch.compaction"), "the job's own output, logged by the worker"
    status = client.get(f"/pipelines/{ident}/maintenance", headers=tenant.viewer).json()
    assert status["last_compaction"]["outcome"] == "done"
    assert (status["last_compaction"]["files_removed"], status["last_compaction"]["files_added"]) == (6, 1)
    assert (status["table"]["files"], status["table"]["small_files"]) == (1, 1)
    assert sorted(DeltaTable(uri).to_pyarrow_table()["offset"].to_pylist()) == list(range(30))


def test_runs_commits_make_compaction_due_and_one_task_holds_a_table(  # type: ignore[no-untyped-def]
    client: TestClient, tenant, dispatcher: RecordingDispatcher,  # noqa: F811 (the fixture imported above)
) -> None:
    ident = uuid.UUID(_pipeline(client, tenant, SMALL)["id"])
    engine, settings = client.app.state.engine, client.app.state.settings
    small_run = {"files_written": 1, "bytes_written": 4000, "delta_version": 1}
    asked = []
    for _ in range(3):
        with unit_of_work(engine) as session:
            asked.append(record_commit(session, session.get(Pipeline, ident), small_run))
    assert asked == [False, False, True]  # the third small file made it due; one task sent
    assert dispatcher.table_maintenance == [ident]
    with unit_of_work(engine) as session:
        assert record_commit(session, session.get(Pipeline, ident), small_run) is False  # asked for already

    with unit_of_work(engine) as session:
        first = execution.claim(session=session, pipeline_id=ident, worker="w1", settings=settings)
    with unit_of_work(engine) as session:
        second = execution.claim(session=session, pipeline_id=ident, worker="w2", settings=settings)
    # compaction by the trigger; the vacuum (and checkpoint) too, never done on this table yet
    assert isinstance(first, execution.Claimed) and first.steps == ("compact", "vacuum", "checkpoint")
    assert second == "busy"
    assert first.seen == {"files": 4, "small": 4, "commits": 4}

    with unit_of_work(engine) as session:
        row = session.get(TableMaintenance, ident)
        assert row is not None and row.lease_owner == "w1" and row.lease_expires_at > utcnow()


def test_routes_refuse_roles_other_tenants_kafka_targets_and_bad_bodies(client: TestClient, tenant,
                                                                       other_tenant) -> None:  # type: ignore[no-untyped-def]
    ident = _pipeline(client, tenant)["id"]
    path = f"/pipelines/{ident}/maintenance"
    assert_auth_refused(client, "GET", path, tenant, "viewer")
    assert_auth_refused(client, "POST", path, tenant, "editor", json={"dry_run": True})
    assert_problem(client.get(path, headers=other_tenant.viewer), 404)
    assert_problem(client.post(path, json={}, headers=other_tenant.editor), 404)
    assert_problem(client.get(f"/pipelines/{uuid.uuid4()}/maintenance", headers=tenant.viewer), 404)
    for body, field in (({"steps": ["defrag"]}, "steps[0]"), ({"steps": []}, "steps"),
                        ({"steps": ["compact", "compact"]}, "steps"), ({"dry_run": "maybe"}, "dry_run"),
                        ({"force": True}, "force")):
        assert_problem(client.post(path, json=body, headers=tenant.editor), 422, fields={field})

    conn = create_connection(client, tenant)
    kafka = create_pipeline(client, tenant, state="paused",
                            target={"type": "kafka", "connection_id": conn["id"], "topic": "orders.copy"})
    assert_problem(client.get(f"/pipelines/{kafka['id']}/maintenance", headers=tenant.viewer), 409)


def test_the_pipeline_read_embeds_the_table_health_runs_and_tasks_recorded(  # type: ignore[no-untyped-def]
    client: TestClient, tenant, other_tenant, dispatcher: RecordingDispatcher,  # noqa: F811 (the fixture imported above)
) -> None:
    created = _pipeline(client, tenant, SMALL)
    ident, uri = created["id"], created["status"]["target_uri"]
    assert created["status"]["table"] is None  # nothing recorded yet
    engine = client.app.state.engine
    _fill(uri, 3)
    for version in (1, 2, 3):
        with unit_of_work(engine) as session:
            record_commit(session, session.get(Pipeline, uuid.UUID(ident)),
                          {"files_written": 1, "bytes_written": 1000, "delta_version": version})

    read = client.get(f"/pipelines/{ident}", headers=tenant.viewer)
    assert read.status_code == 200, read.text
    table = read.json()["status"]["table"]
    since = table["tracked_since"]
    assert table == {
        "files": 3, "small_files": 3, "bytes": 3000, "version": 3, "observed_at": None,
        "files_since_compaction": 3, "small_files_since_compaction": 3, "commits_since_compaction": 3,
        "last_compaction_at": None, "last_compaction_outcome": None, "last_vacuum_at": None,
        "last_vacuum_outcome": None, "tracked_since": since, "recorded_at": table["recorded_at"],
        "compaction_due": True,  # min_small_files 3
        "vacuum_due_at": (datetime.fromisoformat(since) + timedelta(hours=24)).isoformat().replace("+00:00", "Z"),
        "due": True,
    }
    listed = client.get("/pipelines", params={"name": created["name"]}, headers=tenant.viewer).json()["items"]
    assert [p["status"]["table"] for p in listed] == [table]  # the list shows what is stored, reading no table
    assert read.headers["etag"] == client.get(f"/pipelines/{ident}", headers=tenant.viewer).headers["etag"]
    assert read.json()["updated_at"] == created["updated_at"]  # status only: no new revision
    sign_in(client, tenant.keys["viewer"])
    page = client.get("/portal/pipelines", params={"name": created["name"]})
    assert '<td class="num">3 <small>(3 small; maintenance due)</small></td>' in page.text

    assert TableMaintainer(client.app.state.settings, engine).maintain(uuid.UUID(ident)) == "done"
    after = client.get(f"/pipelines/{ident}", headers=tenant.viewer).json()
    table = after["status"]["table"]
    assert (table["files"], table["small_files"], table["version"]) == (1, 1, DeltaTable(uri).version())
    assert (table["files_since_compaction"], table["small_files_since_compaction"],
            table["commits_since_compaction"]) == (0, 0, 0)
    assert (table["last_compaction_outcome"], table["last_vacuum_outcome"]) == ("done", "nothing")
    assert table["last_compaction_at"] is not None and table["observed_at"] is not None
    assert (table["compaction_due"], table["due"]) == (False, False)
    maintenance = client.get(f"/pipelines/{ident}/maintenance", headers=tenant.viewer).json()["table"]
    assert {k: table[k] for k in maintenance} == maintenance  # the same figures as the maintenance read

    assert_problem(client.get(f"/pipelines/{ident}", headers=other_tenant.viewer), 404)
    conn = create_connection(client, tenant)
    kafka = create_pipeline(client, tenant, state="paused",
                            target={"type": "kafka", "connection_id": conn["id"], "topic": "orders.copy"})
    assert client.get(f"/pipelines/{kafka['id']}", headers=tenant.viewer).json()["status"]["table"] is None
