"""Tables of tenancy: tenants, their API keys, the portal sessions opened with those keys, and the
operator's quota overrides."""


from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import Column, ForeignKey, Index, String
from sqlmodel import Field, SQLModel

from api.core.db import UTCDateTime, utcnow


class Tenant(SQLModel, table=True):
    __tablename__ = "tenants"

    id: uuid.UUID = Field(default_factory=uuid.uuid4, primary_key=True)
    name: str = Field(sa_column=Column(String(100), nullable=False, unique=True))
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)
    field_key_version: int | None = Field(
        default=None, description="The version of the tenant's field key in the secret store that every run "
                                  "reads (api.tenancy.field_keys); null until a pipeline first needs one")


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


class PortalSession(SQLModel, table=True):
    """A portal sign-in, server-side: the browser holds only a random id whose SHA-256 is ``id_hash``."""

    __tablename__ = "portal_sessions"
    __table_args__ = (Index("ix_portal_sessions_last_seen_at", "last_seen_at"),)

    id_hash: str = Field(sa_column=Column(String(64), primary_key=True))
    tenant_id: uuid.UUID = Field(
        sa_column=Column(ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False, index=True)
    )
    api_key_id: uuid.UUID = Field(
        sa_column=Column(ForeignKey("api_keys.id", ondelete="CASCADE"), nullable=False, index=True)
    )
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)
    last_seen_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)
    expires_at: datetime = Field(sa_type=UTCDateTime, nullable=False, index=True)


class TenantQuota(SQLModel, table=True):
    """The operator's overrides of one tenant's quotas (``api.tenancy.quotas``); null: the setting's default."""

    __tablename__ = "tenant_quotas"

    tenant_id: uuid.UUID = Field(sa_column=Column(ForeignKey("tenants.id", ondelete="CASCADE"), primary_key=True))
    pipelines: int | None = None
    connections: int | None = None
    api_keys: int | None = None
    webhooks: int | None = None
    runs_per_hour: int | None = None
    concurrent_runs: int | None = None
    continuous_pipelines: int | None = None
    updated_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)
