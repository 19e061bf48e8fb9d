"""Retention of runs and their logs: one batch at a time, oldest first (``api.retention`` runs the batches).

A run may go once it ended (succeeded, failed, cancelled or skipped) before the cutoff, unless it is its
pipeline's newest run (``seq`` = the pipeline's ``last_run_seq``) or the offsets ledger still needs it
(``api.ledger.retention.still_needed``). Its log chunks and committed ranges go with it. A log may go
earlier than its run: chunks written before their own cutoff, of a run that ended before it.

Usage is not derived from runs (``api.usage``): pruning them changes no figure of ``GET /usage`` or
``/metrics``.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Select, delete
from sqlalchemy import select as sa_select
from sqlmodel import Session, col, select

from api.core.pruning import Batch, Resume, prune_batch
from api.ledger import retention as ledger
from api.pipelines.models import Pipeline
from api.runs.models import Run, RunLogChunk
from api.runs.states import TERMINAL_STATES, RunTrigger


def prune_runs(session: Session, *, finished_before: datetime, after: Resume, limit: int,
               trigger: RunTrigger | None = None) -> Batch:
    """Of the next ``limit`` runs that finished before ``finished_before`` (after ``after``), delete those
    that ended and nothing needs (of ``trigger`` only, if given), with their logs and committed ranges."""
    newest_seq = select(Pipeline.last_run_seq).where(col(Pipeline.id) == col(Run.pipeline_id)).scalar_subquery()

    def pick(in_window: ColumnElement[bool]) -> Select[*tuple[Any, ...]]:
        of_trigger = [col(Run.trigger) == trigger] if trigger is not None else []
        return sa_select(col(Run.id), col(Run.tenant_id)).where(
            in_window, col(Run.state).in_(TERMINAL_STATES), col(Run.seq) < newest_seq,
            ~ledger.still_needed(col(Run.id)), *of_trigger)

    def logs(run_ids: list[uuid.UUID]) -> None:
        session.execute(delete(RunLogChunk).where(col(RunLogChunk.run_id).in_(run_ids)))

    def ranges(run_ids: list[uuid.UUID]) -> None:
        ledger.forget_ranges(session, run_ids)

    return prune_batch(session, Run, col(Run.finished_at), before=finished_before, after=after, limit=limit,
                       pick=pick, dependents=(logs, ranges))


def prune_run_logs(session: Session, *, written_before: datetime, after: Resume, limit: int) -> Batch:
    """Of the next ``limit`` log chunks written before ``written_before``, delete those of runs that ended
    before it."""
    def pick(in_window: ColumnElement[bool]) -> Select[*tuple[Any, ...]]:
        return (sa_select(col(RunLogChunk.run_id), col(RunLogChunk.chunk), col(Run.tenant_id))
                .join(Run, col(Run.id) == col(RunLogChunk.run_id))
                .where(in_window, col(Run.finished_at) < written_before, col(Run.state).in_(TERMINAL_STATES)))

    return prune_batch(session, RunLogChunk, col(RunLogChunk.created_at), before=written_before, after=after,
                       limit=limit, pick=pick)
