"""``GET /audit-events``: the tenant's audit trail."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query

from api.audit import service
from api.audit.schemas import AuditEventRead
from api.core.deps import SessionDep, Viewer
from api.core.pagination import Page, PageParams, page_params

router = APIRouter(tags=["audit"])

AuditPage = Annotated[PageParams, Depends(page_params(("created_at",), default="-created_at"))]


@router.get("/audit-events", operation_id="list_audit_events", response_model=Page[AuditEventRead])
def list_audit_events(
    ctx: Viewer,
    session: SessionDep,
    page: AuditPage,
    resource_type: Annotated[str | None, Query(max_length=32)] = None,
    resource_id: Annotated[str | None, Query(max_length=64)] = None,
    action: Annotated[str | None, Query(max_length=32)] = None,
) -> Page[AuditEventRead]:
    """List the tenant's audit events, newest first by default."""
    rows, total = service.list_events(
        session=session, ctx=ctx, page=page, resource_type=resource_type, resource_id=resource_id, action=action
    )
    return Page(items=[AuditEventRead.model_validate(r) for r in rows], total=total, limit=page.limit, offset=page.offset)
