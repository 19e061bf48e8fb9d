"""Every table, imported in one place so that Alembic and the tests see the whole schema."""

from sqlmodel import SQLModel

from api.audit.models import AuditEvent
from api.connections.models import Connection
from api.core.models import IdempotencyRecord
from api.ledger.models import OffsetReplay, PartitionOffset, RunRange
from api.maintenance.models import TableMaintenance
from api.pipelines.models import Pipeline
from api.runs.models import Run, RunLogChunk
from api.tenancy.models import ApiKey, PortalSession, Tenant, TenantQuota
from api.usage.models import UsageHour, UsageTotal
from api.webhooks.models import Webhook, WebhookDelivery, WebhookDeliveryTotal, WebhookEvent

metadata = SQLModel.metadata

__all__ = [
    "ApiKey", "AuditEvent", "Connection", "IdempotencyRecord", "OffsetReplay", "PartitionOffset", "Pipeline",
    "PortalSession", "Run", "RunLogChunk", "RunRange", "TableMaintenance", "Tenant", "TenantQuota", "UsageHour",
    "UsageTotal", "Webhook", "WebhookDelivery", "WebhookDeliveryTotal", "WebhookEvent", "metadata",
]
