"""Domain errors and their one rendering: RFC 9457 ``application/problem+json``.

Services raise these classes; they never import FastAPI. ``install_error_handlers`` renders
them, request validation errors, unknown routes and unexpected failures alike, and documents every
error response of the OpenAPI document as that same shape. No body ever carries a stack trace, SQL,
or a submitted value.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from pydantic_core import InitErrorDetails
from sqlalchemy import exc as sqlalchemy_exc
from starlette.exceptions import HTTPException as StarletteHTTPException

log = logging.getLogger(__name__)

PROBLEM_JSON = "application/problem+json"
PROBLEM_BASE = "https://inlet.dev/problems/"


class DomainError(Exception):
    status: int = 400
    code: str = "bad-request"
    title: str = "Bad request"

    def __init__(
        self,
        detail: str,
        *,
        errors: list[dict[str, Any]] | None = None,
        headers: dict[str, str] | None = None,
        **extra: Any,
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        self.errors = errors
        self.headers = headers or {}
        self.extra = extra


class Unauthorized(DomainError):
    status, code, title = 401, "unauthorized", "Authentication required"

    def __init__(self, detail: str) -> None:
        super().__init__(detail, headers={"WWW-Authenticate": 'Bearer realm="inlet"'})


class Forbidden(DomainError):
    status, code, title = 403, "forbidden", "Not allowed"


class NotFound(DomainError):
    status, code, title = 404, "not-found", "Not found"

    def __init__(self, resource: str, ident: object) -> None:
        super().__init__(f"{resource} {ident} does not exist")


class Conflict(DomainError):
    status, code, title = 409, "conflict", "Conflict"


class InvalidTransition(Conflict):
    code, title = "invalid-transition", "State transition refused"


class PreconditionFailed(DomainError):
    status, code, title = 412, "precondition-failed", "Precondition failed"


class PayloadTooLarge(DomainError):
    """A body over ``INLET_MAX_BODY_BYTES``: refused before any route reads it (``api.core.middleware``)."""

    status, code, title = 413, "payload-too-large", "Payload too large"


class UnsupportedMediaType(DomainError):
    """A body that is neither JSON nor (on the portal's forms) urlencoded: refused before any route."""

    status, code, title = 415, "unsupported-media-type", "Unsupported media type"


class ValidationFailed(DomainError):
    """A 422 whose ``errors`` name each field refused (``loc``: dotted as the body names it,
    ``source.topics[0]``), so that a client (the portal too) places every message by its field."""

    status, code, title = 422, "validation-failed", "Invalid request"

    @classmethod
    def field(cls, loc: str, message: str, *, type_: str = "value_error") -> ValidationFailed:
        return cls(message, errors=[{"field": loc, "message": message, "type": type_}])

    @classmethod
    def of(cls, exc: ValidationError, detail: str) -> ValidationFailed:
        """A pydantic validation failure, each field's error named (submitted values left out)."""
        return cls(detail, errors=validation_errors(exc.errors()))


class ServiceUnavailable(DomainError):
    status, code, title = 503, "dependency-unavailable", "A dependency is unavailable"


def problem(
    request: Request,
    *,
    status: int,
    code: str,
    title: str,
    detail: str,
    errors: list[dict[str, Any]] | None = None,
    headers: dict[str, str] | None = None,
    extra: dict[str, Any] | None = None,
) -> JSONResponse:
    body: dict[str, Any] = {
        "type": PROBLEM_BASE + code,
        "title": title,
        "status": status,
        "detail": detail,
        "instance": request.url.path,
    }
    if errors is not None:
        body["errors"] = errors
    if extra:
        body.update(extra)
    return JSONResponse(body, status_code=status, headers=headers, media_type=PROBLEM_JSON)


def field_error(loc: str, message: str) -> ValidationError:
    """For a pydantic validator of a whole model to raise: the error of the field at ``loc`` (dotted,
    relative to the model; a number is a list's index), read as pydantic's own ``value_error`` of that
    field, so that the problem names the field a rule concerns rather than the model that checks it
    (Polar's explicit ``loc``)."""
    path = tuple(int(part) if part.isdigit() else part for part in loc.split("."))
    return ValidationError.from_exception_data("field", [InitErrorDetails(
        type="value_error", loc=path, input=None, ctx={"error": ValueError(message)})])


def _loc(parts: tuple[Any, ...]) -> str:
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def validation_errors(raw: Sequence[Mapping[str, Any]], *, strip_body: bool = False) -> list[dict[str, Any]]:
    """Pydantic errors without the submitted values (they may be secrets).

    ``strip_body``: name body fields as the body does (``source.topics``, not ``body.source.topics``), the
    way services name them, so a field's errors read the same from POST, PUT and PATCH."""
    out = []
    for err in raw:
        loc = tuple(err.get("loc", ()))
        if strip_body and len(loc) > 1 and loc[0] == "body":
            loc = loc[1:]
        out.append({"field": _loc(loc), "message": err.get("msg", "invalid"), "type": err.get("type", "")})
    return out


PROBLEM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "title": "Problem",
    "description": "An RFC 9457 problem: every error response of this API.",
    "required": ["type", "title", "status", "detail"],
    "properties": {
        "type": {"type": "string", "title": "Type"},
        "title": {"type": "string", "title": "Title"},
        "status": {"type": "integer", "title": "Status"},
        "detail": {"type": "string", "title": "Detail"},
        "instance": {"type": "string", "title": "Instance"},
        "errors": {"type": "array", "title": "Errors", "items": {"$ref": "#/components/schemas/ProblemFieldError"}},
    },
    "additionalProperties": True,
}
PROBLEM_FIELD_ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "title": "ProblemFieldError",
    "required": ["field", "message", "type"],
    "properties": {"field": {"type": "string", "title": "Field"}, "message": {"type": "string", "title": "Message"},
                   "type": {"type": "string", "title": "Type"}},
}


