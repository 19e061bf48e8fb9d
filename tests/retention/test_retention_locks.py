"""Pruning beside the hot tables' writers, on PostgreSQL: a batch skips a run row another transaction
holds instead of waiting for it, and while a batch holds the rows it deletes, runs are still created,
claimed and ended. (SQLite has one writer at a time: there a batch is short, which the other tests show.)"""

from __future__ import annotations

import threading
import time
import uuid
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from api.core.config import Settings
from api.core.db import unit_of_work, utcnow
from api.runs.retention import prune_runs
from tests.factories import Tenant, create_pipeline
from tests.retention.helpers import DAY, ended_run, run_ids
from tests.usage.helpers import Clock


@pytest.fixture
def postgres(settings: Settings) -> None:
    if not settings.resolved_database_url.startswith("postgresql"):
        pytest.skip("row locks and SKIP LOCKED are PostgreSQL's; SQLite serialises writers (INLET_TEST_DATABASE_URL)")


def _old_runs(client: TestClient, app: Any, tenant: Tenant, clock: Clock, n: int) -> tuple[str, list[uuid.UUID]]:
    pid = create_pipeline(client, tenant, state="paused")["id"]
    old = utcnow() - 100 * DAY
    return pid, [ended_run(app.state.engine, clock, pid, at=old + timedelta(minutes=i)) for i in range(n)]


def test_a_batch_skips_a_run_row_another_transaction_holds(
    postgres: None, client: TestClient, app: Any, tenant: Tenant, clock: Clock,
) -> None:
    engine = app.state.engine
    pid, runs = _old_runs(client, app, tenant, clock, 4)
    held = runs[0]
    with engine.connect() as holder:  # e.g. a request reading the run FOR UPDATE, left open
        holder.execute(text("SELECT id FROM runs WHERE id = :id FOR UPDATE"), {"id": held})
        began = time.perf_counter()
        with unit_of_work(engine) as session:
            pruned = prune_runs(session, finished_before=utcnow() - 90 * DAY, after=None, limit=100).by_tenant()
        took = time.perf_counter() - began
        holder.rollback()
    assert sum(pruned.values()) == 2 and took < 1.0  # no wait (a wait would end in the 2 s lock timeout)
    assert run_ids(engine, pid) == {held, runs[-1]}  # the held one skipped, the newest kept


def test_runs_are_created_claimed_and_ended_while_a_batch_holds_its_rows(
    postgres: None, client: TestClient, app: Any, tenant: Tenant, clock: Clock,
) -> None:
    engine = app.state.engine
    pid, _ = _old_runs(client, app, tenant, clock, 3)
    batch_open, written = threading.Event(), threading.Event()
    took: list[float] = []

    def writer() -> None:
        batch_open.wait(5)
        began = time.perf_counter()
        ended_run(engine, clock, pid, at=utcnow())  # a new run of the same pipeline, start to end
        took.append(time.perf_counter() - began)
        written.set()

    thread = threading.Thread(target=writer)
    thread.start()
    with unit_of_work(engine) as session:
        pruned = prune_runs(session, finished_before=utcnow() - 90 * DAY, after=None, limit=100).by_tenant()
        batch_open.set()
        assert written.wait(5), "the writer waited on the prune's open batch"
    thread.join(5)
    assert sum(pruned.values()) == 2 and took[0] < 2.0
    assert len(run_ids(engine, pid)) == 2
