"""``/healthz`` (the process is alive) and ``/readyz`` (its dependencies answer)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from api.health.service import readiness

router = APIRouter(tags=["health"])


@router.get("/healthz", operation_id="get_liveness")
def healthz() -> dict[str, str]:
    """Liveness: the API process answers."""
    return {"status": "ok"}


@router.get("/readyz", operation_id="get_readiness")
def readyz(request: Request, response: Response) -> dict[str, Any]:
    """Readiness: the database, Redis and the secret backend, each reported; 503 if one is down."""
    report = readiness(request.app.state.engine, request.app.state.secrets, request.app.state.settings)
    response.status_code = 200 if report["status"] == "ok" else 503
    return report
