"""The connections table: how to reach a tenant's Kafka cluster and its schema registry. Credentials
are never stored here: only the path of their secret and its version."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column, ForeignKey, String, UniqueConstraint
from sqlmodel import Field, SQLModel

from api.core.db import UTCDateTime, utcnow
from api.kafka.config import SaslMechanism, SecurityProtocol


class Connection(SQLModel, table=True):
    __tablename__ = "connections"
    __table_args__ = (UniqueConstraint("tenant_id", "name", name="uq_connections_tenant_name"),)

    id: uuid.UUID = Field(default_factory=uuid.uuid4, primary_key=True)
    tenant_id: uuid.UUID = Field(
        sa_column=Column(ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False, index=True)
    )
    name: str = Field(sa_column=Column(String(100), nullable=False))
    bootstrap_servers: str = Field(sa_column=Column(String(2048), nullable=False))
    security_protocol: SecurityProtocol = Field(sa_column=Column(String(16), nullable=False))
    sasl_mechanism: SaslMechanism | None = Field(default=None, sa_column=Column(String(16)))
    ssl: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    options: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    # The registry's public part: url, ca_pem, endpoint_identification, and which credentials (auth).
    schema_registry: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    secret_path: str | None = Field(default=None, sa_column=Column(String(512)))
    credentials_version: int | None = None
    revision: int = 1
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)
    updated_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)
