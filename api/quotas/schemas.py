"""Quotas as the API shows and takes them: each limit beside what the tenant uses of it."""

from __future__ import annotations

import uuid

from pydantic import BaseModel, ConfigDict, Field

MAX_LIMIT = 1_000_000


class QuotaUsage(BaseModel):
    limit: int = Field(description="What the tenant may use: the operator's override, else the default")
    used: int = Field(description="What it uses now (runs_per_hour: runs started in the last hour; "
                                  "concurrent_runs: runs executing now; continuous_pipelines: active ones)")
    default: int = Field(description="The platform's default (an INLET_QUOTA_* setting)")
    override: int | None = Field(description="The operator's value for this tenant; null: the default applies")


class TenantQuotas(BaseModel):
    tenant_id: uuid.UUID
    pipelines: QuotaUsage
    connections: QuotaUsage
    api_keys: QuotaUsage = Field(description="Unrevoked API keys")
    webhooks: QuotaUsage
    runs_per_hour: QuotaUsage = Field(description="Runs started (manual or scheduled) in any hour: a trigger over "
                                                  "it is a 429, a schedule slot over it is skipped")
    concurrent_runs: QuotaUsage = Field(description="Runs executing at once; more wait their turn")
    continuous_pipelines: QuotaUsage = Field(description="Active continuous pipelines: creating, resuming or "
                                                         "making one continuous over it is a 409")


class QuotaOverrides(BaseModel):
    """The operator's values for one tenant; an omitted or null quota follows the default."""

    model_config = ConfigDict(extra="forbid")

    pipelines: int | None = Field(default=None, ge=0, le=MAX_LIMIT)
    connections: int | None = Field(default=None, ge=0, le=MAX_LIMIT)
    api_keys: int | None = Field(default=None, ge=0, le=MAX_LIMIT)
    webhooks: int | None = Field(default=None, ge=0, le=MAX_LIMIT)
    runs_per_hour: int | None = Field(default=None, ge=0, le=MAX_LIMIT)
    concurrent_runs: int | None = Field(default=None, ge=1, le=MAX_LIMIT,
                                        description="At least 1: pause pipelines to stop a tenant's runs")
    continuous_pipelines: int | None = Field(default=None, ge=0, le=MAX_LIMIT)
