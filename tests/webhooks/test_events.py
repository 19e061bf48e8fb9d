"""Where events come from, in-process: each is stored once per occurrence with one delivery per
subscribed, enabled endpoint, handed to the queue only after its transaction commits, and carries
plain data (no secret, no record). Run outcomes go through the runs domain's own steps
(``api.runs.execution``) with the result a job would report; offsets changes through the API on the
sandbox Kafka; lag alerts through the scheduler's tick. The real worker path is in
test_delivery_stack.py and test_end_to_end.py."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update
from sqlmodel import Session, select

from api.core.config import Settings
from api.core.db import unit_of_work, utcnow
from api.ledger import service as ledger
from api.pipelines.models import Pipeline
from api.pipelines.service import record_observed_lag
from api.runs import execution, lifecycle
from api.runs.models import Run
from api.runs.planning import PartitionPlan, Plan
from api.runs.retry import RetryPolicy
from api.webhooks.events import emit
from api.webhooks.models import WebhookDelivery, WebhookEvent
from spark_jobs.spec import JobFailure, PartitionResult, RunResult, Timings
from tests.factories import PASSWORD, Tenant, create_pipeline, plaintext_connection_body
from tests.fixtures.dispatch import RecordingDispatcher
from tests.fixtures.kafka import SandboxKafka, produce_keyed
from tests.webhooks.helpers import create_webhook
from worker.scheduler import tick

URL = "https://alerts.example.com/inlet"
WORKER = "test-worker"
RETRY = RetryPolicy(max_attempts=3, backoff_s=10.0)


def _events(app: Any) -> list[tuple[str, dict[str, Any]]]:
    with Session(app.state.engine) as session:
        rows = session.exec(select(WebhookEvent).order_by(WebhookEvent.created_at)).all()
        return [(e.type, e.data) for e in rows]


def _deliveries(app: Any) -> list[WebhookDelivery]:
    with Session(app.state.engine) as session:
        return list(session.exec(select(WebhookDelivery).order_by(WebhookDelivery.created_at)).all())


def _pipeline(client: TestClient, tenant: Any, **fields: Any) -> dict[str, Any]:
    return create_pipeline(client, tenant, state="paused", schedule=None, **fields)


def _claimed_run(app: Any, pipeline_id: str) -> uuid.UUID:
    """A new manual run of the pipeline, claimed by WORKER and planned to read 100 records of orders[0]
    from its committed offset."""
    with unit_of_work(app.state.engine) as session:
        run_id = lifecycle.create_run(session, session.get(Pipeline, uuid.UUID(pipeline_id)), trigger="manual").id
    with unit_of_work(app.state.engine) as session:
        run = lifecycle.claim(session, run_id, worker=WORKER, lease_s=60)
        assert run is not None
        committed = ledger.committed(session, run.pipeline_id).get(("orders", 0))
        start = committed or 0
        plan = Plan([PartitionPlan(topic="orders", partition=0, start=start, end=start + 100, earliest=0,
                                   latest=start + 100, committed=committed)])
        lifecycle.store_plan(session, run, session.get(Pipeline, run.pipeline_id), plan)
    return run_id


def _reclaimed(app: Any, run_id: uuid.UUID) -> uuid.UUID:
    """A run queued for a retry, claimed again as if its wait were over (the same plan)."""
    with unit_of_work(app.state.engine) as session:
        session.execute(update(Run).where(Run.id == run_id).values(not_before=utcnow()))
    with unit_of_work(app.state.engine) as session:
        assert lifecycle.claim(session, run_id, worker=WORKER, lease_s=60) is not None
    return run_id


def _result(run_id: uuid.UUID, status: str, *, error: JobFailure | None = None,
            gap: tuple[int, int] | None = None) -> RunResult:
    """What the job reports for the plan of ``_claimed_run`` (first run: [0, 100))."""
    now = datetime.now(UTC)
    read = 100 - (gap[1] - gap[0] if gap else 0)
    return RunResult(run_id=str(run_id), status=status,  # type: ignore[arg-type]
                     partitions=[PartitionResult(topic="orders", partition=0, start=0, end=100, records_read=read,
                                                 gap=gap)] if status == "succeeded" else [],
                     rows_written=read if status == "succeeded" else 0, timings=Timings(started_at=now, finished_at=now),
                     error=error)


def _record(app: Any, run_id: uuid.UUID, result: RunResult) -> execution.Outcome:
    with unit_of_work(app.state.engine) as session:
        return execution.record_result(session=session, run_id=run_id, worker=WORKER, result=result, retry=RETRY)


def test_run_outcomes_raise_their_events_once_each(client: TestClient, app: Any, tenant: Tenant, dispatcher: RecordingDispatcher) -> None:
    every = create_webhook(client, tenant, URL, events=["run.failed", "run.succeeded", "pipeline.recovered",
                                                         "pipeline.data_loss"])
    pipeline = _pipeline(client, tenant)
    about = {"pipeline_id": pipeline["id"], "pipeline_name": pipeline["name"], "trigger": "manual"}

    transient = _claimed_run(app, pipeline["id"])
    assert _record(app, transient, _result(transient, "failed", error=JobFailure(
        kind="kafka_unavailable", message=f"broker down; sasl.password={PASSWORD}"))).verdict == "queued"
    retried = _reclaimed(app, transient)
    assert _record(app, retried, _result(retried, "failed", error=JobFailure(
        kind="data_loss", message="records 0-40 expired", topic="orders", partition=0))).verdict == "failed"
    recovered = _claimed_run(app, pipeline["id"])
    assert _record(app, recovered, _result(recovered, "succeeded", gap=(0, 40))).verdict == "succeeded"

    events = _events(app)
    assert [t for t, _ in events] == ["run.failed", "run.failed", "run.succeeded", "pipeline.recovered",
                                      "pipeline.data_loss"]
    (_, retrying), (_, final), (_, succeeded), (_, back), (_, lost) = events
    retry_at = retrying.pop("retry_at")
    assert datetime.fromisoformat(retry_at) > utcnow()
    assert retrying == about | {"run_id": str(transient), "run_seq": 1, "attempt": 1, "failure_kind": "kafka_unavailable",
                                "topic": None, "partition": None, "will_retry": True}
    assert final == about | {"run_id": str(transient), "run_seq": 1, "attempt": 2, "failure_kind": "data_loss",
                             "topic": "orders", "partition": 0, "will_retry": False, "retry_at": None}
    second = about | {"run_id": str(recovered), "run_seq": 2, "attempt": 1}
    assert succeeded == second | {"records_read": 60, "rows_written": 60, "rows_quarantined": 0,
                                  "duration_s": succeeded["duration_s"]}
    assert back == second | {"failed_runs": 1, "after_failed_attempt": False}
    assert lost == second | {"partitions": [{"topic": "orders", "partition": 0, "from_offset": 0, "to_offset": 40,
                                             "records_lost": 40}], "records_lost": 40}
    assert PASSWORD not in str(events) and "expired" not in str(events), "messages stay on the run's page"
    sent = [d.id for d in _deliveries(app)]
    assert len(sent) == 5 and dispatcher.deliveries == sent and {d.webhook_id for d in _deliveries(app)} == {
        uuid.UUID(every["id"])}


def test_a_retried_run_that_succeeds_is_a_recovery_and_run_succeeded_is_opt_in(client: TestClient, app: Any, tenant: Tenant) -> None:
    default = create_webhook(client, tenant, URL)
    pipeline = _pipeline(client, tenant)

    run = _claimed_run(app, pipeline["id"])
    _record(app, run, _result(run, "failed", error=JobFailure(kind="crashed", message="killed")))
    _record(app, _reclaimed(app, run), _result(run, "succeeded"))
    again = _claimed_run(app, pipeline["id"])
    _record(app, again, _result(again, "succeeded"))

    assert [(t, d.get("after_failed_attempt")) for t, d in _events(app)] == [("run.failed", None),
                                                                             ("pipeline.recovered", True)]
    assert {(d.webhook_id, d.event_type) for d in _deliveries(app)} == {
        (uuid.UUID(default["id"]), "run.failed"), (uuid.UUID(default["id"]), "pipeline.recovered")}


def test_only_enabled_subscribed_endpoints_get_a_delivery(client: TestClient, app: Any, tenant: Tenant, other_tenant: Tenant) -> None:
    one = create_webhook(client, tenant, URL)
    two = create_webhook(client, tenant, "https://pager.example.com/hook", events=["run.failed"])
    create_webhook(client, tenant, "https://off.example.com/", enabled=False)
    create_webhook(client, tenant, "https://lag.example.com/", events=["pipeline.lag_exceeded"])
    create_webhook(client, other_tenant, "https://other.example.com/")
    pipeline = _pipeline(client, tenant)

    run = _claimed_run(app, pipeline["id"])
    _record(app, run, _result(run, "failed", error=JobFailure(kind="target_write", message="refused")))

    (event,) = _events(app)
    assert event[0] == "run.failed"
    delivered = _deliveries(app)
    assert {d.webhook_id for d in delivered} == {uuid.UUID(one["id"]), uuid.UUID(two["id"])}
    assert len({d.event_id for d in delivered}) == 1, "one event, its id shared by every delivery"


def test_nothing_is_stored_or_sent_when_the_change_rolls_back(client: TestClient, app: Any, tenant: Tenant, dispatcher: RecordingDispatcher) -> None:
    create_webhook(client, tenant, URL)

    with pytest.raises(RuntimeError), unit_of_work(app.state.engine) as session:
        assert emit(session, uuid.UUID(tenant.id), "run.failed", {"run_id": "r"}) is not None
        assert dispatcher.deliveries == [], "nothing leaves before the commit"
        raise RuntimeError("the change failed")

    assert _events(app) == [] and _deliveries(app) == [] and dispatcher.deliveries == []
    with unit_of_work(app.state.engine) as session:
        assert emit(session, uuid.UUID(tenant.id), "run.succeeded", {"run_id": "r"}) is None, "nobody subscribes"
    assert _events(app) == []


def _set_lag(app: Any, pipeline_id: str, lag: int, *, caught_up_ago_s: float | None = None) -> None:
    with unit_of_work(app.state.engine) as session:
        pipeline = session.get(Pipeline, uuid.UUID(pipeline_id))
        record_observed_lag(session, pipeline, lag)
        if caught_up_ago_s is not None:
            pipeline.caught_up_at = utcnow() - timedelta(seconds=caught_up_ago_s)


def test_lag_alerts_are_raised_and_cleared_with_hysteresis_by_the_scheduler(
    client: TestClient, app: Any, settings: Settings, tenant: Tenant, dispatcher: RecordingDispatcher,
) -> None:
    create_webhook(client, tenant, URL)
    pipeline = create_pipeline(client, tenant, schedule=None)
    alert = client.put(f"/pipelines/{pipeline['id']}/lag-alert", json={"lag_records": 1000}, headers=tenant.editor)
    assert alert.status_code == 200, alert.text
    engine = app.state.engine

    def step(lag: int) -> list[str]:
        _set_lag(app, pipeline["id"], lag)
        before = len(_events(app))
        tick(engine, dispatcher, settings)
        return [t for t, _ in _events(app)[before:]]

    assert step(400) == []
    assert step(1500) == ["pipeline.lag_exceeded"]
    assert step(2000) == [], "raised once, not on every tick"
    assert step(800) == [], "still above half the threshold: no flapping"
    assert step(499) == ["pipeline.lag_recovered"]
    assert step(900) == [], "under the threshold again"
    assert step(1000) == ["pipeline.lag_exceeded"]
    (_, raised), (_, cleared), _ = [e for e in _events(app)]
    assert raised == {"pipeline_id": pipeline["id"], "pipeline_name": pipeline["name"], "observed_lag": 1500,
                      "observed_at": raised["observed_at"], "behind_s": raised["behind_s"], "freshness_s": None,
                      "threshold": {"lag_records": 1000, "lag_age_s": None, "freshness_s": None}}
    assert cleared["observed_lag"] == 499 and cleared["exceeded_since"]
    status = client.get(f"/pipelines/{pipeline['id']}/lag-alert", headers=tenant.viewer).json()["status"]
    assert (status["state"], status["observed_lag"]) == ("exceeded", 1000)


def test_a_pipeline_behind_for_too_long_raises_the_alert_and_a_paused_one_none(
    client: TestClient, app: Any, settings: Settings, tenant: Tenant, dispatcher: RecordingDispatcher,
) -> None:
    create_webhook(client, tenant, URL)
    active, paused = (create_pipeline(client, tenant, schedule=None, state=state) for state in ("active", "paused"))
    for pipeline in (active, paused):
        client.put(f"/pipelines/{pipeline['id']}/lag-alert", json={"lag_records": 10**6, "lag_age_s": 600},
                   headers=tenant.editor)
        _set_lag(app, pipeline["id"], 10, caught_up_ago_s=900)

    tick(app.state.engine, dispatcher, settings)
    (event,) = _events(app)
    assert event[0] == "pipeline.lag_exceeded" and event[1]["pipeline_id"] == active["id"]
    assert event[1]["behind_s"] >= 900

    _set_lag(app, active["id"], 0)  # caught up
    tick(app.state.engine, dispatcher, settings)
    assert [t for t, _ in _events(app)] == ["pipeline.lag_exceeded", "pipeline.lag_recovered"]


def test_a_newest_record_too_old_raises_the_alert_only_while_records_wait(
    client: TestClient, app: Any, settings: Settings, tenant: Tenant, dispatcher: RecordingDispatcher,
) -> None:
    """``freshness_s``: the newest committed record older than the threshold raises the alert while the
    lag shows records waiting; a caught-up pipeline on a quiet topic is fresh however old its record."""
    create_webhook(client, tenant, URL)
    pipeline = create_pipeline(client, tenant, schedule=None)
    alert = client.put(f"/pipelines/{pipeline['id']}/lag-alert", json={"lag_records": 10**6, "freshness_s": 5},
                       headers=tenant.editor)
    assert alert.status_code == 200, alert.text

    def step(lag: int, newest_ago_s: float) -> list[str]:
        _set_lag(app, pipeline["id"], lag)
        with unit_of_work(app.state.engine) as session:
            row = session.get(Pipeline, uuid.UUID(pipeline["id"]))
            row.newest_record_at = utcnow() - timedelta(seconds=newest_ago_s)
        before = len(_events(app))
        tick(app.state.engine, dispatcher, settings)
        return [t for t, _ in _events(app)[before:]]

    assert step(10, 1) == []
    assert step(0, 3600) == [], "caught up: nothing waits, however old the newest record"
    assert step(10, 8) == ["pipeline.lag_exceeded"]
    assert step(10, 3) == [], "above half the threshold: no flapping"
    assert step(10, 2) == ["pipeline.lag_recovered"]
    (_, raised), _ = _events(app)
    assert raised["freshness_s"] >= 8 and raised["threshold"]["freshness_s"] == 5
    status = client.get(f"/pipelines/{pipeline['id']}", headers=tenant.viewer).json()["status"]["freshness"]
    assert 2 <= status["age_s"] < 60 and status["newest_record_at"]


def test_the_lag_alert_resource(client: TestClient, tenant: Tenant, other_tenant: Tenant) -> None:
    from tests.factories import assert_auth_refused, assert_problem

    pipeline = create_pipeline(client, tenant)
    path = f"/pipelines/{pipeline['id']}/lag-alert"
    assert_problem(client.get(path, headers=tenant.viewer), 404)

    put = client.put(path, json={"lag_records": 5000, "lag_age_s": 3600}, headers=tenant.editor)
    assert put.status_code == 200, put.text
    assert put.json() == {"lag_records": 5000, "lag_age_s": 3600, "freshness_s": None, "pipeline_id": pipeline["id"],
                          "status": {"state": "ok", "since": None, "observed_lag": None, "observed_at": None,
                                     "behind_s": None, "freshness_s": None}}
    read = client.get(path, headers=tenant.viewer)
    assert read.json() == put.json() and read.headers["etag"] == put.headers["etag"]
    assert client.get(f"/pipelines/{pipeline['id']}", headers=tenant.viewer).json()["updated_at"] == pipeline["updated_at"]
    assert_problem(client.put(path, json={"lag_records": 1}, headers={**tenant.editor, "If-Match": '"stale"'}), 412)
    for body, field in [({"lag_records": 0}, "lag_records"), ({"lag_records": 5, "lag_age_s": 5}, "lag_age_s"),
                        ({}, "lag_records"), ({"lag_records": 5, "records": 1}, "records")]:
        assert_problem(client.put(path, json=body, headers=tenant.editor), 422, fields={field})
    for method, role, body in (("GET", "viewer", None), ("PUT", "editor", {"lag_records": 1}), ("DELETE", "editor", None)):
        assert_auth_refused(client, method, path, tenant, role, json=body)
        assert_problem(client.request(method, path, json=body, headers=other_tenant.admin), 404)
    assert client.get(path, headers=tenant.viewer).json()["lag_records"] == 5000

    assert client.delete(path, headers={**tenant.editor, "If-Match": read.headers["etag"]}).status_code == 204
    assert_problem(client.get(path, headers=tenant.viewer), 404)
    assert_problem(client.delete(path, headers=tenant.editor), 404)
    audit = client.get("/audit-events", headers=tenant.viewer, params={"resource_type": "pipeline_lag_alert"}).json()
    assert [e["action"] for e in audit["items"]] == ["delete", "update"]


def test_an_offsets_change_says_what_moved_and_who_moved_it(
    client: TestClient, app: Any, tenant: Tenant, dispatcher: RecordingDispatcher, sandbox_kafka: SandboxKafka, kafka_topic: Callable[..., str],
) -> None:
    topic = kafka_topic(partitions=2)
    produced = produce_keyed(sandbox_kafka.bootstrap_servers, topic, 20)
    create_webhook(client, tenant, URL, events=["offsets.changed"])
    conn = client.post("/connections", json=plaintext_connection_body(sandbox_kafka.bootstrap_servers),
                       headers=tenant.editor).json()
    pipeline = _pipeline(client, tenant, source={"connection_id": conn["id"], "topics": [topic]},
                         target={"type": "delta", "path": "bronze/moved"})
    offsets = f"/pipelines/{pipeline['id']}/offsets"

    dry = client.patch(offsets, json={"reset": "latest", "dry_run": True}, headers=tenant.editor)
    assert dry.status_code == 200 and _events(app) == []
    moved = client.patch(offsets, json={"reset": "latest"}, headers=tenant.editor)
    assert moved.status_code == 200, moved.text
    unchanged = client.patch(offsets, json={"reset": "latest"}, headers=tenant.editor)
    assert unchanged.status_code == 200

    me = client.get("/me", headers=tenant.editor).json()
    (event,) = _events(app)
    assert event == ("offsets.changed", {
        "pipeline_id": pipeline["id"], "pipeline_name": pipeline["name"], "mode": "latest", "replay_mode": "append",
        "partitions": [{"topic": topic, "partition": p, "before": None, "after": len(produced.get(p, []))}
                       for p in range(2)],
        "changed_by": {"actor": f"key:{me['key_id']}", "api_key_id": me["key_id"], "api_key_name": "editor-key"},
    })
    assert len(dispatcher.deliveries) == 1
