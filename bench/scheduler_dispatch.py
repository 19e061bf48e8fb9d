"""Scheduler dispatch time for many due pipelines.

Creates N active pipelines across T tenants whose slots are all due, then times scheduler ticks
(claim every due slot by compare-and-set and send it), making every slot due again before each:
  (a) messages counted, not sent: the database's share, the floor;
  (b) with --redis-url, one Celery message per send as the scheduler used to: the reference;
  (c) with --redis-url, the scheduler's batched sends (one pipelined batch per claim batch);
and a last, idle tick.

    .venv/bin/python bench/scheduler_dispatch.py [--pipelines 10000] [--tenants 100]
        [--database-url postgresql+psycopg://…] [--redis-url redis://127.0.0.1:6379/15]
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta

from sqlalchemy import Engine, insert, update

from api.core.config import Settings
from api.core.db import make_engine, unit_of_work, utcnow
from api.core.dispatch import FIRE_SCHEDULE, CeleryDispatcher
from api.core.migrate import upgrade_to_head
from api.models import Connection, Pipeline, Tenant
from worker.scheduler import tick


class CountingDispatcher:
    def __init__(self) -> None:
        self.schedules = 0
        self.runs = 0

    def send_run(self, run_id: uuid.UUID) -> None:
        self.runs += 1

    def send_schedules(self, slots: list[object]) -> int:
        self.schedules += len(slots)
        return len(slots)


class OneMessageEach(CeleryDispatcher):
    """The reference: a ``send_task`` (a connection from the pool, a round trip) per slot."""

    def send_schedules(self, slots: Sequence[tuple[uuid.UUID, datetime]]) -> int:
        for pipeline_id, slot in slots:
            self._send(FIRE_SCHEDULE, [str(pipeline_id), slot.isoformat()])
        return len(slots)


def make_due(engine: Engine) -> None:
    with unit_of_work(engine) as session:
        session.execute(update(Pipeline).values(next_run_at=utcnow() - timedelta(minutes=1)))


def seed(engine: Engine, pipelines: int, tenants: int) -> None:
    due = utcnow() - timedelta(minutes=1)
    now = utcnow()
    tenant_ids = [uuid.uuid4() for _ in range(tenants)]
    conn_ids = {t: uuid.uuid4() for t in tenant_ids}
    with unit_of_work(engine) as session:
        session.execute(insert(Tenant), [{"id": t, "name": f"bench-{t.hex[:8]}", "created_at": now} for t in tenant_ids])
        session.execute(insert(Connection), [
            {"id": conn_ids[t], "tenant_id": t, "name": "kafka", "bootstrap_servers": "b:9092",
             "security_protocol": "PLAINTEXT", "options": {}, "revision": 1, "created_at": now, "updated_at": now}
            for t in tenant_ids])
        rows = []
        for i in range(pipelines):
            t = tenant_ids[i % tenants]
            rows.append({
                "id": uuid.uuid4(), "tenant_id": t, "name": f"p-{i}", "connection_id": conn_ids[t],
                "source_as_written": {"connection_id": str(conn_ids[t]), "topics": ["orders"]},
                "target_as_written": {"type": "delta", "path": f"p{i}"},
                "schedule_as_written": {"interval_seconds": 300},
                "state": "active", "next_run_at": due, "last_run_seq": 0, "revision": 1,
                "created_at": now, "updated_at": now,
            })
        session.execute(insert(Pipeline), rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pipelines", type=int, default=10_000)
    parser.add_argument("--tenants", type=int, default=100)
    parser.add_argument("--database-url")
    parser.add_argument("--redis-url")
    parser.add_argument("--batch", type=int, default=500)
    args = parser.parse_args()

    url = args.database_url or f"sqlite:///{tempfile.mkdtemp()}/bench.db"
    upgrade_to_head(url)
    engine = make_engine(url)
    started = time.perf_counter()
    seed(engine, args.pipelines, args.tenants)
    print(f"seeded {args.pipelines} due pipelines across {args.tenants} tenants in {time.perf_counter() - started:.1f}s "
          f"({engine.dialect.name})")

    settings = Settings(database_url=url, scheduler_batch_size=args.batch)
    phases: list[tuple[str, object]] = [("(a) counted, not sent (database only)", CountingDispatcher())]
    if args.redis_url:
        phases += [("(b) one message per send (reference)", OneMessageEach(args.redis_url)),
                   ("(c) batched sends (the scheduler)", CeleryDispatcher(args.redis_url))]
    seconds = {}
    for label, dispatcher in phases:
        make_due(engine)
        report = tick(engine, dispatcher, settings)  # type: ignore[arg-type]
        seconds[label[:3]] = report.seconds
        print(f"{label}: {report.fired} slots fired in {report.seconds:.2f}s "
              f"({report.fired / report.seconds:,.0f} pipelines/s, batch {args.batch})")
    if args.redis_url:
        print(f"ratio (b)/(c): batched sends are {seconds['(b)'] / seconds['(c)']:.1f}x faster than one message each")
    idle = tick(engine, CountingDispatcher(), settings)  # type: ignore[arg-type]
    print(f"idle tick (nothing due): {idle.seconds * 1000:.1f} ms")


if __name__ == "__main__":
    main()
