"""Tenancy routes: the operator's ``/tenants`` and a tenant admin's ``/api-keys``."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Depends, Response
from fastapi.responses import JSONResponse

from api.core.deps import Admin, IfMatch, OperatorDep, SessionDep, SettingsDep, Viewer
from api.core.http import resource_headers
from api.core.idempotency import IdempotencyDep
from api.core.pagination import Page, PageParams, page_params
from api.tenancy import service
from api.tenancy.models import ApiKey, Tenant
from api.tenancy.quotas import QuotaLimits
from api.tenancy.schemas import ApiKeyCreate, ApiKeyCreated, ApiKeyRead, CallerRead, TenantCreate, TenantRead

router = APIRouter()

TenantPage = Annotated[PageParams, Depends(page_params(("created_at", "name")))]
KeyPage = Annotated[PageParams, Depends(page_params(("created_at", "name")))]


def _tenant_read(tenant: Tenant, response: Response, *, created: bool = False) -> TenantRead:
    resource_headers(response, etag=service.tenant_etag(tenant), location=f"/tenants/{tenant.id}" if created else None)
    return TenantRead.model_validate(tenant)


def _key_read(api_key: ApiKey, response: Response) -> ApiKeyRead:
    resource_headers(response, etag=service.key_etag(api_key))
    return ApiKeyRead.model_validate(api_key)


def _key_created(created: tuple[ApiKey, str], response: Response) -> ApiKeyCreated:
    api_key, key = created
    resource_headers(response, etag=service.key_etag(api_key), location=f"/api-keys/{api_key.id}")
    return ApiKeyCreated(**ApiKeyRead.model_validate(api_key).model_dump(), key=key)


@router.post("/tenants", tags=["tenancy"], operation_id="create_tenant", status_code=201,
             response_model=TenantRead)
def create_tenant(
    body: TenantCreate, response: Response, operator: OperatorDep, session: SessionDep, idem: IdempotencyDep
) -> TenantRead | JSONResponse:
    """Create a tenant (operator only)."""
    return idem.respond(session, "operator", lambda: _tenant_read(
        service.create_tenant(session=session, operator=operator, name=body.name), response, created=True
    ), response=response, status_code=201)


@router.get("/tenants", tags=["tenancy"], operation_id="list_tenants", response_model=Page[TenantRead])
def list_tenants(operator: OperatorDep, session: SessionDep, page: TenantPage) -> Page[TenantRead]:
    """List tenants (operator only)."""
    rows, total = service.list_tenants(session=session, page=page)
    return Page(items=[TenantRead.model_validate(r) for r in rows], total=total, limit=page.limit, offset=page.offset)


@router.get("/tenants/{tenant_id}", tags=["tenancy"], operation_id="get_tenant", response_model=TenantRead)
def get_tenant(tenant_id: uuid.UUID, response: Response, operator: OperatorDep, session: SessionDep) -> TenantRead:
    """Read one tenant (operator only)."""
    return _tenant_read(service.get_tenant(session=session, tenant_id=tenant_id), response)


@router.post("/tenants/{tenant_id}/api-keys", tags=["tenancy"], operation_id="create_tenant_api_key",
             status_code=201, response_model=ApiKeyCreated)
def create_tenant_api_key(
    tenant_id: uuid.UUID, body: ApiKeyCreate, response: Response, operator: OperatorDep, session: SessionDep,
    settings: SettingsDep, idem: IdempotencyDep,
) -> ApiKeyCreated | JSONResponse:
    """Issue an API key for a tenant (operator only); the key is shown once."""
    return idem.respond(session, f"operator:{tenant_id}", lambda: _key_created(service.create_key_as_operator(
        session=session, operator=operator, tenant_id=tenant_id, name=body.name, role=body.role,
        quotas=QuotaLimits.defaults(settings),
    ), response), response=response, status_code=201, withhold=("key",))


@router.get("/me", tags=["tenancy"], operation_id="get_caller", response_model=CallerRead)
def get_caller(ctx: Viewer) -> CallerRead:
    """Tell which tenant, key and role the presented API key stands for."""
    return CallerRead(tenant_id=ctx.tenant_id, key_id=ctx.key_id, role=ctx.role)


@router.post("/api-keys", tags=["tenancy"], operation_id="create_api_key", status_code=201,
             response_model=ApiKeyCreated)
def create_api_key(
    body: ApiKeyCreate, response: Response, ctx: Admin, session: SessionDep, settings: SettingsDep,
    idem: IdempotencyDep,
) -> ApiKeyCreated | JSONResponse:
    """Issue another API key for the caller's tenant (admin role); the key is shown once."""
    return idem.respond(session, f"tenant:{ctx.tenant_id}", lambda: _key_created(service.create_key(
        session=session, ctx=ctx, name=body.name, role=body.role, quotas=QuotaLimits.defaults(settings)
    ), response), response=response, status_code=201, withhold=("key",))


@router.get("/api-keys", tags=["tenancy"], operation_id="list_api_keys", response_model=Page[ApiKeyRead])
def list_api_keys(ctx: Admin, session: SessionDep, page: KeyPage) -> Page[ApiKeyRead]:
    """List the tenant's API keys, revoked ones included (admin role)."""
    rows, total = service.list_keys(session=session, ctx=ctx, page=page)
    return Page(items=[ApiKeyRead.model_validate(r) for r in rows], total=total, limit=page.limit, offset=page.offset)


@router.get("/api-keys/{key_id}", tags=["tenancy"], operation_id="get_api_key", response_model=ApiKeyRead)
def get_api_key(key_id: uuid.UUID, response: Response, ctx: Admin, session: SessionDep) -> ApiKeyRead:
    """Read one API key's metadata (admin role)."""
    return _key_read(service.get_key(session=session, ctx=ctx, key_id=key_id), response)


@router.delete("/api-keys/{key_id}", tags=["tenancy"], operation_id="revoke_api_key", status_code=204)
def revoke_api_key(key_id: uuid.UUID, ctx: Admin, session: SessionDep, if_match: IfMatch = None) -> Response:
    """Revoke an API key at once (admin role); revoking twice is harmless."""
    service.revoke_key(session=session, ctx=ctx, key_id=key_id, if_match=if_match)
    return Response(status_code=204)