def _document_problems(app: FastAPI) -> None:
    """FastAPI documents 422 as its own ``HTTPValidationError`` JSON; this API answers every error,
    422 included, as ``application/problem+json``: say so in the document clients generate code from."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        schema = generate()
        for path_item in schema.get("paths", {}).values():
            for operation in path_item.values():
                for status, response in operation.get("responses", {}).items():
                    if status[:1] in ("4", "5"):
                        response["content"] = {PROBLEM_JSON: {"schema": {"$ref": "#/components/schemas/Problem"}}}
        components = schema.setdefault("components", {})
        schemas = {k: v for k, v in components.get("schemas", {}).items()
                   if k not in ("HTTPValidationError", "ValidationError")}
        schemas.update(Problem=PROBLEM_SCHEMA, ProblemFieldError=PROBLEM_FIELD_ERROR_SCHEMA)
        components["schemas"] = dict(sorted(schemas.items()))
        return schema

    app.openapi = openapi  # type: ignore[method-assign]  # FastAPI's documented way to customise the schema


def install_error_handlers(app: FastAPI) -> None:
    _document_problems(app)

    @app.exception_handler(DomainError)
    async def _domain(request: Request, exc: DomainError) -> JSONResponse:
        return problem(
            request, status=exc.status, code=exc.code, title=exc.title, detail=exc.detail,
            errors=exc.errors, headers=exc.headers, extra=exc.extra,
        )

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = validation_errors(list(exc.errors()), strip_body=True)
        fields = ", ".join(e["field"] for e in errors[:5])
        return problem(
            request, status=422, code=ValidationFailed.code, title=ValidationFailed.title,
            detail=f"The request is not valid: {fields}", errors=errors,
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        phrase = HTTPStatus(exc.status_code).phrase
        detail = exc.detail if isinstance(exc.detail, str) and exc.detail != phrase else {
            404: f"No route matches {request.url.path}",
            405: f"{request.method} is not allowed on {request.url.path}",
        }.get(exc.status_code, phrase)
        return problem(
            request, status=exc.status_code, code=phrase.lower().replace(" ", "-"), title=phrase,
            detail=detail, headers=getattr(exc, "headers", None),
        )

    @app.exception_handler(sqlalchemy_exc.OperationalError)
    @app.exception_handler(sqlalchemy_exc.TimeoutError)
    async def _database(request: Request, exc: Exception) -> JSONResponse:
        # Unreachable, restarting, out of connections, or (SQLite) locked past the busy timeout.
        cause = getattr(exc, "orig", None) or exc
        log.warning("database unavailable on %s %s: %s", request.method, request.url.path, type(cause).__name__)
        return problem(
            request, status=503, code="database-unavailable", title="The database is unavailable",
            detail="The database could not be reached or stayed busy; try again shortly "
                   "(with the same Idempotency-Key, a repeated create is safe).",
            headers={"Retry-After": "1"},
        )

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return problem(
            request, status=500, code="internal-error", title="Internal server error",
            detail="The server failed to handle this request; it has been logged.",
        )
