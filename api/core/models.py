"""Tables of shared plumbing: stored responses of idempotent POSTs."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column, Index, String, Text
from sqlmodel import Field, SQLModel

from api.core.db import UTCDateTime, utcnow


class IdempotencyRecord(SQLModel, table=True):
    __tablename__ = "idempotency_records"
    __table_args__ = (Index("ix_idempotency_records_created", "created_at"),)  # retention's oldest first

    scope: str = Field(sa_column=Column(String(64), primary_key=True))
    key: str = Field(sa_column=Column(String(255), primary_key=True))
    fingerprint: str = Field(sa_column=Column(String(64), nullable=False))
    status_code: int
    body: str = Field(sa_column=Column(Text, nullable=False))
    headers: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)
