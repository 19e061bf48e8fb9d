"""Tables of tenancy: tenants and their API keys."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import Column, ForeignKey, String
from sqlmodel import Field, SQLModel

from api.core.db import UTCDateTime, utcnow


class Tenant(SQLModel, table=True):
    __tablename__ = "tenants"

    id: uuid.UUID = Field(default_factory=uuid.uuid4, primary_key=True)
    name: str = Field(sa_column=Column(String(100), nullable=False, unique=True))
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)


class ApiKey(SQLModel, table=True):
    __tablename__ = "api_keys"

    id: uuid.UUID = Field(default_factory=uuid.uuid4, primary_key=True)
    tenant_id: uuid.UUID = Field(
        sa_column=Column(ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False, index=True)
    )
    name: str = Field(sa_column=Column(String(100), nullable=False))
    role: str = Field(sa_column=Column(String(16), nullable=False))
    prefix: str = Field(sa_column=Column(String(16), nullable=False))
    key_hash: str = Field(sa_column=Column(String(64), nullable=False, unique=True))
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)
    revoked_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
