"""The FastAPI application: settings, engine and secret store on ``app.state``, every domain's router."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware

from api.audit.router import router as audit_router
from api.connections.clients import KafkaClientCache
from api.connections.router import router as connections_router
from api.core.auth_throttle import AuthThrottle
from api.core.config import Settings, get_settings
from api.core.db import make_engine
from api.core.dispatch import CeleryDispatcher, Dispatcher
from api.core.enqueue import bind
from api.core.errors import install_error_handlers
from api.core.middleware import AccessLog, RequestGuard
from api.health.router import router as health_router
from api.maintenance.router import router as maintenance_router
from api.metrics.router import router as metrics_router
from api.offsets.router import router as offsets_router
from api.pipelines.router import router as pipelines_router
from api.portal.router import router as portal_router
from api.quarantine.router import router as quarantine_router
from api.quotas.router import router as quotas_router
from api.runs.router import router as runs_router
from api.secrets.backends import build_secret_store
from api.tenancy.auth import authenticate_tenant
from api.tenancy.router import router as tenancy_router
from api.usage.router import router as usage_router
from api.webhooks.router import router as webhooks_router

API_VERSION = "0.1.0"

DESCRIPTION = """Inlet: a multi-tenant control plane for Kafka ingestion into Delta tables and Kafka topics.

Every error is an RFC 9457 `application/problem+json` body. Authenticate with
`Authorization: Bearer <api key>` (tenant routes) or the operator token (`/tenants`)."""


def create_app(settings: Settings | None = None, *, dispatcher: Dispatcher | None = None) -> FastAPI:
    settings = settings or get_settings()
    app = FastAPI(title="Inlet", version=API_VERSION, description=DESCRIPTION)
    app.state.settings = settings
    app.state.engine = make_engine(settings.resolved_database_url)
    app.state.secrets = build_secret_store(settings)
    app.state.authenticate_tenant = authenticate_tenant
    app.state.auth_throttle = AuthThrottle(settings.auth_failures_per_minute)
    bind(app.state.engine, dispatcher or CeleryDispatcher(settings.redis_url))  # what its requests enqueue
    app.state.kafka_clients = KafkaClientCache(app.state.secrets, timeout_s=settings.kafka_timeout_s,
                                               client_id="inlet-offsets", egress=settings.egress_policy)

    install_error_handlers(app)
    for router in (health_router, tenancy_router, connections_router, pipelines_router, maintenance_router,
                   runs_router, audit_router, metrics_router, offsets_router, webhooks_router, quotas_router,
                   usage_router, quarantine_router, portal_router):

        app.include_router(router)

    app.add_middleware(RequestGuard, max_body_bytes=settings.max_body_bytes, form_paths=("/portal/",))
    if settings.cors_origins:
        app.add_middleware(CORSMiddleware, allow_origins=settings.cors_origins, allow_credentials=False,
                           allow_methods=["*"], allow_headers=["*"], expose_headers=["ETag", "Location"])
    app.add_middleware(AccessLog)
    return app
