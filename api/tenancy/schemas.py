"""Tenants and API keys as the API takes and shows them."""

from __future__ import annotations

import uuid
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from api.core.security import Role

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9 ._-]*$"


class TenantCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=100, pattern=NAME_PATTERN)


class TenantRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    name: str
    created_at: datetime


class ApiKeyCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=100, pattern=NAME_PATTERN)
    role: Role


class ApiKeyRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    tenant_id: uuid.UUID
    name: str
    role: Role
    prefix: str = Field(description="The key's first characters, to recognise it")
    created_at: datetime
    revoked_at: datetime | None


class ApiKeyCreated(ApiKeyRead):
    key: str | None = Field(description="The API key itself: shown only in the response that issued it, store it "
                                        "now; null when an Idempotency-Key replays that response (never stored)")


class CallerRead(BaseModel):
    tenant_id: uuid.UUID
    key_id: uuid.UUID | None
    role: Role
