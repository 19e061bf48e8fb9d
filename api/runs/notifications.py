"""What a run's outcome tells the tenant's webhooks (``api.webhooks.events``), raised in the
transaction that records the outcome.

- ``run.failed``: every failed attempt, with the failure's kind and whether the same plan is tried
  again (``will_retry``). The message is left out: it may quote what a broker or a store said; the
  run's page has it.
- ``run.succeeded``: every succeeded run (sent only to endpoints that subscribe to it by name).
- ``pipeline.recovered``: a success after failures: the pipeline's previous finished run failed, or
  an attempt of this one did.
- ``pipeline.data_loss``: records that expired before they were read (``on_data_loss: skip``), per
  partition as the run reported its gaps.
- ``pipeline.expectation_exceeded``: the expectations whose violating rows passed their alert
  threshold in the run (``alert_over_rows``, ``alert_over_ratio`` of the records read).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlmodel import Session, col, select

from api.pipelines.definition import definition_of
from api.pipelines.models import Pipeline
from api.runs.models import Run
from api.runs.retry import RunFailure
from api.webhooks.events import emit

_STREAK_LIMIT = 100  # failed runs counted back at most


def _about(session: Session, run: Run) -> dict[str, Any]:
    pipeline = session.get(Pipeline, run.pipeline_id)
    return {"pipeline_id": str(run.pipeline_id), "pipeline_name": pipeline.name if pipeline else None,
            "run_id": str(run.id), "run_seq": run.seq, "attempt": run.attempt, "trigger": run.trigger}


def run_failed(session: Session, run: Run, failure: RunFailure, *, retry_at: datetime | None) -> None:
    emit(session, run.tenant_id, "run.failed", _about(session, run) | {
        "failure_kind": failure.kind, "topic": failure.topic, "partition": failure.partition,
        "will_retry": retry_at is not None, "retry_at": retry_at.isoformat() if retry_at else None,
    })


def _failed_runs_before(session: Session, run: Run) -> int:
    """How many of the pipeline's finished runs right before ``run`` failed (skipped and cancelled ones aside)."""
    states = session.exec(select(Run.state).where(
        Run.pipeline_id == run.pipeline_id, col(Run.seq) < run.seq, col(Run.state).in_(("succeeded", "failed")),
    ).order_by(col(Run.seq).desc()).limit(_STREAK_LIMIT)).all()
    streak = 0
    for state in states:
        if state != "failed":
            break
        streak += 1
    return streak


def run_succeeded(session: Session, run: Run, *, after_failed_attempt: bool) -> None:
    about = _about(session, run)
    duration = (run.finished_at - run.started_at).total_seconds() if run.finished_at and run.started_at else None
    emit(session, run.tenant_id, "run.succeeded", about | {
        "records_read": run.records_read, "rows_written": run.rows_written, "rows_quarantined": run.rows_quarantined,
        "duration_s": duration,
    })
    failed_runs = _failed_runs_before(session, run)
    if failed_runs or after_failed_attempt:
        emit(session, run.tenant_id, "pipeline.recovered", about | {
            "failed_runs": failed_runs, "after_failed_attempt": after_failed_attempt,
        })
    gaps = [{"topic": p["topic"], "partition": p["partition"], "from_offset": p["gap"][0], "to_offset": p["gap"][1],
             "records_lost": p["gap"][1] - p["gap"][0]}
            for p in (run.result or {}).get("partitions", []) if p.get("gap")]
    if gaps:
        emit(session, run.tenant_id, "pipeline.data_loss", about | {
            "partitions": gaps, "records_lost": sum(g["records_lost"] for g in gaps),
        })
    if exceeded := _expectations_exceeded(session, run):
        emit(session, run.tenant_id, "pipeline.expectation_exceeded", about | {
            "records_read": run.records_read, "expectations": exceeded,
        })


def _expectations_exceeded(session: Session, run: Run) -> list[dict[str, Any]]:
    """The run's expectations whose violating rows passed a threshold the pipeline sets for them."""
    counts = {e["name"]: e["rows_violating"] for e in (run.result or {}).get("expectations", [])}
    pipeline = session.get(Pipeline, run.pipeline_id)
    if not counts or pipeline is None:
        return []
    read, exceeded = run.records_read or 0, []
    for rule in definition_of(pipeline).contract.expectations:
        violating = counts.get(rule.name, 0)
        over_rows = rule.alert_over_rows is not None and violating > rule.alert_over_rows
        over_ratio = rule.alert_over_ratio is not None and read > 0 and violating / read > rule.alert_over_ratio
        if over_rows or over_ratio:
            exceeded.append({"name": rule.name, "action": rule.action, "rows_violating": violating,
                             "alert_over_rows": rule.alert_over_rows, "alert_over_ratio": rule.alert_over_ratio})
    return exceeded
