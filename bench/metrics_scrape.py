"""Scrape time of ``/metrics``' collector with few and many runs in the database, today's collector
(the usage ledger's totals) beside the one it replaced (SQL SUMs and a duration scan over ``runs``),
both measured in this same run on the same data.

Seeds T tenants and P pipelines with the ledger rows their runs produce, then runs in two steps
(``--small``, then up to ``--large``), timing each collector's scrape (the median of ``--repeat``) at
each step. The figure: scrape(large)/scrape(small) for each; the target is the ledger's within 1.5×.

    .venv/bin/python bench/metrics_scrape.py [--small 1000] [--large 100000] [--pipelines 200]
        [--tenants 20] [--database-url postgresql+psycopg://…]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

from prometheus_client import generate_latest
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry
from sqlalchemy import Engine, case, delete, func, insert, literal_column
from sqlalchemy import select as sa_select
from sqlmodel import Session, col, select

from api.core.db import make_engine, unit_of_work, utcnow
from api.core.migrate import upgrade_to_head
from api.metrics.service import InletCollector
from api.models import Connection, Pipeline, Run, Tenant
from api.usage import service as usage
from api.usage.models import COUNTERS, DURATION_COLUMNS, UsageHour, UsageTotal

DURATION_BUCKETS = (10.0, 30.0, 60.0, 120.0, 300.0, 900.0, 3600.0)


class SumOverRuns(Collector):
    """The reference: the usage part of the collector before the ledger, verbatim in its queries."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def collect(self) -> Iterator[Metric]:
        with Session(self.engine) as session:
            for _state, _count in session.exec(select(Run.state, func.count()).group_by(Run.state)).all():
                pass
            totals = session.execute(sa_select(*(func.coalesce(func.sum(col(c)), 0) for c in (
                Run.records_read, Run.rows_written, Run.bytes_read))).where(col(Run.state) == "succeeded")).one()
            for name, value in zip(("records", "rows", "bytes"), totals, strict=True):
                family = CounterMetricFamily(f"bench_{name}", name)
                family.add_metric([], float(value))
                yield family
            finished, started = col(Run.finished_at), col(Run.started_at)
            if session.get_bind().dialect.name == "postgresql":
                seconds: Any = func.extract("epoch", finished - started)
            else:
                seconds = (func.julianday(finished) - func.julianday(started)) * literal_column("86400.0")
            columns = [func.count(), func.coalesce(func.sum(seconds), 0)] + [
                func.sum(case((seconds <= bound, 1), else_=0)) for bound in DURATION_BUCKETS]
            count, total, *cumulative = session.execute(sa_select(*columns).where(
                finished.is_not(None), started.is_not(None))).one()
            duration = HistogramMetricFamily("bench_duration_seconds", "duration")
            duration.add_metric([], [*((str(b), int(n or 0)) for b, n in zip(DURATION_BUCKETS, cumulative,
                                                                              strict=True)), ("+Inf", int(count))],
                                sum_value=float(total))
            yield duration


def seed(engine: Engine, pipelines: int, tenants: int) -> list[tuple[uuid.UUID, uuid.UUID]]:
    now = utcnow()
    tenant_ids = [uuid.uuid4() for _ in range(tenants)]
    conn_ids = {t: uuid.uuid4() for t in tenant_ids}
    out = []
    with unit_of_work(engine) as session:
        session.execute(insert(Tenant), [{"id": t, "name": f"bench-{t.hex[:8]}", "created_at": now}
                                         for t in tenant_ids])
        session.execute(insert(Connection), [
            {"id": conn_ids[t], "tenant_id": t, "name": "kafka", "bootstrap_servers": "b:9092",
             "security_protocol": "PLAINTEXT", "options": {}, "revision": 1, "created_at": now, "updated_at": now}
            for t in tenant_ids])
        rows = []
        for i in range(pipelines):
            t = tenant_ids[i % tenants]
            pid = uuid.uuid4()
            out.append((t, pid))
            rows.append({"id": pid, "tenant_id": t, "name": f"p-{i}", "connection_id": conn_ids[t],
                         "source_as_written": {"connection_id": str(conn_ids[t]), "topics": ["orders"]},
                         "target_as_written": {"type": "delta", "path": f"p{i}"},
                         "schedule_as_written": None, "state": "paused",
                         "last_run_seq": 0, "revision": 1, "created_at": now, "updated_at": now})
        session.execute(insert(Pipeline), rows)
    return out


