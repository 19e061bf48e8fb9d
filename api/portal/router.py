"""The self-service portal at ``/portal``: server-rendered pages over the same services, roles and
tenant scoping as the API, gathered from one module per domain.

``auth`` signs in and says who is signed in on every page; ``pipelines``, ``replay``, ``quarantine``, ``offsets``,
``runs``, ``connections``, ``webhooks``, ``quotas``, ``usage`` and ``api_keys`` hold the pages
 (``charts``, ``views`` and
``audit`` what they show beyond the services' objects); ``assets`` the stylesheet and script. None of
these routes is part of the OpenAPI contract.
"""

from __future__ import annotations

from fastapi import APIRouter

from api.portal import (
    api_keys,
    assets,
    auth,
    connections,
    offsets,
    pipelines,
    quarantine,
    quotas,
    replay,
    runs,
    usage,
    webhooks,
)

router = APIRouter(include_in_schema=False)
for pages in (auth, pipelines, replay, quarantine, offsets, runs, connections, webhooks, quotas, usage, api_keys,
              assets):
    router.include_router(pages.router)
