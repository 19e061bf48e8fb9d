"""The committed position of a pipeline in each partition (the next offset a run will read), the
replay windows a replace-mode offsets change leaves for the next runs, and the offset ranges each
succeeded run wrote (to answer "which run wrote offset X")."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import BigInteger, Column, ForeignKey, Index, Integer, String
from sqlmodel import Field, SQLModel

from api.core.db import UTCDateTime, utcnow


class PartitionOffset(SQLModel, table=True):
    __tablename__ = "partition_offsets"
    # Which partitions name a run as their last (the runs retention keeps: api.ledger.retention).
    __table_args__ = (Index("ix_partition_offsets_last_run", "last_run_id"),)

    pipeline_id: uuid.UUID = Field(sa_column=Column(ForeignKey("pipelines.id", ondelete="CASCADE"), primary_key=True))
    topic: str = Field(sa_column=Column(String(249), primary_key=True))
    partition: int = Field(sa_column=Column(Integer, primary_key=True, autoincrement=False))
    tenant_id: uuid.UUID = Field(sa_column=Column(ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False, index=True))
    committed: int = Field(sa_column=Column(BigInteger, nullable=False))
    last_run_id: uuid.UUID | None = Field(default=None)
    updated_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)
    # The Kafka timestamp of the newest record a run committed here (the pipeline's freshness); null
    # until a run read one.
    newest_record_at: datetime | None = Field(default=None, sa_type=UTCDateTime)


class OffsetReplay(SQLModel, table=True):
    """A replace-mode replay still to be done: rows of ``[start, end)`` already in the Delta table are
    replaced (not appended again) by the runs that read those offsets again. One window per partition;
    runs consume it as they commit, offsets changes trim it."""

    __tablename__ = "offset_replays"

    pipeline_id: uuid.UUID = Field(sa_column=Column(ForeignKey("pipelines.id", ondelete="CASCADE"), primary_key=True))
    topic: str = Field(sa_column=Column(String(249), primary_key=True))
    partition: int = Field(sa_column=Column(Integer, primary_key=True, autoincrement=False))
    tenant_id: uuid.UUID = Field(sa_column=Column(ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False, index=True))
    start: int = Field(sa_column=Column(BigInteger, nullable=False))
    end: int = Field(sa_column=Column(BigInteger, nullable=False))
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)


class RunRange(SQLModel, table=True):
    """The offsets ``[start, end)`` of one partition that a succeeded run committed."""

    __tablename__ = "run_ranges"
    __table_args__ = (Index("ix_run_ranges_lookup", "pipeline_id", "topic", "partition", "start"),)

    run_id: uuid.UUID = Field(sa_column=Column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True))
    topic: str = Field(sa_column=Column(String(249), primary_key=True))
    partition: int = Field(sa_column=Column(Integer, primary_key=True, autoincrement=False))
    pipeline_id: uuid.UUID = Field(sa_column=Column(ForeignKey("pipelines.id", ondelete="CASCADE"), nullable=False))
    tenant_id: uuid.UUID = Field(sa_column=Column(ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False, index=True))
    start: int = Field(sa_column=Column(BigInteger, nullable=False))
    end: int = Field(sa_column=Column(BigInteger, nullable=False))
