"""Request dependencies shared by every router: the unit of work, settings, If-Match, the caller.

A tenant's API key is checked by the app's ``authenticate_tenant`` (``api.tenancy.auth``, wired in
``api.main``): API keys are tenancy's table, and core knows no domain."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Annotated, Protocol, TypeVar

from fastapi import Depends, Header, Request
from sqlmodel import Session

from api.core.auth_throttle import AuthThrottle
from api.core.config import Settings
from api.core.db import unit_of_work
from api.core.security import (
    Operator,
    Role,
    TenantContext,
    authenticate_operator,
    bearer_token,
)

T = TypeVar("T")


def _session(request: Request) -> Iterator[Session]:
    with unit_of_work(request.app.state.engine) as session:
        yield session


def _settings(request: Request) -> Settings:
    return request.app.state.settings


# scope="function": the commit happens before the response is sent, so a failed commit is an error
# response, never a success the database did not keep.
SessionDep = Annotated[Session, Depends(_session, scope="function")]
SettingsDep = Annotated[Settings, Depends(_settings)]
IfMatch = Annotated[str | None, Header(alias="If-Match", description="ETag from a previous read")]


def operator_token(settings: Settings) -> str | None:
    return settings.admin_token.get_secret_value() if settings.admin_token else None


class TenantAuthenticator(Protocol):
    def __call__(self, session: Session, token: str, operator_token: str | None) -> TenantContext: ...


def tenant_caller(role: Role) -> Callable[..., TenantContext]:
    def dependency(
        request: Request,
        session: SessionDep,
        settings: SettingsDep,
        authorization: Annotated[str | None, Header(include_in_schema=False)] = None,
    ) -> TenantContext:
        authenticate: TenantAuthenticator = request.app.state.authenticate_tenant
        token = bearer_token(authorization)
        ctx = throttled(request, token, lambda: authenticate(session, token, operator_token(settings)))
        ctx.require(role)
        return ctx

    return dependency


def _operator(
    request: Request,
    settings: SettingsDep,
    authorization: Annotated[str | None, Header(include_in_schema=False)] = None,
) -> Operator:
    token = bearer_token(authorization)
    return throttled(request, token, lambda: authenticate_operator(token, operator_token(settings)))


def throttled(request: Request, token: str, authenticate: Callable[[], T]) -> T:
    """``authenticate()`` under the failed-authentication budget of the caller's address
    (``auth_throttle``): a 429 with Retry-After past it."""
    throttle: AuthThrottle = request.app.state.auth_throttle
    return throttle.guard(request.client.host if request.client else None, token, authenticate)


OperatorDep = Annotated[Operator, Depends(_operator)]
Viewer = Annotated[TenantContext, Depends(tenant_caller(Role.viewer))]
Editor = Annotated[TenantContext, Depends(tenant_caller(Role.editor))]
Admin = Annotated[TenantContext, Depends(tenant_caller(Role.admin))]
