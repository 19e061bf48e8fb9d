"""``Idempotency-Key`` on POSTs: the same key and body give back the first response and create
nothing new; the same key with another body is a 422. The stored response is written in the
same transaction as the object it describes, so a retry can never see one without the other.

What is kept of the request is a fingerprint: an HMAC-SHA256, under a key derived from the server key
(``api.core.server_key``), of the method, the path and the JSON body with every credential masked
(``api.core.redaction.SECRET_FIELDS``). Neither a credential nor the body can be tested against it
without the server key. Records written before fingerprints were keyed had their digests scrubbed by
migration 0007: a retry of one is a 422, never a second object.

A key replays for ``INLET_RETENTION_IDEMPOTENCY_DAYS`` (a day by default): then its record is pruned
(``prune_records``) and the same key makes a new request."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, TypeVar

from fastapi import Depends, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from sqlalchemy import select as sa_select
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col

from api.core.config import Settings
from api.core.errors import Conflict, ValidationFailed
from api.core.models import IdempotencyRecord
from api.core.pruning import Batch, Resume, prune_batch
from api.core.redaction import SECRET_FIELDS, without_secrets
from api.core.server_key import derived_key

HEADER = "Idempotency-Key"
KEYED = "hmac:"  # how a keyed fingerprint starts; a record without it holds an unkeyed SHA-256
M = TypeVar("M", bound=BaseModel)
_REPLAYED_HEADERS = ("etag", "location")


@dataclass(frozen=True)
class IdempotentRequest:
    key: str | None
    fingerprint: str

    def respond(
        self, session: Session, scope: str, produce: Callable[[], M], *, response: Response, status_code: int,
        withhold: tuple[str, ...] = (),
    ) -> M | JSONResponse:
        """Replay the stored response for this key, or produce one and store it with the change.

        ``produce`` returns the body and sets its headers on ``response``; ``status_code`` is the
        route's. ``withhold`` names top-level body fields shown once and never stored (a new API
        key): a replay shows them as null."""
        if self.key is None:
            return produce()
        stored = session.get(IdempotencyRecord, (scope, self.key))
        if stored is not None:
            if not hmac.compare_digest(stored.fingerprint, self.fingerprint):
                raise ValidationFailed.field(
                    "header.Idempotency-Key",
                    "This Idempotency-Key was already used with a different request; use a new key",
                )
            # The first response as it was sent, not built again from objects that may have changed since.
            return JSONResponse(
                json.loads(stored.body), status_code=stored.status_code,
                headers={**stored.headers, "Idempotent-Replayed": "true"},
            )
        body = produce()
        sent = body.model_dump(mode="json", by_alias=True)  # as FastAPI serialises the route's response model
        session.add(IdempotencyRecord(
            scope=scope, key=self.key, fingerprint=self.fingerprint, status_code=status_code,
            body=json.dumps(sent | dict.fromkeys(withhold)),
            headers={k: v for k, v in response.headers.items() if k in _REPLAYED_HEADERS},
        ))
        try:
            session.flush()
        except IntegrityError as exc:
            raise Conflict("Another request with this Idempotency-Key is in progress; retry it shortly") from exc
        return body


def _signed_input(method: str, path: str, raw: bytes) -> bytes:
    try:
        canonical = json.dumps(without_secrets(json.loads(raw), SECRET_FIELDS), sort_keys=True,
                               separators=(",", ":")).encode()
    except ValueError:
        canonical = raw
    return method.encode() + b" " + path.encode() + b"\n" + canonical


def fingerprint_key(request: Request) -> bytes:
    """The app's fingerprint key, derived once."""
    key: bytes | None = getattr(request.app.state, "fingerprint_key", None)
    if key is None:
        settings: Settings = request.app.state.settings
        key = request.app.state.fingerprint_key = derived_key(settings, "idempotency-fingerprint")
    return key


def fingerprint(key: bytes, method: str, path: str, raw: bytes) -> str:
    """The keyed fingerprint of a request, as stored: ``hmac:`` and the URL-safe base64 of the HMAC."""
    mac = hmac.new(key, _signed_input(method, path, raw), hashlib.sha256).digest()
    return KEYED + base64.urlsafe_b64encode(mac).decode().rstrip("=")


async def idempotent_request(request: Request) -> IdempotentRequest:
    key = request.headers.get(HEADER)
    if key is not None and not (1 <= len(key) <= 255 and key.isprintable()):
        raise ValidationFailed.field("header.Idempotency-Key", "Idempotency-Key must be 1 to 255 printable characters")
    if key is None:
        return IdempotentRequest(key=None, fingerprint="")
    raw = await request.body()
    return IdempotentRequest(key=key, fingerprint=fingerprint(fingerprint_key(request), request.method,
                                                              request.url.path, raw))


IdempotencyDep = Annotated[IdempotentRequest, Depends(idempotent_request)]


def prune_records(session: Session, *, before: datetime, after: Resume, limit: int) -> Batch:
    """Delete the next ``limit`` stored responses made before ``before``: past the replay window a key
    makes a new request (retention, ``api.retention``). They belong to no tenant's history."""
    return prune_batch(session, IdempotencyRecord, col(IdempotencyRecord.created_at), before=before, after=after,
                       limit=limit, pick=lambda in_window: sa_select(
                           col(IdempotencyRecord.scope), col(IdempotencyRecord.key)).where(in_window))
