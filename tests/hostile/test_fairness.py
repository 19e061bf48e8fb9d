"""A fair share of the workers (issue 29: "one tenant triggers many long runs: another tenant's
one-record run waits behind the whole backlog"). The claim order is decided in the database by the
service the worker calls (``api.runs.execution.claim_next``), tested here without Spark: another
tenant's run is the next one taken after the one executing, tenants take turns, a tenant's
concurrent-runs quota holds, a claim lost to another worker takes the next candidate, and a run whose
worker died is still taken over directly. Then once on a real worker."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session, select

from api.core.db import unit_of_work
from api.core.enqueue import bind
from api.pipelines.models import Pipeline
from api.runs import execution, lifecycle, repository
from api.runs.models import Run
from api.runs.retry import RunFailure
from tests.factories import Tenant, create_connection, create_pipeline, make_tenant, operator
from tests.faults.helpers import sandbox_pipeline, trigger
from tests.fixtures.dispatch import RecordingDispatcher
from tests.fixtures.kafka import SandboxFaults, SandboxKafka, produce_keyed
from tests.fixtures.stack import Stack
from tests.runs.helpers import spark_job_pgids, wait_for_run


def _services(client: TestClient, **settings: Any) -> execution.Services:
    app: Any = client.app
    return execution.Services(settings=app.state.settings.model_copy(update=settings), secrets=app.state.secrets)


def _queue(client: TestClient, tenant: Tenant, n: int) -> list[uuid.UUID]:
    """``n`` queued runs of ``tenant``, one per pipeline, in creation order (created as a trigger does,
    without sending anything)."""
    connection_id = create_connection(client, tenant)["id"]
    pipelines = [create_pipeline(client, tenant, connection_id, schedule=None, state="paused")["id"] for _ in range(n)]
    engine = client.app.state.engine  # type: ignore[attr-defined]
    ids = []
    for pipeline_id in pipelines:
        with unit_of_work(engine) as session:
            pipeline = session.get(Pipeline, uuid.UUID(pipeline_id))
            assert pipeline is not None
            ids.append(lifecycle.create_run(session, pipeline, trigger="manual").id)
    return ids


def _claim(client: TestClient, worker: str, token: uuid.UUID, **settings: Any) -> uuid.UUID | None:
    with unit_of_work(client.app.state.engine) as session:  # type: ignore[attr-defined]
        run = execution.claim_next(session=session, token=token, worker=worker, services=_services(client, **settings))
        return run.id if run is not None else None


def _finish(client: TestClient, run_id: uuid.UUID) -> None:
    with unit_of_work(client.app.state.engine) as session:  # type: ignore[attr-defined]
        run = session.get(Run, run_id)
        assert run is not None
        assert lifecycle.finish(session, run, "cancelled", error=RunFailure("cancelled", "by the test"))


def _runs(client: TestClient) -> dict[uuid.UUID, Run]:
    with Session(client.app.state.engine) as session:  # type: ignore[attr-defined]
        return {run.id: run for run in session.exec(select(Run)).all()}


def test_another_tenants_run_is_next_after_the_one_executing(client: TestClient, tenant: Tenant,
                                                             other_tenant: Tenant) -> None:
    a = _queue(client, tenant, 6)
    assert _claim(client, "w1", a[0]) == a[0]  # A's oldest: the worker is now busy with it
    b = _queue(client, other_tenant, 1)  # B's one run comes after A's whole backlog

    # Whichever run a message names (here A's last), the next worker to ask takes B's run.
    assert _claim(client, "w2", a[-1]) == b[0]
    assert _claim(client, "w3", a[-1]) == a[1]
    runs = _runs(client)
    assert [(runs[r].state, runs[r].worker) for r in (a[0], b[0], a[1])] == [
        ("running", "w1"), ("running", "w2"), ("running", "w3")]
    assert all(runs[r].state == "queued" for r in a[2:])


def test_tenants_with_backlogs_take_turns(client: TestClient, tenant: Tenant, other_tenant: Tenant) -> None:
    """One worker, three tenants: each run ends before the next claim (the worker's loop)."""
    third = make_tenant(client)
    a, b, c = _queue(client, tenant, 3), _queue(client, other_tenant, 3), _queue(client, third, 1)
    order = []
    while (taken := _claim(client, "w", a[0])) is not None:
        order.append(taken)
        _finish(client, taken)
    assert order == [a[0], b[0], c[0], a[1], b[1], a[2], b[2]]


def test_a_tenants_concurrent_runs_quota_holds(client: TestClient, tenant: Tenant, other_tenant: Tenant) -> None:
    done = client.put(f"/tenants/{tenant.id}/quotas", json={"concurrent_runs": 2}, headers=operator())
    assert done.status_code == 200, done.text
    a = _queue(client, tenant, 5)

    # Six workers ask at once: two of A's runs, no more.
    results: list[uuid.UUID | None] = [None] * 6
    barrier = threading.Barrier(6)

    def ask(i: int) -> None:
        barrier.wait()
        results[i] = _claim(client, f"w{i}", a[0])

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(str(r) for r in results if r is not None) == sorted(str(r) for r in a[:2])
    quotas = client.get("/quotas", headers=tenant.viewer).json()["concurrent_runs"]
    assert (quotas["used"], quotas["limit"]) == (2, 2)

    # A message that finds every waiting tenant at its cap is dropped; another tenant is still served.
    assert _claim(client, "w7", a[4]) is None
    b = _queue(client, other_tenant, 1)
    assert _claim(client, "w7", a[4]) == b[0]
    _finish(client, a[0])  # a slot of A's frees: its next run is taken
    assert _claim(client, "w8", b[0]) == a[2]


def test_a_claim_lost_to_another_worker_takes_the_next(client: TestClient, tenant: Tenant,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    a = _queue(client, tenant, 3)
    real = repository.oldest_due
    raced: list[uuid.UUID] = []

    def rival_wins_first(session: Session, tenant_id: uuid.UUID, **kwargs: Any) -> uuid.UUID | None:
        """The candidate is chosen, then another worker claims it before our compare-and-set (on
        PostgreSQL it commits in between; here it changes the row in our transaction)."""
        found = real(session, tenant_id, **kwargs)
        if found is not None and not raced:
            raced.append(found)
            assert lifecycle.claim(session, found, worker="rival", lease_s=60) is not None
        return found

    monkeypatch.setattr(repository, "oldest_due", rival_wins_first)
    assert _claim(client, "us", a[0]) == a[1]
    runs = _runs(client)
    assert raced == [a[0]]
    assert [(runs[r].state, runs[r].worker) for r in a] == [("running", "rival"), ("running", "us"), ("queued", None)]


def test_a_run_whose_worker_died_is_taken_over_directly(client: TestClient, tenant: Tenant,
                                                        other_tenant: Tenant) -> None:
    a = _queue(client, tenant, 2)
    with unit_of_work(client.app.state.engine) as session:  # type: ignore[attr-defined]
        assert lifecycle.claim(session, a[0], worker="dead", lease_s=-1) is not None  # its lease already over
    b = _queue(client, other_tenant, 1)

    # The scheduler sends the expired run again: that message takes it over, though B is fairer.
    assert _claim(client, "w2", a[0]) == a[0]
    runs = _runs(client)
    assert (runs[a[0]].state, runs[a[0]].worker, runs[a[0]].attempt) == ("running", "w2", 2)
    assert _claim(client, "w3", a[1]) == b[0]


def test_a_run_waiting_for_its_retry_is_not_taken(client: TestClient, tenant: Tenant) -> None:
    a = _queue(client, tenant, 1)
    assert _claim(client, "w", a[0]) == a[0]
    with unit_of_work(client.app.state.engine) as session:  # type: ignore[attr-defined]
        run = session.get(Run, a[0])
        assert run is not None and lifecycle.requeue(session, run, error=RunFailure("kafka_unreachable", "t"),
                                                     delay_s=60)
    assert _claim(client, "w", a[0]) is None


def test_without_fair_dispatch_a_message_takes_the_run_it_names(client: TestClient, tenant: Tenant,
                                                                other_tenant: Tenant) -> None:
    """``INLET_RUN_FAIR_DISPATCH=false``: first come, first served (the before of bench/noisy_neighbour.py)."""
    a = _queue(client, tenant, 3)
    b = _queue(client, other_tenant, 1)
    assert [_claim(client, "w", r, run_fair_dispatch=False) for r in (*a, *b)] == [*a, *b]


def test_a_run_that_ends_passes_a_message_on_while_runs_wait(client: TestClient, tenant: Tenant) -> None:
    engine = client.app.state.engine  # type: ignore[attr-defined]
    sent = RecordingDispatcher()
    bind(engine, sent)
    a = _queue(client, tenant, 2)
    with unit_of_work(engine) as session:
        assert execution.pass_token(session=session, services=_services(client)) == a[0]
    with unit_of_work(engine) as session:
        assert execution.pass_token(session=session, services=_services(client, run_fair_dispatch=False)) is None
    for run_id in a:
        assert _claim(client, "w", run_id) == run_id
    with unit_of_work(engine) as session:
        assert execution.pass_token(session=session, services=_services(client)) is None  # nothing waits
    assert sent.runs == [a[0]]


@pytest.mark.slow
def test_on_a_real_worker_another_tenants_run_overtakes_the_backlog(
    stack: Stack, sandbox_kafka: SandboxKafka, kafka_faults: SandboxFaults, kafka_topic: Callable[..., str],
) -> None:
    """One worker (concurrency 1). A's first run is held in its Spark job while A queues three more and
    B one; once A's first run ends, B's is the next the worker runs."""
    topic = kafka_topic(partitions=1)
    produce_keyed(sandbox_kafka.bootstrap_servers, topic, 5)
    a_tenant, first = sandbox_pipeline(stack, sandbox_kafka.bootstrap_servers, topic, "fair/a0")
    conn = first["source"]["connection_id"]
    backlog = [create_pipeline(stack.client, a_tenant, conn, schedule=None, state="paused", target={
        "type": "delta", "path": f"fair/a{i}"}, source={"connection_id": conn, "topics": [topic],
                                                         "value_format": "raw"}) for i in range(1, 4)]
    b_tenant, b_pipeline = sandbox_pipeline(stack, sandbox_kafka.bootstrap_servers, topic, "fair/b")
    stack.start_worker(concurrency=1)

    kafka_faults.hold_fetches()
    held = trigger(stack, a_tenant, first)
    stack.wait_for(lambda: spark_job_pgids(held), timeout_s=240, every_s=0.2, what="A's first run in its Spark job")
    a_runs = [trigger(stack, a_tenant, p) for p in backlog]
    b_run = trigger(stack, b_tenant, b_pipeline)
    kafka_faults.reset()

    finished = {r: wait_for_run(stack, r, a_tenant.viewer) for r in [held, *a_runs]}
    finished[b_run] = wait_for_run(stack, b_run, b_tenant.viewer)
    assert all(run["state"] == "succeeded" for run in finished.values()), stack.log_text()
    order = sorted(finished, key=lambda r: finished[r]["started_at"])
    assert order[:2] == [held, b_run], (order, stack.log_text())
