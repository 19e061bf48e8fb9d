"""Request dependencies shared by every router: the unit of work, settings, the caller."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Annotated

from fastapi import Depends, Header, Request
from sqlmodel import Session

from api.core.config import Settings
from api.core.db import unit_of_work
from api.core.security import (
    Operator,
    Role,
    TenantContext,
    authenticate_operator,
    authenticate_tenant,
    bearer_token,
)
from api.secrets.store import SecretStore


def _session(request: Request) -> Iterator[Session]:
    with unit_of_work(request.app.state.engine) as session:
        yield session


def _settings(request: Request) -> Settings:
    return request.app.state.settings


def _secrets(request: Request) -> SecretStore:
    return request.app.state.secrets


# scope="function": the commit happens before the response is sent, so a failed commit is an error
# response, never a success the database did not keep.
SessionDep = Annotated[Session, Depends(_session, scope="function")]
SettingsDep = Annotated[Settings, Depends(_settings)]
SecretsDep = Annotated[SecretStore, Depends(_secrets)]
IfMatch = Annotated[str | None, Header(alias="If-Match", description="ETag from a previous read")]


def _admin_token(settings: Settings) -> str | None:
    return settings.admin_token.get_secret_value() if settings.admin_token else None


def tenant_caller(role: Role) -> Callable[..., TenantContext]:
    def dependency(
        session: SessionDep,
        settings: SettingsDep,
        authorization: Annotated[str | None, Header(include_in_schema=False)] = None,
    ) -> TenantContext:
        ctx = authenticate_tenant(session, bearer_token(authorization), _admin_token(settings))
        ctx.require(role)
        return ctx

    return dependency


def _operator(
    settings: SettingsDep,
    authorization: Annotated[str | None, Header(include_in_schema=False)] = None,
) -> Operator:
    return authenticate_operator(bearer_token(authorization), _admin_token(settings))


Viewer = Annotated[TenantContext, Depends(tenant_caller(Role.viewer))]
Editor = Annotated[TenantContext, Depends(tenant_caller(Role.editor))]
Admin = Annotated[TenantContext, Depends(tenant_caller(Role.admin))]
OperatorDep = Annotated[Operator, Depends(_operator)]
