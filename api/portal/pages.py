"""How a portal page is answered: Jinja templates rendered for the caller, the security headers every
page carries, the notices a redirect names, redirects, and ids read from the URL.

Nothing here knows who is signed in: ``auth.SignedIn.render`` passes the caller in.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse
from jinja2 import Environment, FileSystemLoader, select_autoescape

from api.core.errors import NotFound
from api.core.security import Role, TenantContext
from api.portal import views

HERE = Path(__file__).parent

_env = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(["html"]),
                   trim_blocks=True, lstrip_blocks=True)
_env.filters.update(age=views.age, duration=views.duration, number=views.number, schedule=views.schedule_text,
                    utc=views.utc, moved=views.moved, symbol=lambda state: views.STATE_SYMBOLS.get(state, "•"))

SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
                               "form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}

# Messages shown after a redirect; the query names one, so no text from the URL is ever rendered.
NOTICES = {
    "created": "The pipeline was created.",
    "paused": "The pipeline is paused: its schedule no longer fires.",
    "resumed": "The pipeline is active again.",
    "run-queued": "The run is queued; this page follows it.",
    "replayed": "The offsets were moved; the next run reads from the new positions.",
    "reprocess-queued": "The reprocess of the quarantine is queued; this page follows it.",
    "saved": "The pipeline was saved.",
    "unchanged": "Nothing was changed: the form matched what was saved.",
    "pipeline-deleted": "The pipeline was deleted.",
    "connection-created": "The connection was saved; its credentials went to the secret store.",
    "connection-saved": "The connection was saved.",
    "rotated": "The credentials were rotated: new runs and tests use the new version; runs planned before keep "
               "the one they were planned with.",
    "connection-deleted": "The connection was deleted, and every version of its credentials destroyed.",
    "key-revoked": "The API key was revoked: it no longer signs anyone in.",
    "own-key-revoked": "The key you were signed in with was revoked; sign in with another.",
    "signed-out": "You are signed out.",
}


def render(request: Request, template: str, *, ctx: TenantContext | None = None, csrf: str = "", status: int = 200,
           **context: Any) -> HTMLResponse:
    """``template`` as the page for ``request``; ``ctx``: who is signed in (the header shows it), ``csrf``:
    the token the page's forms carry."""
    context.setdefault("notice", NOTICES.get(request.query_params.get("notice", "")))
    can_edit = ctx is not None and ctx.role.rank >= Role.editor.rank
    is_admin = ctx is not None and ctx.role is Role.admin
    html = _env.get_template(template).render(ctx=ctx, can_edit=can_edit, is_admin=is_admin, csrf=csrf,
                                              path=request.url.path, **context)
    return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)


def redirect(url: str) -> RedirectResponse:
    """A 303 to ``url``: after a form, the browser GETs the page it names."""
    return RedirectResponse(url, status_code=303, headers={"Cache-Control": "no-store"})


def parse_id(value: str, resource: str) -> uuid.UUID:
    """An id from the URL; one that is not a UUID names nothing, so it is the 404 any unknown id is."""
    try:
        return uuid.UUID(value)
    except ValueError:
        raise NotFound(resource, value) from None
