"""One row per Delta pipeline's table (``table_maintenance``), owned by ``api.maintenance``: what runs
added since the last compaction (the trigger's counters), the table as last seen, the task asked for
or holding the table (one at a time: the lease), what the last compaction, vacuum and checkpoint did,
and running totals for /metrics.

Like the usage ledger, the row outlives its pipeline (no foreign key to it: /metrics' totals never
go down); a tenant's deletion takes it along.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Column, ForeignKey, String
from sqlmodel import Field, SQLModel

from api.core.db import UTCDateTime, utcnow


def _count() -> Any:
    return Field(default=0, sa_type=BigInteger, nullable=False)


class TableMaintenance(SQLModel, table=True):
    __tablename__ = "table_maintenance"

    pipeline_id: uuid.UUID = Field(primary_key=True)
    tenant_id: uuid.UUID = Field(sa_column=Column(ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False,
                                                  index=True))
    # Added by runs since the last compaction (a compaction subtracts what it saw, not what came after).
    files_since_compaction: int = _count()
    small_files_since_compaction: int = _count()
    commits_since_compaction: int = _count()
    # The table as the last task or health read saw it, plus what runs added since.
    files: int = _count()
    small_files: int = _count()
    bytes: int = _count()
    version: int | None = Field(default=None, sa_type=BigInteger)
    observed_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    # A task asked for and not yet taken (a burst of runs sends one), and what it was asked to do.
    requested_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    request: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON(none_as_null=True)))
    # The task holding the table: one at a time.
    lease_owner: str | None = Field(default=None, sa_column=Column(String(200)))
    lease_expires_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    # When the scheduler's sweep sends a task on its own: the next vacuum, a failed step's retry, or a
    # request whose message was lost.
    due_at: datetime | None = Field(default=None, sa_type=UTCDateTime, index=True)
    last_compaction: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON(none_as_null=True)))
    last_compaction_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    last_vacuum: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON(none_as_null=True)))
    last_vacuum_at: datetime | None = Field(default=None, sa_type=UTCDateTime, description="The last vacuum that ran "
                                            "to its end (due again an interval later)")
    last_checkpoint: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON(none_as_null=True)))
    # The table's protocol as the last task read it (``schemas.TableProtocolRead``).
    protocol: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON(none_as_null=True)))
    # Running totals, never decreasing (/metrics).
    compactions: int = _count()
    vacuums: int = _count()
    checkpoints: int = _count()
    failures: int = _count()
    files_compacted: int = _count()
    files_vacuumed: int = _count()
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)
    updated_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)
