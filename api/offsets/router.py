"""``/pipelines/{id}/offsets``: inspect, move (only while stopped), reset, audit and look up offsets."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response

from api.audit.schemas import AuditEventRead
from api.connections.clients import KafkaClientCache
from api.core.deps import Editor, IfMatch, SessionDep, Viewer
from api.core.http import resource_headers
from api.core.pagination import Page, PageParams, page_params
from api.offsets import service
from api.offsets.schemas import (
    OffsetLookup,
    OffsetsChangeResult,
    OffsetsPatch,
    OffsetsRead,
)
from api.pipelines.schemas import TOPIC_PATTERN

router = APIRouter(prefix="/pipelines/{pipeline_id}/offsets", tags=["offsets"])

HistoryPage = Annotated[PageParams, Depends(page_params(("created_at",), default="-created_at"))]


def _kafka(request: Request) -> service.ClientFactory:
    """The API process's warm clients, one per connection and credentials version (``KafkaClientCache``)."""
    clients: KafkaClientCache = request.app.state.kafka_clients
    return clients.client


KafkaDep = Annotated[service.ClientFactory, Depends(_kafka)]

_CHANGE_RESPONSES: dict[int | str, dict[str, str]] = {
    409: {"description": "The pipeline is not paused, or it has a queued or running run (pipeline-not-stopped); or "
                         "the pipeline or its offsets changed while the cluster was asked (offsets-changed-meanwhile)"},
    412: {"description": "If-Match does not match the offsets' current ETag (dry runs too)"},
    422: {"description": "Unknown topic or partition, a target out of range (without clamp), a timestamp the "
                         "cluster cannot resolve, or replace mode on a Kafka target"},
    502: {"description": "The cluster could not be asked for the offsets; nothing was changed"},
    504: {"description": "The cluster did not answer within kafka_timeout_s; nothing was changed"},
}


@router.get("", operation_id="get_offsets", response_model=OffsetsRead)
def get_offsets(
    pipeline_id: uuid.UUID, response: Response, ctx: Viewer, session: SessionDep, kafka: KafkaDep
) -> OffsetsRead:
    """Each partition's committed offset, watermarks and lag; the committed offsets alone if the cluster is down."""
    body, etag = service.read_offsets(session=session, ctx=ctx, pipeline_id=pipeline_id, client_factory=kafka)
    resource_headers(response, etag=etag)
    return body


@router.patch("", operation_id="patch_offsets", response_model=OffsetsChangeResult, responses=_CHANGE_RESPONSES)
def patch_offsets(
    pipeline_id: uuid.UUID, body: OffsetsPatch, response: Response, ctx: Editor,
    session: SessionDep, kafka: KafkaDep, if_match: IfMatch = None,
) -> OffsetsChangeResult:
    """Move offsets of a paused pipeline: explicit offsets, or earliest/latest/to_timestamp/by_duration/shift_by."""
    result = service.change_offsets(session=session, ctx=ctx, pipeline_id=pipeline_id, body=body, if_match=if_match,
                                    client_factory=kafka)
    resource_headers(response, etag=result.etag)
    return result


@router.delete("", operation_id="reset_offsets", response_model=OffsetsChangeResult, responses=_CHANGE_RESPONSES)
def reset_offsets(
    pipeline_id: uuid.UUID, response: Response, ctx: Editor, session: SessionDep, kafka: KafkaDep,
    if_match: IfMatch = None, dry_run: Annotated[bool, Query(description="Show the change; change nothing")] = False,
) -> OffsetsChangeResult:
    """Reset every partition of a paused pipeline to its starting_offsets."""
    result = service.change_offsets(session=session, ctx=ctx, pipeline_id=pipeline_id, body=None, if_match=if_match,
                                    client_factory=kafka, dry_run=dry_run)
    resource_headers(response, etag=result.etag)
    return result


@router.get("/history", operation_id="list_offsets_history", response_model=Page[AuditEventRead])
def list_offsets_history(
    pipeline_id: uuid.UUID, ctx: Viewer, session: SessionDep, page: HistoryPage
) -> Page[AuditEventRead]:
    """The pipeline's offsets changes (audit events), newest first."""
    rows, total = service.history(session=session, ctx=ctx, pipeline_id=pipeline_id, page=page)
    return Page(items=[AuditEventRead.model_validate(r) for r in rows], total=total, limit=page.limit,
                offset=page.offset)


@router.get("/lookup", operation_id="lookup_offset", response_model=OffsetLookup)
def lookup_offset(
    pipeline_id: uuid.UUID, ctx: Viewer, session: SessionDep,
    topic: Annotated[str, Query(pattern=TOPIC_PATTERN)],
    partition: Annotated[int, Query(ge=0, le=1_000_000)],
    offset: Annotated[int, Query(ge=0, le=2**63 - 1)],
) -> OffsetLookup:
    """The succeeded runs that wrote this offset of this partition, newest first."""
    return service.lookup(session=session, ctx=ctx, pipeline_id=pipeline_id, topic=topic, partition=partition,
                          offset=offset)
