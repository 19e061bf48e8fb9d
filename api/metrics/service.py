"""Prometheus metrics read from the database at scrape time: usage counters per tenant (and, with
``INLET_METRICS_PIPELINE_LABELS``, per pipeline) and attempt durations, both from the usage ledger's
totals; runs waiting or executing now; each pipeline's consumer lag as last observed; webhook
deliveries by outcome (those retention deleted included, from their totals); each Delta table's files,
small files and bytes as maintenance last saw them, and maintenance's running totals (``api.maintenance``).

The usage counters are the ledger's totals (``api.usage``), which only ever grow: they never go down
when runs are pruned, every API replica reports the same figures, and a restart loses nothing. The
scrape reads one row per pipeline ever metered and never scans ``runs`` (the active runs are counted
through the state index).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy import Engine, func
from sqlmodel import Session, col, select

from api.maintenance.models import TableMaintenance
from api.pipelines.models import Pipeline
from api.runs.models import Run
from api.runs.states import ACTIVE_STATES
from api.usage import service as usage
from api.usage.models import DURATION_BUCKETS, DURATION_COLUMNS, UsageTotal
from api.webhooks import retention as webhook_retention
from api.webhooks.models import WebhookDelivery

# name, help, the ledger column, its scale to the metric's unit
_USAGE: tuple[tuple[str, str, str, float], ...] = (
    ("inlet_records_ingested", "Kafka records read (every attempt: a retry or a replay reads again)",
     "records_read", 1.0),
    ("inlet_rows_written", "Rows written to targets", "rows_written", 1.0),
    ("inlet_rows_quarantined", "Rows written to quarantine tables", "rows_quarantined", 1.0),
    ("inlet_rows_violating_expectations", "Rows that violated at least one of their pipeline's expectations",
     "rows_violating", 1.0),
    ("inlet_bytes_ingested", "Bytes of Kafka keys and values read", "bytes_read", 1.0),
    ("inlet_bytes_written", "Bytes of files written to Delta targets", "bytes_written", 1.0),
    ("inlet_run_wall_seconds", "Attempts' time from a worker's claim to their end", "wall_ms", 0.001),
    ("inlet_run_engine_seconds", "Spark jobs' own time", "engine_ms", 0.001),
)
_OUTCOMES = ("succeeded", "failed", "retried", "cancelled", "skipped")


class InletCollector(Collector):
    def __init__(self, engine: Engine, *, pipeline_labels: bool = False) -> None:
        self.engine = engine
        self.pipeline_labels = pipeline_labels

    def collect(self) -> Iterator[Metric]:
        with Session(self.engine) as session:
            yield from self._usage(session)
            yield from self._runs(session)
            yield from self._lag(session)
            yield from self._webhooks(session)
            yield from self._tables(session)

    def _usage(self, session: Session) -> Iterator[Metric]:
        totals = usage.totals(session)
        labels = ["tenant_id", "pipeline_id"] if self.pipeline_labels else ["tenant_id"]
        sums: dict[tuple[str, ...], dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for total in totals:
            key: tuple[str, ...] = (str(total.tenant_id),)
            if self.pipeline_labels:
                key += (str(total.pipeline_id),)
            for column in (*(u[2] for u in _USAGE), *(f"runs_{o}" for o in _OUTCOMES)):
                sums[key][column] += getattr(total, column)
        for name, help_text, column, scale in _USAGE:
            family = CounterMetricFamily(name, help_text, labels=labels)
            for key, values in sums.items():
                family.add_metric(list(key), values[column] * scale)
            yield family
        outcomes = CounterMetricFamily("inlet_run_outcomes", "Ended attempts by outcome (retried: an attempt that "
                                       "failed and was tried again)", labels=[*labels, "outcome"])
        for key, values in sums.items():
            for outcome in _OUTCOMES:
                outcomes.add_metric([*key, outcome], values[f"runs_{outcome}"])
        yield outcomes
        yield self._durations(totals)

    @staticmethod
    def _durations(rows: Sequence[UsageTotal]) -> Metric:
        cumulative = [sum(getattr(t, column) for t in rows) for column in DURATION_COLUMNS]
        count = sum(getattr(t, f"runs_{o}") for t in rows for o in _OUTCOMES)
        buckets = [(str(float(bound)), n) for bound, n in zip(DURATION_BUCKETS, cumulative, strict=True)]
        buckets.append(("+Inf", count))
        duration = HistogramMetricFamily("inlet_run_duration_seconds", "Wall time of ended attempts")
        duration.add_metric([], buckets, sum_value=sum(t.wall_ms for t in rows) / 1000)
        return duration

    def _runs(self, session: Session) -> Iterator[Metric]:
        by_state = GaugeMetricFamily("inlet_runs", "Runs waiting or executing now, by state (ended ones: "
                                     "inlet_run_outcomes)", labels=["state"])
        found = dict(session.exec(select(Run.state, func.count()).where(col(Run.state).in_(ACTIVE_STATES))
                                  .group_by(Run.state)).all())
        for state in ACTIVE_STATES:
            by_state.add_metric([state], found.get(state, 0))
        yield by_state

    def _lag(self, session: Session) -> Iterator[Metric]:
        lag = GaugeMetricFamily("inlet_pipeline_lag_records", "Consumer lag per pipeline as last observed",
                                labels=["tenant_id", "pipeline_id"])
        rows = session.exec(select(Pipeline.tenant_id, Pipeline.id, col(Pipeline.observed_lag))
                            .where(col(Pipeline.observed_lag).is_not(None))).all()
        for tenant_id, pipeline_id, observed in rows:
            lag.add_metric([str(tenant_id), str(pipeline_id)], observed or 0)
        yield lag
        newest = GaugeMetricFamily("inlet_pipeline_newest_record_timestamp_seconds", "The Kafka timestamp of the "
                                   "newest committed record at each pipeline's worst partition (freshness: time() "
                                   "minus this)", labels=["tenant_id", "pipeline_id"])
        for tenant_id, pipeline_id, at in session.exec(
                select(Pipeline.tenant_id, Pipeline.id, col(Pipeline.newest_record_at))
                .where(col(Pipeline.newest_record_at).is_not(None))).all():
            if at is not None:  # always, by the query's filter
                newest.add_metric([str(tenant_id), str(pipeline_id)], at.timestamp())
        yield newest

    def _webhooks(self, session: Session) -> Iterator[Metric]:
        ended = CounterMetricFamily("inlet_webhook_deliveries", "Webhook deliveries that ended, by outcome and "
                                    "event type", labels=["outcome", "event_type"])
        pending = GaugeMetricFamily("inlet_webhook_deliveries_pending", "Webhook deliveries not yet made, by "
                                    "event type", labels=["event_type"])
        rows = session.exec(select(WebhookDelivery.state, WebhookDelivery.event_type, func.count())
                            .group_by(WebhookDelivery.state, WebhookDelivery.event_type)).all()
        # Deliveries retention deleted still count (api.webhooks.retention keeps their totals).
        ended_counts, pruned_attempts = webhook_retention.pruned_totals(session)
        for state, event_type, count in rows:
            if state == "pending":
                pending.add_metric([event_type], count)
            else:
                ended_counts[(state, event_type)] = ended_counts.get((state, event_type), 0) + count
        for (state, event_type), count in sorted(ended_counts.items()):
            ended.add_metric([state, event_type], count)
        attempts = CounterMetricFamily("inlet_webhook_delivery_attempts",
                                       "Webhook delivery attempts (retries included)")
        total = session.exec(select(func.coalesce(func.sum(WebhookDelivery.attempts), 0))).one()
        attempts.add_metric([], float(total + pruned_attempts))
        yield from (ended, pending, attempts)

    def _tables(self, session: Session) -> Iterator[Metric]:
        labels = ["tenant_id", "pipeline_id"]
        gauges = {name: GaugeMetricFamily(f"inlet_table_{name}", text, labels=labels) for name, text in (
            ("files", "Data files of a pipeline's Delta table (as maintenance last saw it, plus runs' since)"),
            ("small_files", "Of those, files under the policy's small-file size"),
            ("bytes", "Bytes of the table's live data files"))}
        counters = {name: CounterMetricFamily(f"inlet_table_{name}", text, labels=labels) for name, text in (
            ("compactions", "Compactions committed"), ("vacuums", "Vacuums that ran to their end"),
            ("checkpoints", "Checkpoints written by maintenance"),
            ("maintenance_failures", "Maintenance steps that failed or lost a race (tried again later)"),
            ("files_compacted", "Small files merged away by compactions"),
            ("files_vacuumed", "Removed files deleted from storage by vacuums"))}
        for row in session.exec(select(TableMaintenance)).all():
            key = [str(row.tenant_id), str(row.pipeline_id)]
            for name, family in gauges.items():
                family.add_metric(key, getattr(row, name))
            for name, counter in counters.items():
                counter.add_metric(key, getattr(row, "failures" if name == "maintenance_failures" else name))
        yield from gauges.values()
        yield from counters.values()
