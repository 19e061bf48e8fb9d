"""Response headers shared by routers: a resource's ``ETag``, and its ``Location`` when created."""

from __future__ import annotations

from fastapi import Response


def resource_headers(response: Response, *, etag: str | None = None, location: str | None = None) -> None:
    if etag is not None:
        response.headers["ETag"] = etag
    if location is not None:
        response.headers["Location"] = location
