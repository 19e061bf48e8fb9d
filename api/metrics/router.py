"""``/metrics`` in Prometheus' text format (operator token: it spans every tenant)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import CollectorRegistry

from api.core.deps import OperatorDep
from api.metrics.service import InletCollector

router = APIRouter(tags=["metrics"])


@router.get("/metrics", operation_id="get_metrics", response_class=Response,
            responses={200: {"content": {CONTENT_TYPE_LATEST: {}}}})
def metrics(request: Request, operator: OperatorDep) -> Response:
    """Usage per tenant, attempt durations, active runs, lag per pipeline, webhook deliveries (operator only)."""
    registry = CollectorRegistry()
    registry.register(InletCollector(request.app.state.engine,
                                    pipeline_labels=request.app.state.settings.metrics_pipeline_labels))
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
