"""The pipelines table. The ``source``, ``target``, ``schedule`` and ``contract`` columns hold the user's definition as
written (``*_as_written``: what reads back the same, for ETags, Terraform and the portal's edit forms;
everything else reads it typed, through ``api.pipelines.definition``); foreign keys, scheduling fields,
the lag last observed, the lag alert and the Delta table's health are kept in columns beside it."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Column, ForeignKey, Index, String, UniqueConstraint
from sqlmodel import Field, SQLModel

from api.core.db import UTCDateTime, utcnow


class Pipeline(SQLModel, table=True):
    __tablename__ = "pipelines"
    __table_args__ = (
        UniqueConstraint("tenant_id", "name", name="uq_pipelines_tenant_name"),
        Index("ix_pipelines_due", "state", "next_run_at"),
    )

    id: uuid.UUID = Field(default_factory=uuid.uuid4, primary_key=True)
    tenant_id: uuid.UUID = Field(
        sa_column=Column(ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False, index=True)
    )
    name: str = Field(sa_column=Column(String(100), nullable=False))
    connection_id: uuid.UUID = Field(
        sa_column=Column(ForeignKey("connections.id", ondelete="RESTRICT"), nullable=False, index=True)
    )
    target_connection_id: uuid.UUID | None = Field(
        default=None, sa_column=Column(ForeignKey("connections.id", ondelete="RESTRICT"), index=True)
    )
    source_as_written: dict[str, Any] = Field(sa_column=Column("source", JSON, nullable=False))
    target_as_written: dict[str, Any] = Field(sa_column=Column("target", JSON, nullable=False))
    schedule_as_written: dict[str, Any] | None = Field(default=None, sa_column=Column("schedule", JSON))
    contract_as_written: dict[str, Any] | None = Field(default=None, sa_column=Column("contract", JSON))
    state: str = Field(sa_column=Column(String(16), nullable=False))
    next_run_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    last_run_seq: int = Field(default=0, description="The sequence number of the newest run")
    observed_lag: int | None = Field(default=None, sa_column=Column(BigInteger))
    observed_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    caught_up_at: datetime | None = Field(
        default=None, sa_type=UTCDateTime, description="When a plan or commit last saw nothing left to read"
    )
    newest_record_at: datetime | None = Field(
        default=None, sa_type=UTCDateTime, description="Its freshness as the last commit left it: the oldest of the "
        "partitions' newest committed records' Kafka timestamps (api.ledger.service.newest_committed)"
    )
    lag_alert: dict[str, Any] | None = Field(
        default=None, sa_column=Column(JSON(none_as_null=True)),
        description="The lag that raises an alert (api.pipelines.alerts)",
    )
    lag_alert_since: datetime | None = Field(
        default=None, sa_type=UTCDateTime, description="Since when the lag alert is raised; null: it is not"
    )
    group_mirror: dict[str, Any] | None = Field(
        default=None, sa_column=Column(JSON), description="The last mirror of the offsets to source.commit_to_group"
    )
    table_health: dict[str, Any] | None = Field(
        default=None, sa_column=Column(JSON(none_as_null=True)),
        description="The Delta table's health as last recorded (api.pipelines.table_health.TableHealthRecord)",
    )
    revision: int = 1
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)
    updated_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)
