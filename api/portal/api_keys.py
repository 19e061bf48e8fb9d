"""The portal's API keys page, a tenant admin's: the tenant's keys (revoked ones too), a new key shown
once (with a copy button), and revocation.

A new key reaches the page through the session's flash cookie (``session.py``) rather than in the
POST's own response, so that reloading the page shows the list again instead of issuing another key."""

from __future__ import annotations

from typing import Annotated

from fastapi import Form
from fastapi.responses import Response

from api.core.errors import PreconditionFailed, ValidationFailed
from api.core.pagination import PageParams
from api.portal import pages
from api.portal.auth import Admin, SignedIn, portal_router, session_codec, set_cookie
from api.portal.forms import ApiKeyForm, RevokeForm
from api.portal.session import COOKIE_PATH, FLASH_COOKIE, FLASH_TTL_S, SESSION_COOKIE
from api.portal.views import FormErrors
from api.tenancy import service as tenancy
from api.tenancy.quotas import QuotaExceeded, QuotaLimits

router = portal_router()

KEYS_SHOWN = 500
PAGE = "/portal/api-keys"


def _keys_page(caller: SignedIn, *, status: int = 200, form: ApiKeyForm | None = None,
               errors: FormErrors | None = None, issued: dict[str, str] | None = None) -> Response:
    """The page; ``issued``: a key just issued (``id``, ``key``), shown if it is one of the tenant's."""
    rows, total = tenancy.list_keys(session=caller.session, ctx=caller.ctx,
                                    page=PageParams(limit=KEYS_SHOWN, offset=0, sort="-created_at"))
    new = next((k for k in rows if issued and str(k.id) == issued.get("id")), None)
    return caller.render("api_keys.html", status=status, keys=rows, total=total,
                         etags={k.id: tenancy.key_etag(k) for k in rows},
                         values=(form or ApiKeyForm.initial()).values(), errors=errors or FormErrors(),
                         issued=new, issued_key=issued["key"] if new and issued else "")


@router.get("/api-keys")
def api_keys_page(caller: Admin) -> Response:
    """The tenant's API keys and the new-key form; right after a key is issued, the key itself, once."""
    issued = session_codec(caller.request).open_flash(caller.request.cookies.get(FLASH_COOKIE))
    response = _keys_page(caller, issued=issued)
    if issued is not None:
        response.delete_cookie(FLASH_COOKIE, path=PAGE)
    return response


@router.post("/api-keys")
def create_api_key(caller: Admin, form: Annotated[ApiKeyForm, Form()]) -> Response:
    """Issue an API key (stored only as a digest) and show it once on the keys page."""
    try:
        spec = form.spec()
        api_key, key = tenancy.create_key(session=caller.session, ctx=caller.ctx, name=spec.name, role=spec.role,
                                          quotas=QuotaLimits.defaults(caller.settings))
    except (ValidationFailed, QuotaExceeded) as exc:

        caller.start_over(exc)
        return _keys_page(caller, status=exc.status, form=form, errors=form.errors(exc))
    response = pages.redirect(PAGE)
    set_cookie(response, caller.request, FLASH_COOKIE,
               session_codec(caller.request).seal_flash({"id": str(api_key.id), "key": key}), FLASH_TTL_S, path=PAGE)
    return response


@router.post("/api-keys/{key_id}/revoke")
def revoke_api_key(caller: Admin, key_id: str, form: Annotated[RevokeForm, Form()]) -> Response:
    """Revoke an API key at once; revoking the key signed in with ends this session too."""
    ident = pages.parse_id(key_id, "API key")
    try:
        tenancy.revoke_key(session=caller.session, ctx=caller.ctx, key_id=ident, if_match=form.etag or None)
    except PreconditionFailed as exc:
        caller.start_over(exc)
        return _keys_page(caller, status=exc.status, errors=FormErrors(general=[
            "That key was changed after this page was shown (revoked already?); nothing was done. Look again."]))
    if ident == caller.ctx.key_id:
        response = pages.redirect("/portal/login?notice=own-key-revoked")
        response.delete_cookie(SESSION_COOKIE, path=COOKIE_PATH)
        return response
    return pages.redirect(f"{PAGE}?notice=key-revoked")
