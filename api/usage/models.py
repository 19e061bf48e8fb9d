"""The usage ledger: one row per tenant, pipeline and hour (``usage_hours``) and one running total per
tenant and pipeline (``usage_totals``), both only ever incremented, in the transaction that records a
run's outcome (``api.usage.service.meter``).

Neither is derived from ``runs``: pruning runs leaves them alone, and a pipeline's deletion too (the
pipeline's id and last name stay, with no foreign key to the pipeline). A tenant's deletion takes its
usage with it, like everything else of the tenant.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import BigInteger, Column, ForeignKey, Index, String
from sqlmodel import Field, SQLModel

from api.core.db import UTCDateTime

# Upper bounds (seconds) of the attempt-duration histogram that /metrics exports; kept per total row
# so the histogram is read from the totals, never from the runs.
DURATION_BUCKETS: tuple[int, ...] = (10, 30, 60, 120, 300, 900, 3600)

# The counters every row carries, in one order (the upsert, the API and the CSV follow it).
COUNTERS: tuple[str, ...] = (
    "records_read", "rows_written", "rows_quarantined", "rows_violating", "bytes_read", "bytes_written", "wall_ms", "engine_ms",
    "runs_succeeded", "runs_failed", "runs_retried", "runs_cancelled", "runs_skipped",
)
DURATION_COLUMNS: tuple[str, ...] = tuple(f"attempts_le_{bound}s" for bound in DURATION_BUCKETS)


def _counter() -> int:
    # sa_type, not sa_column: each table gets its own Column.
    return Field(default=0, sa_type=BigInteger, nullable=False)


class _Counters(SQLModel):
    records_read: int = _counter()
    rows_written: int = _counter()
    rows_quarantined: int = _counter()
    rows_violating: int = _counter()  # rows that broke at least one of the pipeline's expectations
    bytes_read: int = _counter()
    bytes_written: int = _counter()
    wall_ms: int = _counter()
    engine_ms: int = _counter()
    runs_succeeded: int = _counter()
    runs_failed: int = _counter()
    runs_retried: int = _counter()
    runs_cancelled: int = _counter()
    runs_skipped: int = _counter()


class UsageHour(_Counters, table=True):
    """One pipeline's usage in one hour (UTC, the hour an attempt ended)."""

    __tablename__ = "usage_hours"
    # A tenant's hours over a range, every pipeline (the key serves one pipeline's).
    __table_args__ = (Index("ix_usage_hours_tenant_hour", "tenant_id", "hour"),)

    tenant_id: uuid.UUID = Field(sa_column=Column(ForeignKey("tenants.id", ondelete="CASCADE"), primary_key=True))
    pipeline_id: uuid.UUID = Field(primary_key=True)
    hour: datetime = Field(sa_column=Column(UTCDateTime, primary_key=True))
    day: datetime = Field(sa_type=UTCDateTime, nullable=False, description="The hour's day (UTC midnight): "
                          "grouping by day is a plain GROUP BY on every database")
    pipeline_name: str = Field(sa_column=Column(String(100), nullable=False))


class UsageTotal(_Counters, table=True):
    """One pipeline's usage since it was created: what /metrics exports, one row per pipeline ever."""

    __tablename__ = "usage_totals"

    tenant_id: uuid.UUID = Field(sa_column=Column(ForeignKey("tenants.id", ondelete="CASCADE"), primary_key=True))
    pipeline_id: uuid.UUID = Field(primary_key=True)
    pipeline_name: str = Field(sa_column=Column(String(100), nullable=False))
    attempts_le_10s: int = _counter()
    attempts_le_30s: int = _counter()
    attempts_le_60s: int = _counter()
    attempts_le_120s: int = _counter()
    attempts_le_300s: int = _counter()
    attempts_le_900s: int = _counter()
    attempts_le_3600s: int = _counter()
