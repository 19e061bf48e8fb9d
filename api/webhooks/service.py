"""Webhooks: create, read, patch, delete, rotate the signing secret, send a test event, list deliveries.

The signing secret lives in the secret store (``api.secrets.store.webhook_secret_path``) like a
connection's credentials, with the same write order (``api.secrets.lifecycle``): the row is flushed,
the secret written, and a rollback destroys it; a deleted webhook's secret is destroyed after the
commit, and what escapes both is destroyed by the orphan sweep. A rotation writes a new version; the
previous one keeps signing beside it for ``ROTATION_OVERLAP`` so receivers can switch without a gap.

A URL's query may hold the receiver's token: a viewer, who cannot edit the URL, reads it masked
(``api.core.redaction.masked_url``), and so does the audit trail, which viewers read.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from pydantic import ValidationError
from sqlalchemy import func
from sqlmodel import Session, select

from api.audit.service import record_by
from api.core.db import utcnow
from api.core.egress import Checks
from api.core.errors import ValidationFailed
from api.core.etag import check_if_match, etag_for
from api.core.merge_patch import merge_patch
from api.core.pagination import PageParams, paginate
from api.core.redaction import masked_url
from api.core.scoping import get_scoped, scoped_select
from api.core.security import Role, TenantContext
from api.secrets.lifecycle import delete_with_secret, write_new
from api.secrets.store import SecretStore, webhook_secret_path
from api.tenancy.quotas import QuotaLimits, enforce
from api.webhooks import signing
from api.webhooks.destinations import host_allowed
from api.webhooks.events import add_deliveries
from api.webhooks.models import Webhook, WebhookDelivery, WebhookEvent
from api.webhooks.schemas import TEST_EVENT, DeliveryRead, DeliveryState, WebhookRead, WebhookSpec
from spark_jobs.public import EgressPolicy

ROTATION_OVERLAP = timedelta(hours=24)
RESOURCE_TYPE = "webhook"


def etag(webhook: Webhook) -> str:
    return etag_for(webhook.id, webhook.revision)


def to_read(webhook: Webhook, ctx: TenantContext | None = None) -> WebhookRead:
    """The webhook as ``ctx`` may see it: its URL masked below the editor role (editors may change it)."""
    read = WebhookRead.model_validate(webhook, from_attributes=True)
    if ctx is not None and ctx.role.rank < Role.editor.rank:
        read.url = masked_url(read.url)
    return read


def delivery_read(delivery: WebhookDelivery) -> DeliveryRead:
    return DeliveryRead.model_validate(delivery, from_attributes=True)


def _check_host(spec: WebhookSpec, allowed_hosts: list[str], egress: EgressPolicy) -> None:
    """The URL's host is one the operator lets webhooks go to, by name and by address (the egress
    policy of webhooks, which also denies the private ranges by default: docs/security.md)."""
    if not host_allowed(spec.url, allowed_hosts):
        raise ValidationFailed.field("url", "The URL's host is not one webhooks may be sent to "
                                            "(INLET_WEBHOOK_ALLOWED_HOSTS); ask the operator to allow it")
    Checks(egress).url("url", spec.url)


def _audit_view(webhook: Webhook) -> dict[str, Any]:
    return to_read(webhook).model_dump(mode="json", exclude={"created_at", "updated_at"}) | {
        "url": masked_url(webhook.url)}


def _new_secret(session: Session, secrets: SecretStore, webhook: Webhook) -> str:
    """A fresh signing secret written as the webhook's next version; returned to be shown once."""
    secret = signing.new_secret()
    path = webhook.secret_path or webhook_secret_path(webhook.tenant_id, webhook.id)
    if webhook.secret_path is None:
        version = write_new(session, secrets, path, {"secret": secret}, unsaved="its webhook was not saved")
    else:
        version = secrets.write(path, {"secret": secret})
    webhook.secret_path, webhook.secret_version = path, version
    return secret


def quota_used(session: Session, tenant_id: uuid.UUID) -> int:
    """The tenant's webhooks: what its ``webhooks`` quota counts (every event is one delivery to each)."""
    return session.exec(select(func.count()).select_from(Webhook).where(Webhook.tenant_id == tenant_id)).one()


def create_webhook(
    *, session: Session, ctx: TenantContext, secrets: SecretStore, spec: WebhookSpec, allowed_hosts: list[str],
    quotas: QuotaLimits, egress: EgressPolicy,
) -> tuple[Webhook, str]:
    """A new endpoint and its signing secret (the only time the secret is returned)."""
    _check_host(spec, allowed_hosts, egress)
    enforce(session, ctx.tenant_id, "webhooks", defaults=quotas, count=lambda: quota_used(session, ctx.tenant_id))
    webhook = Webhook(tenant_id=ctx.tenant_id, url=spec.url, events=list(spec.events), description=spec.description,
                      enabled=spec.enabled)
    session.add(webhook)
    session.flush()
    secret = _new_secret(session, secrets, webhook)
    session.flush()
    record_by(session, ctx, resource_type=RESOURCE_TYPE, resource_id=webhook.id, action="create",
              after=_audit_view(webhook))
    return webhook, secret


