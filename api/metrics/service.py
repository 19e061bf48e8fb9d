"""Prometheus metrics read from the database at scrape time: runs by state, run durations,
records and bytes ingested, each pipeline's consumer lag as last observed, and webhook deliveries
by outcome.

Collected from the database rather than counted in memory, so every API replica reports the same
figures and nothing is lost when a process restarts.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy import ColumnElement, Engine, case, func, literal_column
from sqlalchemy import select as sa_select
from sqlmodel import Session, col, select

from api.pipelines.models import Pipeline
from api.runs.models import Run
from api.webhooks.models import WebhookDelivery

DURATION_BUCKETS = (10.0, 30.0, 60.0, 120.0, 300.0, 900.0, 3600.0)


def _duration_seconds(dialect: str) -> ColumnElement[Any]:
    finished, started = col(Run.finished_at), col(Run.started_at)
    if dialect == "postgresql":
        return func.extract("epoch", finished - started)
    return (func.julianday(finished) - func.julianday(started)) * literal_column("86400.0")


class InletCollector(Collector):
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def collect(self) -> Iterator[Metric]:
        with Session(self.engine) as session:
            yield from self._runs(session)
            yield from self._lag(session)
            yield from self._webhooks(session)

    def _runs(self, session: Session) -> Iterator[Metric]:
        by_state = GaugeMetricFamily("inlet_runs", "Runs by state", labels=["state"])
        for state, count in session.exec(select(Run.state, func.count()).group_by(Run.state)).all():
            by_state.add_metric([state], count)
        yield by_state

        records = CounterMetricFamily("inlet_records_ingested", "Records read by succeeded runs")
        written = CounterMetricFamily("inlet_rows_written", "Rows written to targets by succeeded runs")
        read_bytes = CounterMetricFamily("inlet_bytes_ingested", "Bytes read by succeeded runs")
        totals = session.execute(
            sa_select(*(func.coalesce(func.sum(col(c)), 0) for c in (Run.records_read, Run.rows_written, Run.bytes_read)))
            .where(col(Run.state) == "succeeded")
        ).one()
        records.add_metric([], float(totals[0]))
        written.add_metric([], float(totals[1]))
        read_bytes.add_metric([], float(totals[2]))
        yield from (records, written, read_bytes)

        seconds = _duration_seconds(session.get_bind().dialect.name)
        columns = [func.count(), func.coalesce(func.sum(seconds), 0)] + [
            func.sum(case((seconds <= bound, 1), else_=0)) for bound in DURATION_BUCKETS
        ]
        row = session.execute(sa_select(*columns).where(col(Run.finished_at).is_not(None),
                                                        col(Run.started_at).is_not(None))).one()
        count, total, *cumulative = row
        buckets = [(str(bound), int(n or 0)) for bound, n in zip(DURATION_BUCKETS, cumulative, strict=True)]
        buckets.append(("+Inf", int(count)))
        duration = HistogramMetricFamily("inlet_run_duration_seconds", "Duration of finished runs")
        duration.add_metric([], buckets, sum_value=float(total))
        yield duration

    def _lag(self, session: Session) -> Iterator[Metric]:
        lag = GaugeMetricFamily("inlet_pipeline_lag_records", "Consumer lag per pipeline as last observed",
                                labels=["tenant_id", "pipeline_id", "pipeline"])
        rows = session.exec(select(Pipeline.tenant_id, Pipeline.id, Pipeline.name, col(Pipeline.observed_lag))
                            .where(col(Pipeline.observed_lag).is_not(None))).all()
        for tenant_id, pipeline_id, name, observed in rows:
            lag.add_metric([str(tenant_id), str(pipeline_id), name], observed or 0)
        yield lag

    def _webhooks(self, session: Session) -> Iterator[Metric]:
        ended = CounterMetricFamily("inlet_webhook_deliveries", "Webhook deliveries that ended, by outcome and "
                                    "event type", labels=["outcome", "event_type"])
        pending = GaugeMetricFamily("inlet_webhook_deliveries_pending", "Webhook deliveries not yet made, by "
                                    "event type", labels=["event_type"])
        rows = session.exec(select(WebhookDelivery.state, WebhookDelivery.event_type, func.count())
                            .group_by(WebhookDelivery.state, WebhookDelivery.event_type)).all()
        for state, event_type, count in rows:
            if state == "pending":
                pending.add_metric([event_type], count)
            else:
                ended.add_metric([state, event_type], count)
        attempts = CounterMetricFamily("inlet_webhook_delivery_attempts",
                                       "Webhook delivery attempts (retries included)")
        total = session.exec(select(func.coalesce(func.sum(WebhookDelivery.attempts), 0))).one()
        attempts.add_metric([], float(total))
        yield from (ended, pending, attempts)
