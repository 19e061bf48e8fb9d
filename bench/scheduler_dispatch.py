"""Scheduler dispatch time for many due pipelines.

Creates N active pipelines across T tenants whose slots are all due, then times one scheduler
tick (claim every due slot by compare-and-set and send it) and a second, idle tick. Prints figures.

    .venv/bin/python bench/scheduler_dispatch.py [--pipelines 10000] [--tenants 100]
        [--database-url postgresql+psycopg://…] [--redis-url redis://127.0.0.1:6379/15]

Without --redis-url the messages are counted, not sent, so the figure is the database's share.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from datetime import timedelta

from sqlalchemy import insert

from api.core.config import Settings
from api.core.db import make_engine, unit_of_work, utcnow
from api.core.migrate import upgrade_to_head
from api.models import Connection, Pipeline, Tenant
from api.core.dispatch import CeleryDispatcher
from worker.scheduler import tick


class CountingDispatcher:
    def __init__(self) -> None:
        self.schedules = 0
        self.runs = 0

    def send_run(self, run_id: uuid.UUID) -> None:
        self.runs += 1

    def send_schedule(self, pipeline_id: uuid.UUID, slot: object) -> None:
        self.schedules += 1


def seed(engine, pipelines: int, tenants: int) -> None:  # type: ignore[no-untyped-def]
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
                "source": {"connection_id": str(conn_ids[t]), "topics": ["orders"]},
                "target": {"type": "delta", "path": f"p{i}"}, "schedule": {"interval_seconds": 300},
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
    dispatcher = CeleryDispatcher(args.redis_url) if args.redis_url else CountingDispatcher()
    report = tick(engine, dispatcher, settings)
    print(f"dispatch tick: {report.fired} slots fired in {report.seconds:.2f}s "
          f"({report.fired / report.seconds:,.0f} pipelines/s, batch {args.batch}, "
          f"{'sent to Redis' if args.redis_url else 'counted, not sent'})")
    idle = tick(engine, dispatcher, settings)
    print(f"idle tick (nothing due): {idle.seconds * 1000:.1f} ms")


if __name__ == "__main__":
    main()
