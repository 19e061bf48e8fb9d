"""The portal's quotas page: each of the tenant's limits beside what it uses now (the API's ``/quotas``);
only the operator changes them."""

from __future__ import annotations

from fastapi.responses import Response

from api.portal.auth import Viewer, portal_router
from api.quotas import service as quotas
from api.tenancy.quotas import QuotaLimits

router = portal_router()

LABELS = {
    "pipelines": "Pipelines", "connections": "Connections", "api_keys": "API keys (unrevoked)",
    "webhooks": "Webhooks", "runs_per_hour": "Runs started in the last hour", "concurrent_runs": "Runs executing now",
    "continuous_pipelines": "Active continuous pipelines",
}


@router.get("/quotas")
def quotas_page(caller: Viewer) -> Response:
    """The tenant's quotas: limit, use, and which limits the operator set for it."""
    shown = quotas.tenant_quotas(session=caller.session, ctx=caller.ctx, defaults=QuotaLimits.defaults(caller.settings))
    return caller.render("quotas.html", rows=[(LABELS[name], getattr(shown, name)) for name in LABELS])