def get_webhook(*, session: Session, ctx: TenantContext, webhook_id: uuid.UUID, lock: bool = False) -> Webhook:
    return get_scoped(session, Webhook, ctx.tenant_id, webhook_id, resource="Webhook", lock=lock)


def list_webhooks(*, session: Session, ctx: TenantContext, page: PageParams) -> tuple[list[Webhook], int]:
    return paginate(session, scoped_select(Webhook, ctx.tenant_id), page, Webhook)


def _touch(session: Session, ctx: TenantContext, webhook: Webhook, action: str, before: dict[str, Any]) -> None:
    webhook.revision += 1
    webhook.updated_at = utcnow()
    session.add(webhook)
    session.flush()
    record_by(session, ctx, resource_type=RESOURCE_TYPE, resource_id=webhook.id, action=action, before=before,
              after=_audit_view(webhook))


def patch_webhook(
    *, session: Session, ctx: TenantContext, webhook_id: uuid.UUID, patch: dict[str, Any], if_match: str | None,
    allowed_hosts: list[str], egress: EgressPolicy,
) -> Webhook:
    """Change some of url, events, description, enabled (JSON Merge Patch); the secret is rotated apart."""
    webhook = get_webhook(session=session, ctx=ctx, webhook_id=webhook_id, lock=True)
    check_if_match(if_match, etag(webhook))
    current = {"url": webhook.url, "events": webhook.events, "description": webhook.description,
               "enabled": webhook.enabled}
    try:
        spec = WebhookSpec.model_validate(merge_patch(current, patch))
    except ValidationError as exc:
        raise ValidationFailed.of(exc, "The patched webhook is not valid") from None
    if spec.model_dump() == current:
        return webhook  # a no-op write changes nothing, not even the ETag
    if spec.url != webhook.url:
        _check_host(spec, allowed_hosts, egress)
    before = _audit_view(webhook)
    webhook.url, webhook.events, webhook.description, webhook.enabled = (
        spec.url, list(spec.events), spec.description, spec.enabled)
    _touch(session, ctx, webhook, "update", before)
    return webhook


def rotate_secret(
    *, session: Session, ctx: TenantContext, secrets: SecretStore, webhook_id: uuid.UUID, if_match: str | None,
) -> tuple[Webhook, str]:
    """A new signing secret; the previous one signs beside it for ``ROTATION_OVERLAP``."""
    webhook = get_webhook(session=session, ctx=ctx, webhook_id=webhook_id, lock=True)
    check_if_match(if_match, etag(webhook))
    before = _audit_view(webhook)
    now = utcnow()
    webhook.previous_secret_version, webhook.previous_secret_until = webhook.secret_version, now + ROTATION_OVERLAP
    secret = _new_secret(session, secrets, webhook)
    webhook.secret_rotated_at = now
    _touch(session, ctx, webhook, "rotate-secret", before)
    return webhook, secret


def delete_webhook(
    *, session: Session, ctx: TenantContext, secrets: SecretStore, webhook_id: uuid.UUID, if_match: str | None,
) -> None:
    """Delete the endpoint, its deliveries and (after the commit) every version of its secret."""
    webhook = get_webhook(session=session, ctx=ctx, webhook_id=webhook_id, lock=True)
    check_if_match(if_match, etag(webhook))
    before = _audit_view(webhook)
    delete_with_secret(session, secrets, webhook, webhook.secret_path, why="webhook deleted")
    record_by(session, ctx, resource_type=RESOURCE_TYPE, resource_id=webhook_id, action="delete", before=before)


def send_test(*, session: Session, ctx: TenantContext, webhook_id: uuid.UUID) -> WebhookDelivery:
    """A ``webhook.test`` event to this endpoint only, delivered like any other (a disabled endpoint too:
    it can be tried before it is enabled)."""
    webhook = get_webhook(session=session, ctx=ctx, webhook_id=webhook_id)
    event = WebhookEvent(tenant_id=ctx.tenant_id, type=TEST_EVENT,
                         data={"webhook_id": str(webhook.id), "message": "A test event sent on request"})
    session.add(event)
    session.flush()
    return add_deliveries(session, event, [webhook])[0]


def list_deliveries(
    *, session: Session, ctx: TenantContext, webhook_id: uuid.UUID, page: PageParams,
    state: DeliveryState | None = None, event_type: str | None = None,
) -> tuple[list[WebhookDelivery], int]:
    get_webhook(session=session, ctx=ctx, webhook_id=webhook_id)
    stmt = scoped_select(WebhookDelivery, ctx.tenant_id).where(WebhookDelivery.webhook_id == webhook_id)
    if state:
        stmt = stmt.where(WebhookDelivery.state == state)
    if event_type:
        stmt = stmt.where(WebhookDelivery.event_type == event_type)
    return paginate(session, stmt, page, WebhookDelivery)


def recent_deliveries(*, session: Session, ctx: TenantContext, limit: int) -> list[WebhookDelivery]:
    """The tenant's newest deliveries over all its webhooks."""
    rows, _ = paginate(session, scoped_select(WebhookDelivery, ctx.tenant_id),
                       PageParams(limit=limit, offset=0, sort="-created_at"), WebhookDelivery)
    return rows
