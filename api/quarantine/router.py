"""A pipeline's quarantine: reprocess its records into the table."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse

from api.core.deps import Editor, SessionDep, SettingsDep
from api.core.idempotency import IdempotencyDep
from api.quarantine import service
from api.quarantine.schemas import ReprocessRequest
from api.runs.schemas import RunRead
from api.runs.service import to_read
from api.tenancy.quotas import QuotaLimits

router = APIRouter(tags=["runs"])


@router.post("/pipelines/{pipeline_id}/quarantine/reprocess", operation_id="reprocess_quarantine", status_code=202,
             response_model=RunRead)
def reprocess_quarantine(
    pipeline_id: uuid.UUID, request: ReprocessRequest, response: Response, ctx: Editor, session: SessionDep,
    settings: SettingsDep, idem: IdempotencyDep,
) -> RunRead | JSONResponse:
    """Replay quarantined records (by offset ranges and a Kafka time window) through the pipeline's
    decoding and contract as they are now: those that decode land in the table once and leave the
    quarantine, the others stay. A run of the pipeline (trigger ``reprocess``): 409 while another is
    active, 429 over the runs-per-hour quota; ``dry_run`` counts what would land and writes nothing."""
    return idem.respond(session, f"tenant:{ctx.tenant_id}", lambda: to_read(service.reprocess_quarantine(
        session=session, ctx=ctx, pipeline_id=pipeline_id, request=request, quotas=QuotaLimits.defaults(settings),
    )), response=response, status_code=202)
