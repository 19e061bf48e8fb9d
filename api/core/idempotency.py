"""``Idempotency-Key`` on POSTs: the same key and body give back the first response and create
nothing new; the same key with another body is a 422. The stored response is written in the
same transaction as the object it describes, so a retry can never see one without the other."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session

from api.core.errors import Conflict, ValidationFailed
from api.core.models import IdempotencyRecord

HEADER = "Idempotency-Key"
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
            if stored.fingerprint != self.fingerprint:
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


# Write-only values leave the fingerprint: a stored digest of a password could be brute-forced.
_SECRET_FIELDS = frozenset({"password", "client_secret", "key_pem", "key_password"})


def _without_secrets(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: "*" if k in _SECRET_FIELDS else _without_secrets(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_secrets(v) for v in value]
    return value


async def idempotent_request(request: Request) -> IdempotentRequest:
    key = request.headers.get(HEADER)
    if key is not None and not (1 <= len(key) <= 255 and key.isprintable()):
        raise ValidationFailed.field("header.Idempotency-Key", "Idempotency-Key must be 1 to 255 printable characters")
    raw = await request.body()
    try:
        canonical = json.dumps(_without_secrets(json.loads(raw)), sort_keys=True, separators=(",", ":")).encode()
    except ValueError:
        canonical = raw
    digest = hashlib.sha256(request.method.encode() + b" " + request.url.path.encode() + b"\n" + canonical)
    return IdempotentRequest(key=key, fingerprint=digest.hexdigest())


IdempotencyDep = Annotated[IdempotentRequest, Depends(idempotent_request)]