def add_runs(engine: Engine, pipelines: list[tuple[uuid.UUID, uuid.UUID]], first: int, last: int,
             ledger: Ledger) -> None:
    """Runs ``first``..``last`` (round-robin over the pipelines), finished over the last 30 days, and the
    ledger rows ``usage.meter`` would have left for them (summed here and written in bulk: seeding a
    million runs one upsert each takes hours)."""
    now = utcnow()
    batch = 5000
    for start in range(first, last, batch):
        rows: list[dict[str, Any]] = []
        with unit_of_work(engine) as session:
            for n in range(start, min(start + batch, last)):
                tenant_id, pipeline_id = pipelines[n % len(pipelines)]
                finished = now - timedelta(minutes=n % (30 * 24 * 60))
                rows.append({"id": uuid.uuid4(), "tenant_id": tenant_id, "pipeline_id": pipeline_id,
                             "seq": n // len(pipelines) + 1, "state": "succeeded" if n % 10 else "failed",
                             "trigger": "schedule", "attempt": 1, "cancel_requested": False,
                             "records_read": 1000, "rows_written": 1000, "bytes_read": 50_000,
                             "created_at": finished - timedelta(seconds=40),
                             "started_at": finished - timedelta(seconds=40), "finished_at": finished})
            session.execute(insert(Run), rows)
        for row in rows:
            ledger.add(row)
    ledger.write(engine)


class Ledger:
    """The ledger's rows as ``usage.meter`` would leave them for the seeded runs."""

    def __init__(self) -> None:
        self.hours: dict[tuple[uuid.UUID, uuid.UUID, Any], dict[str, Any]] = {}
        self.totals: dict[tuple[uuid.UUID, uuid.UUID], dict[str, Any]] = {}

    def add(self, run: dict[str, Any]) -> None:
        hour = usage.hour_of(run["finished_at"])
        figures = {"records_read": run["records_read"], "rows_written": run["rows_written"],
                   "bytes_read": run["bytes_read"], "wall_ms": 40_000, f"runs_{run['state']}": 1}
        keys = {"tenant_id": run["tenant_id"], "pipeline_id": run["pipeline_id"], "pipeline_name": "p"}
        for store, key, extra in (
            (self.hours, (run["tenant_id"], run["pipeline_id"], hour), {"hour": hour, "day": hour.replace(hour=0)}),
            (self.totals, (run["tenant_id"], run["pipeline_id"]), {"attempts_le_60s": 1, "attempts_le_120s": 1,
             "attempts_le_300s": 1, "attempts_le_900s": 1, "attempts_le_3600s": 1}),
        ):
            row = store.setdefault(key, {**{c: 0 for c in (*COUNTERS, *DURATION_COLUMNS)}, **keys})
            for name, value in (figures | extra).items():
                row[name] = value if name in ("hour", "day") else row[name] + value

    def write(self, engine: Engine) -> None:
        with unit_of_work(engine) as session:
            session.execute(delete(UsageHour))
            session.execute(delete(UsageTotal))
            hours = [{k: v for k, v in row.items() if k not in DURATION_COLUMNS} for row in self.hours.values()]
            for start in range(0, len(hours), 10_000):
                session.execute(insert(UsageHour), hours[start:start + 10_000])
            session.execute(insert(UsageTotal), list(self.totals.values()))


def scrape_ms(collector: Collector, repeat: int) -> float:
    registry = CollectorRegistry()
    registry.register(collector)
    generate_latest(registry)  # warm: connections, statement caches
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        generate_latest(registry)
        times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", type=int, default=1000)
    parser.add_argument("--large", type=int, default=100_000)
    parser.add_argument("--pipelines", type=int, default=200)
    parser.add_argument("--tenants", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--database-url")
    args = parser.parse_args()

    url = args.database_url or f"sqlite:///{tempfile.mkdtemp()}/bench.db"
    upgrade_to_head(url)
    engine = make_engine(url)
    pipelines = seed(engine, args.pipelines, args.tenants)
    ledger, reference = InletCollector(engine), SumOverRuns(engine)
    figures: dict[str, dict[int, float]] = {"ledger": {}, "sum over runs": {}}
    done, rows = 0, Ledger()
    for runs in (args.small, args.large):
        began = time.perf_counter()
        add_runs(engine, pipelines, done, runs, rows)
        done = runs
        if engine.dialect.name == "postgresql":
            # As a database settles between bulk loads: measured while autovacuum still works through a
            # million fresh rows, the scrape waits on the disk and CPU it takes (2x at 1M runs, not the queries').
            with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                conn.exec_driver_sql("VACUUM ANALYZE")
        print(f"{runs:>9,} runs ({args.pipelines} pipelines, {args.tenants} tenants, {engine.dialect.name}), "
              f"seeded in {time.perf_counter() - began:.1f}s")
        figures["ledger"][runs] = scrape_ms(ledger, args.repeat)
        figures["sum over runs"][runs] = scrape_ms(reference, args.repeat)
        for name, by_runs in figures.items():
            print(f"    {name:<14} scrape {by_runs[runs]:8.2f} ms")
    for name, by_runs in figures.items():
        ratio = by_runs[args.large] / by_runs[args.small]
        print(f"ratio {name}: {args.large:,} runs / {args.small:,} runs = {ratio:.2f}x")
    flat = figures["ledger"][args.large] / figures["ledger"][args.small]
    print(f"target: the ledger's scrape within 1.5x across the two sizes: {'met' if flat <= 1.5 else 'NOT met'} "
          f"({flat:.2f}x); at {args.large:,} runs the ledger scrapes "
          f"{figures['sum over runs'][args.large] / figures['ledger'][args.large]:.1f}x faster than the sums over runs")


if __name__ == "__main__":
    main()
