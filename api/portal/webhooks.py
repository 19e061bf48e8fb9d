"""The portal's webhooks page: the tenant's endpoints and their most recent deliveries (the API's
``/webhooks`` and ``/webhooks/{id}/deliveries``, read-only here: a secret is shown only by the API).
A viewer sees the URLs masked, as the API shows them to a viewer."""

from __future__ import annotations

from fastapi.responses import Response

from api.core.pagination import PageParams
from api.portal.auth import Viewer, portal_router
from api.webhooks import service as webhooks

router = portal_router()

WEBHOOKS_SHOWN = 100
DELIVERIES_SHOWN = 50


@router.get("/webhooks")
def webhooks_page(caller: Viewer) -> Response:
    """The tenant's webhooks and their recent deliveries, newest first."""
    rows, total = webhooks.list_webhooks(session=caller.session, ctx=caller.ctx,
                                         page=PageParams(limit=WEBHOOKS_SHOWN, offset=0, sort="created_at"))
    deliveries = webhooks.recent_deliveries(session=caller.session, ctx=caller.ctx, limit=DELIVERIES_SHOWN)
    shown = [webhooks.to_read(w, caller.ctx) for w in rows]
    return caller.render("webhooks.html", webhooks=shown, total=total, urls={w.id: w.url for w in shown},
                         deliveries=deliveries)
