"""The portal's stylesheet and script, served from a fixed allow-list: no path from the URL ever
reaches the file system."""

from __future__ import annotations

from fastapi.responses import Response

from api.portal.auth import portal_router
from api.portal.pages import HERE

router = portal_router()

_STATIC = {"portal.css": "text/css; charset=utf-8", "portal.js": "text/javascript; charset=utf-8"}


@router.get("/static/{name}")
def static(name: str) -> Response:
    """One of the portal's static files."""
    media = _STATIC.get(name)
    if media is None:
        return Response("Not found", status_code=404, media_type="text/plain")
    return Response((HERE / "static" / name).read_bytes(), media_type=media,
                    headers={"Cache-Control": "public, max-age=300", "X-Content-Type-Options": "nosniff"})
