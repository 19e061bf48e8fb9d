"""The audit trail: one row per write, with who, what and the before/after (secrets never included)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column, ForeignKey, Index, String
from sqlmodel import Field, SQLModel

from api.core.db import UTCDateTime, utcnow


class AuditEvent(SQLModel, table=True):
    __tablename__ = "audit_events"
    __table_args__ = (
        Index("ix_audit_events_tenant_created", "tenant_id", "created_at"),
        # An object's history (the offsets' on the portal), newest first in index order.
        Index("ix_audit_events_resource_created", "tenant_id", "resource_type", "resource_id", "created_at", "id"),
        Index("ix_audit_events_created", "created_at"),  # retention's oldest first
    )

    id: uuid.UUID = Field(default_factory=uuid.uuid4, primary_key=True)
    tenant_id: uuid.UUID = Field(sa_column=Column(ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False))
    actor: str = Field(sa_column=Column(String(64), nullable=False))
    actor_key_id: uuid.UUID | None = Field(default=None)
    resource_type: str = Field(sa_column=Column(String(32), nullable=False))
    resource_id: str = Field(sa_column=Column(String(64), nullable=False))
    action: str = Field(sa_column=Column(String(32), nullable=False))
    before: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    after: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)
