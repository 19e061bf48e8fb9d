"""``/webhooks``: a tenant's endpoints for signed event notifications, their secrets and deliveries."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Query, Response
from fastapi.responses import JSONResponse

from api.core.deps import Editor, IfMatch, SessionDep, SettingsDep, Viewer
from api.core.http import resource_headers
from api.core.idempotency import IdempotencyDep
from api.core.pagination import Page, PageParams, page_params
from api.core.security import TenantContext
from api.secrets.deps import SecretsDep
from api.tenancy.quotas import QuotaLimits
from api.webhooks import service
from api.webhooks.models import Webhook
from api.webhooks.schemas import DeliveryRead, DeliveryState, WebhookRead, WebhookSpec, WebhookWithSecret

router = APIRouter(prefix="/webhooks", tags=["webhooks"])

WebhookPage = Annotated[PageParams, Depends(page_params(("created_at", "updated_at", "url")))]
DeliveryPage = Annotated[PageParams, Depends(page_params(("created_at", "last_attempt_at"), default="-created_at"))]
PatchBody = Annotated[dict[str, Any], Body(
    description="JSON Merge Patch (RFC 7396) of url, events, description and enabled",
    media_type="application/merge-patch+json",
)]
_SECRET_RESPONSES: dict[int | str, dict[str, Any]] = {
    503: {"description": "The secret backend is unavailable or refuses Inlet; nothing was changed"},
}


def _read(webhook: Webhook, response: Response, ctx: TenantContext) -> WebhookRead:
    resource_headers(response, etag=service.etag(webhook))
    return service.to_read(webhook, ctx)


def _with_secret(made: tuple[Webhook, str], response: Response, *, created: bool = False) -> WebhookWithSecret:
    webhook, secret = made
    resource_headers(response, etag=service.etag(webhook), location=f"/webhooks/{webhook.id}" if created else None)
    return WebhookWithSecret(**service.to_read(webhook).model_dump(), secret=secret)


@router.post("", operation_id="create_webhook", status_code=201, response_model=WebhookWithSecret,
             responses=_SECRET_RESPONSES)
def create_webhook(
    body: WebhookSpec, response: Response, ctx: Editor, session: SessionDep, secrets: SecretsDep,
    settings: SettingsDep, idem: IdempotencyDep,
) -> WebhookWithSecret | JSONResponse:
    """Register an endpoint; the response shows its signing secret, once."""
    return idem.respond(session, f"tenant:{ctx.tenant_id}", lambda: _with_secret(service.create_webhook(
        session=session, ctx=ctx, secrets=secrets, spec=body, allowed_hosts=settings.webhook_allowed_hosts,
        quotas=QuotaLimits.defaults(settings), egress=settings.webhook_egress_policy,

    ), response, created=True), response=response, status_code=201, withhold=("secret",))


@router.get("", operation_id="list_webhooks", response_model=Page[WebhookRead])
def list_webhooks(ctx: Viewer, session: SessionDep, page: WebhookPage) -> Page[WebhookRead]:
    """List the tenant's webhooks."""
    rows, total = service.list_webhooks(session=session, ctx=ctx, page=page)
    return Page(items=[service.to_read(r, ctx) for r in rows], total=total, limit=page.limit, offset=page.offset)


@router.get("/{webhook_id}", operation_id="get_webhook", response_model=WebhookRead)
def get_webhook(webhook_id: uuid.UUID, response: Response, ctx: Viewer, session: SessionDep) -> WebhookRead:
    """Read one webhook (its secret is never shown again; a viewer sees its URL's query masked)."""
    return _read(service.get_webhook(session=session, ctx=ctx, webhook_id=webhook_id), response, ctx)


@router.patch("/{webhook_id}", operation_id="patch_webhook", response_model=WebhookRead)
def patch_webhook(
    webhook_id: uuid.UUID, body: PatchBody, response: Response, ctx: Editor, session: SessionDep,
    settings: SettingsDep, if_match: IfMatch = None,
) -> WebhookRead:
    """Change a webhook's url, events, description or enabled flag (JSON Merge Patch)."""
    return _read(service.patch_webhook(session=session, ctx=ctx, webhook_id=webhook_id, patch=body, if_match=if_match,
                                       allowed_hosts=settings.webhook_allowed_hosts,
                                       egress=settings.webhook_egress_policy), response, ctx)


@router.delete("/{webhook_id}", operation_id="delete_webhook", status_code=204, responses=_SECRET_RESPONSES)
def delete_webhook(
    webhook_id: uuid.UUID, ctx: Editor, session: SessionDep, secrets: SecretsDep, if_match: IfMatch = None,
) -> Response:
    """Delete a webhook, its delivery log and every version of its signing secret."""
    service.delete_webhook(session=session, ctx=ctx, secrets=secrets, webhook_id=webhook_id, if_match=if_match)
    return Response(status_code=204)


@router.post("/{webhook_id}/rotate-secret", operation_id="rotate_webhook_secret", response_model=WebhookWithSecret,
             responses=_SECRET_RESPONSES)
def rotate_webhook_secret(
    webhook_id: uuid.UUID, response: Response, ctx: Editor, session: SessionDep, secrets: SecretsDep,
    if_match: IfMatch = None,
) -> WebhookWithSecret:
    """A new signing secret, shown once; for 24 hours deliveries are signed with the previous one too."""
    return _with_secret(service.rotate_secret(session=session, ctx=ctx, secrets=secrets, webhook_id=webhook_id,
                                              if_match=if_match), response)


@router.post("/{webhook_id}/test", operation_id="test_webhook", status_code=202, response_model=DeliveryRead)
def test_webhook(webhook_id: uuid.UUID, ctx: Editor, session: SessionDep) -> DeliveryRead:
    """Send a webhook.test event to this endpoint (editor+: Inlet calls out); follow it in the delivery log."""
    return service.delivery_read(service.send_test(session=session, ctx=ctx, webhook_id=webhook_id))


@router.get("/{webhook_id}/deliveries", operation_id="list_webhook_deliveries", response_model=Page[DeliveryRead])
def list_webhook_deliveries(
    webhook_id: uuid.UUID, ctx: Viewer, session: SessionDep, page: DeliveryPage,
    state: DeliveryState | None = None,
    event_type: Annotated[str | None, Query(max_length=64)] = None,
) -> Page[DeliveryRead]:
    """The webhook's delivery log, newest first: state, attempts, the last answer and its latency."""
    rows, total = service.list_deliveries(session=session, ctx=ctx, webhook_id=webhook_id, page=page, state=state,
                                          event_type=event_type)
    return Page(items=[service.delivery_read(r) for r in rows], total=total, limit=page.limit, offset=page.offset)
