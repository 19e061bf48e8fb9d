"""Tenancy routes: the operator's ``/tenants`` and a tenant admin's ``/api-keys``."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Depends, Response
from fastapi.responses import JSONResponse

from api.core.deps import Admin, IfMatch, OperatorDep, SessionDep, Viewer
from api.core.http import resource_response
from api.core.idempotency import IdempotencyDep
from api.core.pagination import Page, PageParams, page_params
from api.tenancy import service
from api.tenancy.models import ApiKey, Tenant
from api.tenancy.schemas import ApiKeyCreate, ApiKeyCreated, ApiKeyRead, CallerRead, TenantCreate, TenantRead

router = APIRouter()

TenantPage = Annotated[PageParams, Depends(page_params(("created_at", "name")))]
KeyPage = Annotated[PageParams, Depends(page_params(("created_at", "name")))]


def _tenant_response(tenant: Tenant, status_code: int = 200) -> JSONResponse:
    location = f"/tenants/{tenant.id}" if status_code == 201 else None
    return resource_response(TenantRead.model_validate(tenant), etag=service.tenant_etag(tenant),
                             status_code=status_code, location=location)


def _key_response(api_key: ApiKey, key: str | None = None) -> JSONResponse:
    read = ApiKeyRead.model_validate(api_key)
    if key is None:
        return resource_response(read, etag=service.key_etag(api_key))
    return resource_response(ApiKeyCreated(**read.model_dump(), key=key), etag=service.key_etag(api_key),
                             status_code=201, location=f"/api-keys/{api_key.id}")


@router.post("/tenants", tags=["tenancy"], operation_id="create_tenant", status_code=201,
             response_model=TenantRead)
def create_tenant(body: TenantCreate, operator: OperatorDep, session: SessionDep, idem: IdempotencyDep) -> JSONResponse:
    """Create a tenant (operator only)."""
    return idem.respond(session, "operator", lambda: _tenant_response(
        service.create_tenant(session=session, operator=operator, name=body.name), status_code=201
    ))


@router.get("/tenants", tags=["tenancy"], operation_id="list_tenants", response_model=Page[TenantRead])
def list_tenants(operator: OperatorDep, session: SessionDep, page: TenantPage) -> Page[TenantRead]:
    """List tenants (operator only)."""
    rows, total = service.list_tenants(session=session, page=page)
    return Page(items=[TenantRead.model_validate(r) for r in rows], total=total, limit=page.limit, offset=page.offset)


@router.get("/tenants/{tenant_id}", tags=["tenancy"], operation_id="get_tenant", response_model=TenantRead)
def get_tenant(tenant_id: uuid.UUID, operator: OperatorDep, session: SessionDep) -> JSONResponse:
    """Read one tenant (operator only)."""
    return _tenant_response(service.get_tenant(session=session, tenant_id=tenant_id))


@router.post("/tenants/{tenant_id}/api-keys", tags=["tenancy"], operation_id="create_tenant_api_key",
             status_code=201, response_model=ApiKeyCreated)
def create_tenant_api_key(
    tenant_id: uuid.UUID, body: ApiKeyCreate, operator: OperatorDep, session: SessionDep, idem: IdempotencyDep
) -> JSONResponse:
    """Issue an API key for a tenant (operator only); the key is shown once."""
    def produce() -> JSONResponse:
        return _key_response(*service.create_key_as_operator(
            session=session, operator=operator, tenant_id=tenant_id, name=body.name, role=body.role
        ))

    return idem.respond(session, f"operator:{tenant_id}", produce, withhold=("key",))


@router.get("/me", tags=["tenancy"], operation_id="get_caller", response_model=CallerRead)
def get_caller(ctx: Viewer) -> CallerRead:
    """Tell which tenant, key and role the presented API key stands for."""
    return CallerRead(tenant_id=ctx.tenant_id, key_id=ctx.key_id, role=ctx.role)


@router.post("/api-keys", tags=["tenancy"], operation_id="create_api_key", status_code=201,
             response_model=ApiKeyCreated)
def create_api_key(body: ApiKeyCreate, ctx: Admin, session: SessionDep, idem: IdempotencyDep) -> JSONResponse:
    """Issue another API key for the caller's tenant (admin role); the key is shown once."""
    def produce() -> JSONResponse:
        return _key_response(*service.create_key(session=session, ctx=ctx, name=body.name, role=body.role))

    return idem.respond(session, f"tenant:{ctx.tenant_id}", produce, withhold=("key",))


@router.get("/api-keys", tags=["tenancy"], operation_id="list_api_keys", response_model=Page[ApiKeyRead])
def list_api_keys(ctx: Admin, session: SessionDep, page: KeyPage) -> Page[ApiKeyRead]:
    """List the tenant's API keys, revoked ones included (admin role)."""
    rows, total = service.list_keys(session=session, ctx=ctx, page=page)
    return Page(items=[ApiKeyRead.model_validate(r) for r in rows], total=total, limit=page.limit, offset=page.offset)


@router.get("/api-keys/{key_id}", tags=["tenancy"], operation_id="get_api_key", response_model=ApiKeyRead)
def get_api_key(key_id: uuid.UUID, ctx: Admin, session: SessionDep) -> JSONResponse:
    """Read one API key's metadata (admin role)."""
    return _key_response(service.get_key(session=session, ctx=ctx, key_id=key_id))


@router.delete("/api-keys/{key_id}", tags=["tenancy"], operation_id="revoke_api_key", status_code=204)
def revoke_api_key(key_id: uuid.UUID, ctx: Admin, session: SessionDep, if_match: IfMatch = None) -> Response:
    """Revoke an API key at once (admin role); revoking twice is harmless."""
    service.revoke_key(session=session, ctx=ctx, key_id=key_id, if_match=if_match)
    return Response(status_code=204)
