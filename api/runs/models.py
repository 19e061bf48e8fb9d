"""Runs (one offset-bounded batch of a pipeline) and their logs, and the rule that a pipeline with an
active run is not deleted."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Column, ForeignKey, Index, String, Text, UniqueConstraint, event, select, text
from sqlmodel import Field, SQLModel, col

from api.core.db import UTCDateTime, utcnow
from api.core.errors import Conflict
from api.pipelines.models import Pipeline
from api.runs.states import ACTIVE_STATES, RunState, RunTrigger

_ACTIVE_SQL = "state IN ({})".format(", ".join(f"'{state}'" for state in ACTIVE_STATES))


class Run(SQLModel, table=True):
    __tablename__ = "runs"
    __table_args__ = (
        UniqueConstraint("pipeline_id", "seq", name="uq_runs_pipeline_seq"),
        # At most one active run per pipeline, and one run per scheduled slot: enforced by the database.
        Index("uq_runs_one_active", "pipeline_id", unique=True,
              postgresql_where=text(_ACTIVE_SQL), sqlite_where=text(_ACTIVE_SQL)),
        Index("uq_runs_slot", "pipeline_id", "scheduled_for", unique=True,
              postgresql_where=text("scheduled_for IS NOT NULL"), sqlite_where=text("scheduled_for IS NOT NULL")),
        # A pipeline's runs page by page, newest first or by state, each in index order (the id breaks ties,
        # the tenant scopes the query), and counted from the index alone.
        Index("ix_runs_tenant_pipeline_created", "tenant_id", "pipeline_id", "created_at", "id"),
        Index("ix_runs_tenant_pipeline_state", "tenant_id", "pipeline_id", "state", "id"),
        Index("ix_runs_state_lease", "state", "lease_expires_at"),
        # A tenant's runs of the last hour (its runs_per_hour quota) and its latest claim (the fair share).
        Index("ix_runs_tenant_created", "tenant_id", "created_at"),
        Index("ix_runs_tenant_claimed", "tenant_id", "claimed_at"),
        # Retention's oldest ended runs first (api.runs.retention).
        Index("ix_runs_finished", "finished_at"),
    )

    id: uuid.UUID = Field(default_factory=uuid.uuid4, primary_key=True)
    # No index of its own: ix_runs_tenant_created leads with it (one on tenant_id alone misled the planner
    # into combining it with the pipeline's, reading every run of the tenant).
    tenant_id: uuid.UUID = Field(sa_column=Column(ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False))
    pipeline_id: uuid.UUID = Field(sa_column=Column(ForeignKey("pipelines.id", ondelete="CASCADE"), nullable=False))
    seq: int = Field(description="The pipeline's run sequence: the Delta transaction version of this run")
    state: RunState = Field(sa_column=Column(String(16), nullable=False))
    trigger: RunTrigger = Field(sa_column=Column(String(16), nullable=False))
    scheduled_for: datetime | None = Field(default=None, sa_type=UTCDateTime)
    plan: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    replace_ranges: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    # A reprocess of the quarantine (trigger reprocess): the records it replays (api.quarantine.schemas).
    reprocess: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    source_credentials_version: int | None = None
    target_credentials_version: int | None = None
    attempt: int = 0
    not_before: datetime | None = Field(default=None, sa_type=UTCDateTime)
    dispatched_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    lease_expires_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    claimed_at: datetime | None = Field(default=None, sa_type=UTCDateTime, description="When a worker last took it")
    worker: str | None = Field(default=None, sa_column=Column(String(128)))
    cancel_requested: bool = False
    result: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    rows_written: int | None = Field(default=None, sa_column=Column(BigInteger))
    rows_quarantined: int | None = Field(default=None, sa_column=Column(BigInteger))
    records_read: int | None = Field(default=None, sa_column=Column(BigInteger))
    bytes_read: int | None = Field(default=None, sa_column=Column(BigInteger))
    delta_version: int | None = Field(default=None, sa_column=Column(BigInteger))
    error: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)
    started_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    finished_at: datetime | None = Field(default=None, sa_type=UTCDateTime)


class RunLogChunk(SQLModel, table=True):
    """A run's log, appended in chunks by the worker (secrets already redacted)."""

    __tablename__ = "run_log_chunks"
    __table_args__ = (Index("ix_run_log_chunks_created", "created_at"),)  # retention's oldest first

    run_id: uuid.UUID = Field(sa_column=Column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True))
    chunk: int = Field(sa_column=Column(BigInteger, primary_key=True, autoincrement=False))
    text: str = Field(sa_column=Column(Text, nullable=False))
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)


@event.listens_for(Pipeline, "before_delete")
def _refuse_deleting_a_busy_pipeline(_mapper: object, connection: Any, pipeline: Pipeline) -> None:
    """Its worker would go on writing offsets for a pipeline that is gone. Checked here, at the
    delete itself, because runs sit above pipelines: the pipelines domain does not know runs."""
    active = connection.execute(select(col(Run.id), col(Run.state)).where(
        col(Run.pipeline_id) == pipeline.id, col(Run.state).in_(ACTIVE_STATES))).first()
    if active is not None:
        raise Conflict(f"Pipeline {pipeline.id} has run {active.id} {active.state}; cancel it or let it finish first",
                       run_id=str(active.id))
