"""Entity tags for optimistic concurrency: every single-object read and write carries an ``ETag``;
PUT/PATCH/DELETE honour ``If-Match`` (412 when it no longer matches)."""

from __future__ import annotations

import hashlib

from api.core.errors import PreconditionFailed


def etag_for(*parts: object) -> str:
    digest = hashlib.sha256(":".join(str(p) for p in parts).encode()).hexdigest()[:20]
    return f'"{digest}"'


def check_if_match(if_match: str | None, current: str) -> None:
    """Raise 412 unless ``If-Match`` is absent, ``*``, or lists the current tag."""
    if if_match is None:
        return
    candidates = [tag.strip().removeprefix("W/") for tag in if_match.split(",")]
    if "*" in candidates or current in candidates:
        return
    raise PreconditionFailed(
        "If-Match does not match the current ETag: the resource changed since you read it; "
        "GET it again and retry",
        current_etag=current,
    )
