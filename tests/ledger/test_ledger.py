"""The offsets ledger (``api/ledger/service.py``) on its own: the compare-and-set a run commits with,
the ranges it indexes, and the replay windows the offsets API's moves leave and runs consume. The
routes and runs that call it are tested in ``tests/offsets/`` and ``tests/runs/``."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session, select

from api.core.db import unit_of_work
from api.ledger import service as ledger
from api.ledger.models import OffsetReplay, PartitionOffset, RunRange
from api.pipelines.models import Pipeline
from api.runs.models import Run
from tests.factories import Tenant, create_pipeline

pytestmark = pytest.mark.db


@dataclass(frozen=True)
class Planned:
    topic: str
    partition: int
    start: int
    end: int
    committed: int | None


@pytest.fixture
def pipeline_id(client: TestClient, tenant: Tenant) -> uuid.UUID:
    return uuid.UUID(create_pipeline(client, tenant)["id"])


@pytest.fixture
def session(client: TestClient) -> Iterator[Session]:
    with unit_of_work(client.app.state.engine) as session:  # type: ignore[attr-defined]
        yield session


def _pipeline(session: Session, pipeline_id: uuid.UUID) -> Pipeline:
    pipeline = session.get(Pipeline, pipeline_id)
    assert pipeline is not None
    return pipeline


def _commit(session: Session, pipeline: Pipeline, planned: list[Planned],
            replaced: ledger.RangesByTopic | None = None,
            newest: dict[tuple[str, int], datetime] | None = None) -> uuid.UUID:
    seq = len(session.exec(select(Run).where(Run.pipeline_id == pipeline.id)).all()) + 1
    run = Run(tenant_id=pipeline.tenant_id, pipeline_id=pipeline.id, seq=seq, state="succeeded", trigger="manual")
    session.add(run)
    session.flush()
    run_id = run.id
    ledger.commit_run(session, run_id=run_id, pipeline_id=pipeline.id, tenant_id=pipeline.tenant_id,
                      planned=planned, replaced=replaced, newest=newest)
    return run_id


def test_each_partition_keeps_the_newest_record_time_a_run_read_and_the_worst_is_the_oldest(
    session: Session, pipeline_id: uuid.UUID
) -> None:
    pipeline = _pipeline(session, pipeline_id)
    at = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
    assert ledger.newest_committed(session, pipeline.id) is None
    _commit(session, pipeline, [Planned("t", 0, 0, 10, None), Planned("t", 1, 0, 0, None)],
            newest={("t", 0): at})
    _commit(session, pipeline, [Planned("t", 0, 10, 20, 10), Planned("t", 1, 0, 5, 0)],
            newest={("t", 0): at + timedelta(seconds=30), ("t", 1): at + timedelta(seconds=10)})
    # A replay reads older records again: the partition keeps the newest it committed.
    _commit(session, pipeline, [Planned("t", 0, 20, 25, 20)], newest={("t", 0): at - timedelta(hours=1)})

    rows = ledger.positions(session, pipeline)
    assert (rows[("t", 0)].newest_record_at, rows[("t", 1)].newest_record_at) == (
        at + timedelta(seconds=30), at + timedelta(seconds=10))
    assert ledger.newest_committed(session, pipeline.id) == at + timedelta(seconds=10)


def _windows(session: Session, pipeline: Pipeline) -> dict[tuple[str, int], tuple[int, int]]:
    return {tp: (w.start, w.end) for tp, w in ledger.replay_windows(session, pipeline).items()}


def test_a_run_moves_each_partition_from_its_planned_start_and_indexes_what_it_wrote(
    session: Session, pipeline_id: uuid.UUID
) -> None:
    pipeline = _pipeline(session, pipeline_id)
    first = _commit(session, pipeline, [Planned("t", 0, 0, 10, None), Planned("t", 1, 5, 5, None)])
    second = _commit(session, pipeline, [Planned("t", 0, 10, 25, 10), Planned("t", 1, 5, 7, 5)])

    assert ledger.committed(session, pipeline.id) == {("t", 0): 25, ("t", 1): 7}
    assert ledger.positions(session, pipeline)[("t", 0)].last_run_id == second
    holding = lambda offset: [r.run_id for r in ledger.ranges_holding(  # noqa: E731
        session, tenant_id=pipeline.tenant_id, pipeline_id=pipeline.id, topic="t", partition=0, offset=offset)]
    assert (holding(0), holding(9), holding(10), holding(24), holding(25)) == ([first], [first], [second], [second], [])
    # An empty range advances nothing and indexes nothing.
    assert sorted((r.partition, r.start, r.end) for r in session.exec(select(RunRange)).all()) == [
        (0, 0, 10), (0, 10, 25), (1, 5, 7)]


def test_a_run_planned_from_an_offset_that_moved_since_commits_nothing(session: Session, pipeline_id: uuid.UUID) -> None:
    pipeline = _pipeline(session, pipeline_id)
    _commit(session, pipeline, [Planned("t", 0, 0, 10, None), Planned("t", 1, 0, 4, None)])
    stale = [Planned("t", 1, 4, 8, 4), Planned("t", 0, 3, 10, 3)]  # partition 0 was moved meanwhile

    with pytest.raises(ledger.OffsetConflict, match=r"t\[0\]: planned from 3, but the committed offset is now 10"):
        _commit(session, pipeline, stale)

    assert ledger.committed(session, pipeline.id) == {("t", 0): 10, ("t", 1): 4}  # partition 1 rolled back too
    assert len(session.exec(select(RunRange)).all()) == 2


def test_a_never_read_partition_recorded_by_another_plan_is_a_conflict(session: Session, pipeline_id: uuid.UUID) -> None:
    pipeline = _pipeline(session, pipeline_id)
    ledger.record_starts(session, pipeline, [Planned("t", 0, 40, 40, None)])  # planned at ``latest``: 40
    assert ledger.committed(session, pipeline.id) == {("t", 0): 40}

    with pytest.raises(ledger.OffsetConflict):
        _commit(session, pipeline, [Planned("t", 0, 40, 50, None)])
    _commit(session, pipeline, [Planned("t", 0, 40, 50, 40)])
    assert ledger.committed(session, pipeline.id) == {("t", 0): 50}


def test_a_replace_move_back_leaves_a_window_that_runs_replace_then_consume(
    session: Session, pipeline_id: uuid.UUID
) -> None:
    pipeline = _pipeline(session, pipeline_id)
    _commit(session, pipeline, [Planned("t", 0, 0, 100, None), Planned("t", 1, 0, 30, None)])

    ledger.move(session, pipeline, [ledger.OffsetMove("t", 0, before=100, after=60)], replace=True)
    assert ledger.committed(session, pipeline.id)[("t", 0)] == 60
    assert _windows(session, pipeline) == {("t", 0): (60, 100)}

    # A run reading 60..80 replaces those rows (partition 1 has no window) and trims the window.
    planned = [Planned("t", 0, 60, 80, 60), Planned("t", 1, 30, 35, 30)]
    replaced = ledger.replace_ranges_for(session, pipeline, planned)
    assert replaced == {"t": {"0": [60, 80]}}
    _commit(session, pipeline, planned, replaced)
    assert _windows(session, pipeline) == {("t", 0): (80, 100)}

    # The next run reads past the window's end: the window is gone, and later runs append.
    planned = [Planned("t", 0, 80, 120, 80)]
    replaced = ledger.replace_ranges_for(session, pipeline, planned)
    assert replaced == {"t": {"0": [80, 100]}}
    _commit(session, pipeline, planned, replaced)
    assert _windows(session, pipeline) == {}
    assert ledger.replace_ranges_for(session, pipeline, [Planned("t", 0, 120, 130, 120)]) is None


def test_moves_keep_a_window_at_or_above_the_committed_offset(session: Session, pipeline_id: uuid.UUID) -> None:
    pipeline = _pipeline(session, pipeline_id)
    _commit(session, pipeline, [Planned("t", 0, 0, 100, None)])
    ledger.move(session, pipeline, [ledger.OffsetMove("t", 0, before=100, after=50)], replace=True)

    # An append move back below the window keeps it as it is: 20..50 will be appended again, 50..100
    # still replaces what was written there.
    ledger.move(session, pipeline, [ledger.OffsetMove("t", 0, before=50, after=20)], replace=False)
    assert _windows(session, pipeline) == {("t", 0): (50, 100)}
    # A move forward into the window trims it; one past its end drops it.
    ledger.move(session, pipeline, [ledger.OffsetMove("t", 0, before=20, after=70)], replace=False)
    assert _windows(session, pipeline) == {("t", 0): (70, 100)}
    ledger.move(session, pipeline, [ledger.OffsetMove("t", 0, before=70, after=100)], replace=False)
    assert _windows(session, pipeline) == {}
    assert session.exec(select(OffsetReplay)).all() == []


def test_a_move_of_a_never_read_partition_sets_its_position(session: Session, pipeline_id: uuid.UUID) -> None:
    pipeline = _pipeline(session, pipeline_id)
    after = ledger.move(session, pipeline, [ledger.OffsetMove("t", 3, before=None, after=12)], replace=True)
    assert after[("t", 3)].committed == 12
    assert session.get(PartitionOffset, (pipeline.id, "t", 3)) is not None
    assert _windows(session, pipeline) == {}  # nothing was read there, so nothing to replace
