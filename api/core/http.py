"""Response helpers shared by routers: a resource with its ``ETag`` (and ``Location`` when created)."""

from __future__ import annotations

from fastapi.responses import JSONResponse
from pydantic import BaseModel


def resource_response(
    body: BaseModel, *, etag: str | None = None, status_code: int = 200, location: str | None = None
) -> JSONResponse:
    headers: dict[str, str] = {}
    if etag is not None:
        headers["ETag"] = etag
    if location is not None:
        headers["Location"] = location
    return JSONResponse(body.model_dump(mode="json", by_alias=True), status_code=status_code, headers=headers)
