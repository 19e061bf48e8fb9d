"""Who changed what, as the portal says it: the audit trail's actors in words, and the last change of
an object (named beside an edit that conflicts with it)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from api.audit import service as audit
from api.audit.models import AuditEvent
from api.core.pagination import PageParams
from api.core.security import Role
from api.portal.auth import SignedIn
from api.tenancy import service as tenancy


def actor_names(caller: SignedIn, events: Iterable[AuditEvent]) -> dict[str, str]:
    """Each event's actor in words. An admin sees a key's name and role; other roles its short id,
    since key names are an admin's to read (``GET /api-keys``). The caller's own key is "you"."""
    events = list(events)
    ids = {e.actor_key_id for e in events if e.actor_key_id is not None}
    keys = {}
    if caller.ctx.role is Role.admin:
        keys = tenancy.keys_by_id(session=caller.session, ctx=caller.ctx, key_ids=ids)
    names: dict[str, str] = {}
    for event in events:
        key_id = event.actor_key_id
        if key_id is None:
            names[event.actor] = "the operator" if event.actor == "operator" else event.actor
        elif key_id == caller.ctx.key_id:
            names[event.actor] = "you"
        elif (key := keys.get(key_id)) is not None:
            names[event.actor] = f"key “{key.name}” ({key.role})"
        else:
            names[event.actor] = f"API key {str(key_id)[:8]}"
    return names


@dataclass(frozen=True)
class Change:
    who: str
    action: str
    at: datetime


def last_change(caller: SignedIn, resource_type: str, resource_id: uuid.UUID) -> Change | None:
    """The newest audit event of an object: who changed it, how and when."""
    rows, _ = audit.list_events(session=caller.session, ctx=caller.ctx,
                                page=PageParams(limit=1, offset=0, sort="-created_at"),
                                resource_type=resource_type, resource_id=str(resource_id))
    if not rows:
        return None
    return Change(who=actor_names(caller, rows)[rows[0].actor], action=rows[0].action, at=rows[0].created_at)
