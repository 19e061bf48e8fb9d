"""The self-service portal at ``/portal``: server-rendered pages over the same services, roles and
tenant scoping as the API, gathered from one module per domain.

``auth`` signs in and says who is signed in on every page; ``pipelines``, ``replay``, ``runs`` and
``connections`` hold the pages; ``assets`` the stylesheet and script. None of these routes is part of
the OpenAPI contract.
"""

from __future__ import annotations

from fastapi import APIRouter

from api.portal import assets, auth, connections, pipelines, replay, runs

router = APIRouter(include_in_schema=False)
for pages in (auth, pipelines, replay, runs, connections, assets):
    router.include_router(pages.router)
