"""Recording, listing and pruning audit events. Every write in every service calls ``record``."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import select as sa_select
from sqlmodel import Session, col

from api.audit.models import AuditEvent
from api.core.pagination import PageParams, paginate
from api.core.pruning import Batch, Resume, prune_batch
from api.core.scoping import scoped_select
from api.core.security import TenantContext


def record(
    session: Session,
    *,
    tenant_id: uuid.UUID,
    actor: str,
    actor_key_id: uuid.UUID | None,
    resource_type: str,
    resource_id: object,
    action: str,
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
) -> AuditEvent:
    event = AuditEvent(
        tenant_id=tenant_id, actor=actor, actor_key_id=actor_key_id, resource_type=resource_type,
        resource_id=str(resource_id), action=action, before=before, after=after,
    )
    session.add(event)
    return event


def record_by(session: Session, ctx: TenantContext, **fields: Any) -> AuditEvent:
    """``record`` for a tenant caller."""
    return record(session, tenant_id=ctx.tenant_id, actor=ctx.actor, actor_key_id=ctx.key_id, **fields)


def list_events(
    *,
    session: Session,
    ctx: TenantContext,
    page: PageParams,
    resource_type: str | None = None,
    resource_id: str | None = None,
    action: str | None = None,
) -> tuple[list[AuditEvent], int]:
    stmt = scoped_select(AuditEvent, ctx.tenant_id)
    if resource_type:
        stmt = stmt.where(AuditEvent.resource_type == resource_type)
    if resource_id:
        stmt = stmt.where(AuditEvent.resource_id == resource_id)
    if action:
        stmt = stmt.where(AuditEvent.action == action)
    return paginate(session, stmt, page, AuditEvent)


def prune_events(session: Session, *, before: datetime, after: Resume, limit: int) -> Batch:
    """Delete the next ``limit`` events recorded before ``before``, oldest first (retention,
    ``api.retention``)."""
    return prune_batch(session, AuditEvent, col(AuditEvent.created_at), before=before, after=after, limit=limit,
                       pick=lambda in_window: sa_select(col(AuditEvent.id), col(AuditEvent.tenant_id)).where(in_window))
