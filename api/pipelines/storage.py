"""Where a tenant's Delta tables may live: only under ``<storage root>/tenants/<tenant id>/``."""

from __future__ import annotations

import re
import uuid

from api.core.errors import ValidationFailed
from spark_jobs.public import OBJECT_STORE_SCHEMES

# Those INLET_STORAGE_ROOT may have (api/core/config.py); a URL must be under the tenant's root anyway.
ALLOWED_SCHEMES = OBJECT_STORE_SCHEMES | {"file"}
_SEGMENT = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._=-]*\Z")


def tenant_root(storage_root: str, tenant_id: uuid.UUID) -> str:
    return f"{storage_root.rstrip('/')}/tenants/{tenant_id}"


def _root_uri(storage_root: str) -> str:
    return storage_root if "://" in storage_root else f"file://{storage_root}"


def resolve_delta_uri(storage_root: str, tenant_id: uuid.UUID, path: str) -> str:
    """The table location for ``path``; a 422 on ``target.path`` for anything outside the tenant root."""
    own = tenant_root(storage_root, tenant_id)
    relative = path
    if "://" in path:
        scheme = path.split("://", 1)[0].lower()
        if scheme not in ALLOWED_SCHEMES:
            raise ValidationFailed.field("target.path", f"URL scheme {scheme!r} is not allowed")
        own_uri = tenant_root(_root_uri(storage_root), tenant_id)
        if not path.startswith(own_uri + "/"):
            raise ValidationFailed.field("target.path", "The URL is outside your tenant's storage root")
        relative = path[len(own_uri) + 1 :]
    elif path.startswith(("/", "\\", "~")):
        raise ValidationFailed.field("target.path", "Absolute paths are refused; give a path relative to your tenant's storage root")
    segments = relative.split("/")
    if any(seg in ("", ".", "..") for seg in segments):
        raise ValidationFailed.field("target.path", "The path must not contain '..', '.' or empty segments")
    bad = next((n for n, seg in enumerate(segments, 1) if not _SEGMENT.match(seg)), None)
    if bad is not None:
        raise ValidationFailed.field("target.path", f"Path segment {bad} has characters outside A-Z a-z 0-9 . _ = -")
    return f"{own}/{relative}"
