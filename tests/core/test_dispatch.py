"""What the scheduler hands Celery (``api.core.dispatch.CeleryDispatcher``), on a real Redis: a tick's
schedule slots in one pipelined batch, each a ``fire_schedule`` message as a worker consumes it; a
table's maintenance on its own queue."""

from __future__ import annotations

import base64
import json
import socket
import uuid
from datetime import UTC, datetime

import redis

from api.core.dispatch import FIRE_SCHEDULE, MAINTAIN_TABLE, MAINTENANCE_QUEUE, QUEUE, CeleryDispatcher


def test_a_batch_of_schedule_slots_reaches_the_queue_as_one_message_each(redis_url: str) -> None:
    slots = [(uuid.uuid4(), datetime(2026, 11, 23, 12, i % 60, tzinfo=UTC)) for i in range(1203)]

    assert CeleryDispatcher(redis_url).send_schedules(slots) == len(slots)

    queued = [json.loads(raw) for raw in redis.Redis.from_url(redis_url).lrange(QUEUE, 0, -1)]
    assert len(queued) == len(slots)
    assert {m["headers"]["task"] for m in queued} == {FIRE_SCHEDULE}
    args = sorted(json.loads(base64.b64decode(m["body"]))[0] for m in queued)
    assert args == sorted([str(p), s.isoformat()] for p, s in slots)


def test_a_tables_maintenance_goes_to_its_own_queue(redis_url: str) -> None:
    pipeline_id = uuid.uuid4()

    assert CeleryDispatcher(redis_url).send_table_maintenance(pipeline_id) is True

    broker = redis.Redis.from_url(redis_url)
    queued = [json.loads(raw) for raw in broker.lrange(MAINTENANCE_QUEUE, 0, -1)]
    assert [(m["headers"]["task"], json.loads(base64.b64decode(m["body"]))[0]) for m in queued] == [
        (MAINTAIN_TABLE, [str(pipeline_id)])]
    assert broker.llen(QUEUE) == 0  # never among the runs


def test_a_broker_that_is_down_fails_the_batch_without_raising() -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    dispatcher = CeleryDispatcher(f"redis://127.0.0.1:{port}/0")

    assert dispatcher.send_schedules([(uuid.uuid4(), datetime.now(UTC))]) == 0
    assert dispatcher.send_schedules([]) == 0
