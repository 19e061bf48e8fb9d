"""Prometheus metrics read from the database at scrape time: runs by state, run durations,
records and bytes ingested, and each pipeline's consumer lag as last observed.

Collected from the database rather than counted in memory, so every API replica reports the same
figures and nothing is lost when a process restarts.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy import Engine, case, func, literal_column
from sqlmodel import Session, select

from api.pipelines.models import Pipeline
from api.runs.models import Run

DURATION_BUCKETS = (10.0, 30.0, 60.0, 120.0, 300.0, 900.0, 3600.0)


def _duration_seconds(dialect: str):  # type: ignore[no-untyped-def]
    if dialect == "postgresql":
        return func.extract("epoch", Run.finished_at - Run.started_at)
    return (func.julianday(Run.finished_at) - func.julianday(Run.started_at)) * literal_column("86400.0")


class InletCollector(Collector):
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def collect(self) -> Iterator[object]:
        with Session(self.engine) as session:
            yield from self._runs(session)
            yield from self._lag(session)

    def _runs(self, session: Session) -> Iterator[object]:
        by_state = GaugeMetricFamily("inlet_runs", "Runs by state", labels=["state"])
        for state, count in session.exec(select(Run.state, func.count()).group_by(Run.state)).all():
            by_state.add_metric([state], count)
        yield by_state

        records = CounterMetricFamily("inlet_records_ingested", "Records read by succeeded runs")
        written = CounterMetricFamily("inlet_rows_written", "Rows written to targets by succeeded runs")
        read_bytes = CounterMetricFamily("inlet_bytes_ingested", "Bytes read by succeeded runs")
        totals = session.exec(
            select(func.coalesce(func.sum(Run.records_read), 0), func.coalesce(func.sum(Run.rows_written), 0),
                   func.coalesce(func.sum(Run.bytes_read), 0)).where(Run.state == "succeeded")
        ).one()
        records.add_metric([], totals[0])
        written.add_metric([], totals[1])
        read_bytes.add_metric([], totals[2])
        yield from (records, written, read_bytes)

        seconds = _duration_seconds(session.get_bind().dialect.name)
        columns = [func.count(), func.coalesce(func.sum(seconds), 0)] + [
            func.sum(case((seconds <= bound, 1), else_=0)) for bound in DURATION_BUCKETS
        ]
        row = session.exec(select(*columns).where(Run.finished_at.is_not(None), Run.started_at.is_not(None))).one()  # type: ignore[union-attr]
        count, total, *cumulative = row
        buckets = [(str(bound), int(n or 0)) for bound, n in zip(DURATION_BUCKETS, cumulative, strict=True)]
        buckets.append(("+Inf", int(count)))
        duration = HistogramMetricFamily("inlet_run_duration_seconds", "Duration of finished runs")
        duration.add_metric([], buckets, sum_value=float(total))
        yield duration

    def _lag(self, session: Session) -> Iterator[object]:
        lag = GaugeMetricFamily("inlet_pipeline_lag_records", "Consumer lag per pipeline as last observed",
                                labels=["tenant_id", "pipeline_id", "pipeline"])
        rows = session.exec(select(Pipeline.tenant_id, Pipeline.id, Pipeline.name, Pipeline.observed_lag)
                            .where(Pipeline.observed_lag.is_not(None))).all()  # type: ignore[union-attr]
        for tenant_id, pipeline_id, name, observed in rows:
            lag.add_metric([str(tenant_id), str(pipeline_id), name], observed)
        yield lag
