"""Enqueue after commit (``api.core.enqueue``): what a unit of work enqueued goes out once, after its
commit, with the dispatcher bound to its database; a rollback sends nothing; a database with none bound
sends nothing now (the scheduler sends what stays due)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence

import pytest
from sqlalchemy import Engine

from api.core.db import make_engine, unit_of_work
from api.core.enqueue import (
    bind,
    enqueue_group_delete,
    enqueue_group_mirror,
    enqueue_run,
    enqueue_webhook_deliveries,
)
from tests.fixtures.dispatch import RecordingDispatcher


@pytest.fixture
def db() -> Iterator[Engine]:
    engine = make_engine("sqlite://")
    yield engine
    engine.dispose()


class Batches(RecordingDispatcher):
    """Also remembers each call's batch of deliveries."""

    def __init__(self) -> None:
        super().__init__()
        self.delivery_batches: list[list[uuid.UUID]] = []

    def send_webhook_deliveries(self, delivery_ids: Sequence[uuid.UUID]) -> int:
        self.delivery_batches.append(list(delivery_ids))
        return super().send_webhook_deliveries(delivery_ids)


def test_what_a_unit_of_work_enqueued_goes_out_after_its_commit(db: Engine) -> None:
    sent = Batches()
    bind(db, sent)
    run, pipeline, connection = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    first, second = uuid.uuid4(), uuid.uuid4()
    with unit_of_work(db) as session:
        enqueue_run(session, run)
        enqueue_webhook_deliveries(session, [first])
        enqueue_group_mirror(session, pipeline)
        enqueue_group_delete(session, connection, "inlet-orders")
        enqueue_webhook_deliveries(session, [second])
        assert (sent.runs, sent.deliveries, sent.group_mirrors, sent.group_deletes) == ([], [], [], []), \
            "nothing leaves before the commit"
    assert sent.runs == [run]
    assert sent.group_mirrors == [pipeline]
    assert sent.group_deletes == [(connection, "inlet-orders")]
    assert sent.delivery_batches == [[first, second]], "the transaction's deliveries go out as one batch"

    with unit_of_work(db):
        pass
    assert sent.runs == [run] and sent.delivery_batches == [[first, second]], "sent once, not at every commit"


def test_a_rolled_back_unit_of_work_sends_nothing(db: Engine) -> None:
    sent = RecordingDispatcher()
    bind(db, sent)
    with pytest.raises(RuntimeError), unit_of_work(db) as session:
        enqueue_run(session, uuid.uuid4())
        enqueue_webhook_deliveries(session, [uuid.uuid4()])
        raise RuntimeError("the change failed")
    assert (sent.runs, sent.deliveries) == ([], [])


def test_a_database_with_no_dispatcher_sends_nothing_now(db: Engine) -> None:
    other, elsewhere = make_engine("sqlite://"), RecordingDispatcher()
    bind(other, elsewhere)  # another app's database and dispatcher
    with unit_of_work(db) as session:
        enqueue_run(session, uuid.uuid4())
    assert elsewhere.runs == []
    other.dispose()
