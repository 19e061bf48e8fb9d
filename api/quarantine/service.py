"""Reprocessing a pipeline's quarantine: a run (trigger ``reprocess``) that replays the chosen
quarantined records through the pipeline's decoding and contract as they are now, into its table,
and takes those that land out of the quarantine (``spark_jobs.targets.reprocess``). It reads no
Kafka and moves no offset; it is one of the pipeline's runs, so it waits for none and none runs
beside it (409 while one is active), and counts toward the tenant's runs_per_hour."""

from __future__ import annotations

import uuid

from sqlmodel import Session

from api.audit.service import record_by
from api.core.enqueue import enqueue_run
from api.core.errors import ValidationFailed
from api.core.security import TenantContext
from api.pipelines.definition import definition_of
from api.pipelines.models import Pipeline
from api.pipelines.service import get_pipeline
from api.quarantine.schemas import ReprocessRequest
from api.runs import lifecycle
from api.runs.models import Run
from api.runs.planning import Plan
from api.runs.quotas import check_run_rate
from api.tenancy.quotas import QuotaLimits

# Value formats whose records may fail to decode: the others never reach a quarantine.
DECODED_FORMATS = ("json", "avro", "protobuf", "json_schema")


def reprocess_quarantine(*, session: Session, ctx: TenantContext, pipeline_id: uuid.UUID, request: ReprocessRequest,
                         quotas: QuotaLimits) -> Run:
    """Queue the reprocess run; 422 for a pipeline that has no quarantine to reprocess."""
    pipeline = get_pipeline(session=session, ctx=ctx, pipeline_id=pipeline_id, lock=True)
    check_reprocessable(pipeline)
    check_run_rate(session, ctx.tenant_id, quotas=quotas)
    run = lifecycle.create_run(session, pipeline, trigger="reprocess", plan=Plan(partitions=[]))
    run.reprocess = request.order()
    session.add(run)
    session.flush()
    record_by(session, ctx, resource_type="run", resource_id=run.id, action="reprocess_quarantine",
              after={"pipeline_id": str(pipeline.id), "seq": run.seq, **request.order()})
    enqueue_run(session, run.id)
    return run


def reprocessable(pipeline: Pipeline) -> bool:
    """Whether the pipeline has a quarantine a reprocess replays (``check_reprocessable``)."""
    try:
        check_reprocessable(pipeline)
    except ValidationFailed:
        return False
    return True


def check_reprocessable(pipeline: Pipeline) -> None:
    """A quarantine exists for a Delta append table of records that decode (json, a registry format)."""
    definition = definition_of(pipeline)
    if definition.target.type != "delta":
        raise ValidationFailed.field("target", f"pipeline {pipeline.id} writes to a Kafka topic: it has no quarantine")
    if definition.source.value_format not in DECODED_FORMATS:
        raise ValidationFailed.field("source.value_format", f"{definition.source.value_format} records are written as "
                                                            "they are: the pipeline has no quarantine")
    if definition.target.mode != "append":
        raise ValidationFailed.field("target.mode", "reprocessing the quarantine of a keyed (upsert) table is not "
                                                    "supported: replay the records' offsets instead")
