"""Deliveries on the real path: the API or a run's worker hands them to Redis after the commit, an
``inlet webhook-worker`` process sends them to a receiver on loopback, and retries go through Celery
countdowns. A receiver that never answers holds up deliveries only: runs fail as fast as without it."""

from __future__ import annotations

import time
from typing import Any

from tests.factories import create_pipeline, make_tenant, plaintext_connection_body
from tests.fixtures.kafka import SandboxKafka
from tests.fixtures.stack import Stack
from tests.fixtures.webhook_receiver import Receiver
from tests.webhooks.helpers import create_webhook, deliveries, payload, signature_ok


def test_a_receiver_that_fails_three_times_gets_the_same_event_four_times(stack: Stack, webhook_receiver: Receiver) -> None:
    stack.env["INLET_WEBHOOK_RETRY_BASE_S"] = "0.5"
    stack.start_webhook_worker()
    tenant = make_tenant(stack.client)
    hook = create_webhook(stack.client, tenant, webhook_receiver.url)
    webhook_receiver.fail_next(3, status=500)

    sent = stack.client.post(f"/webhooks/{hook['id']}/test", headers=tenant.editor)
    assert sent.status_code == 202, sent.text

    received = webhook_receiver.wait_for(4, timeout_s=90)
    assert {r.headers["webhook-id"] for r in received} == {sent.json()["event_id"]}
    assert all(signature_ok(hook["secret"], r) for r in received)
    assert {payload(r)["type"] for r in received} == {"webhook.test"}
    logged = stack.wait_for(lambda: [d for d in deliveries(stack.client, tenant, hook["id"]) if d["state"] != "pending"],
                            timeout_s=30, what="the delivery to be recorded")
    assert [(d["state"], d["attempts"], d["response_status"]) for d in logged] == [("succeeded", 4, 204)]  # type: ignore[union-attr]
    time.sleep(2)
    assert len(webhook_receiver.requests) == 4, "nothing is sent after the success"


def _failing_run(stack: Stack, tenant: Any, pipeline: dict[str, Any]) -> tuple[dict[str, Any], float]:
    """Trigger a run and wait for it to fail; the run and the seconds from trigger to failure."""
    started = time.monotonic()
    triggered = stack.client.post(f"/pipelines/{pipeline['id']}/runs", headers=tenant.editor)
    assert triggered.status_code == 202, triggered.text

    def failed() -> dict[str, Any] | None:
        run = stack.client.get(f"/runs/{triggered.json()['id']}", headers=tenant.viewer).json()
        return run if run["state"] in ("failed", "succeeded", "cancelled", "skipped") else None

    run: dict[str, Any] = stack.wait_for(failed, timeout_s=120, every_s=0.1, what="the run to fail")  # type: ignore[assignment]
    assert run["state"] == "failed" and run["error"]["kind"] == "kafka_not_found", (run, stack.log_text())
    return run, time.monotonic() - started


def test_a_receiver_that_never_answers_does_not_slow_runs(stack: Stack, sandbox_kafka: SandboxKafka, webhook_receiver: Receiver) -> None:
    """Runs that fail at planning (their topic does not exist), each raising run.failed: as fast with a
    receiver that holds every delivery open for a minute as with no webhook at all."""
    stack.env["INLET_WEBHOOK_TIMEOUT_S"] = "60"
    stack.start_worker()
    stack.start_webhook_worker()
    tenant = make_tenant(stack.client)
    conn = stack.client.post("/connections", json=plaintext_connection_body(sandbox_kafka.bootstrap_servers),
                             headers=tenant.editor).json()
    pipeline = create_pipeline(stack.client, tenant, conn["id"], source={"connection_id": conn["id"],
                                                                          "topics": ["no-such-topic-here"]},
                               target={"type": "delta", "path": "bronze/never"}, schedule=None, state="paused")
    _failing_run(stack, tenant, pipeline)  # the worker's first run warms it up
    baseline = [_failing_run(stack, tenant, pipeline)[1] for _ in range(2)]

    webhook_receiver.never_answer()
    hook = create_webhook(stack.client, tenant, webhook_receiver.url, events=["run.failed"])
    runs, held = [], []
    for _ in range(3):
        run, seconds = _failing_run(stack, tenant, pipeline)
        runs.append(run)
        held.append(seconds)

    received = webhook_receiver.wait_for(3, timeout_s=30)
    assert max(held) < max(baseline) + 3, f"runs with a silent receiver took {held}, without a webhook {baseline}"
    assert max(held) < 30, "no run waited for the receiver's minute"
    by_run = {payload(r)["data"]["run_id"]: r for r in received}  # threads: in any order
    assert sorted(by_run) == sorted(r["id"] for r in runs)
    for run in runs:
        r = by_run[run["id"]]
        assert signature_ok(hook["secret"], r)
        assert payload(r)["type"] == "run.failed"
        assert payload(r)["data"] == {
            "pipeline_id": pipeline["id"], "pipeline_name": pipeline["name"], "run_id": run["id"], "run_seq": run["seq"],
            "attempt": 1, "trigger": "manual", "failure_kind": "kafka_not_found", "topic": None, "partition": None,
            "will_retry": False, "retry_at": None}
    in_flight = deliveries(stack.client, tenant, hook["id"])
    assert [(d["state"], d["attempts"], d["response_status"]) for d in in_flight] == [("pending", 1, None)] * 3
    print(f"\nrun trigger→failed without a webhook: {[round(s, 2) for s in baseline]} s; "
          f"with a receiver that never answers: {[round(s, 2) for s in held]} s")
