"""Usage as the API shows it: one row per pipeline (or tenant) and hour (or day)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field


class RunsByOutcome(BaseModel):
    succeeded: int
    failed: int = Field(description="Runs that ended failed (after their last attempt)")
    retried: int = Field(description="Attempts that failed and were tried again (each counts once)")
    cancelled: int
    skipped: int = Field(description="Runs that found nothing to read")


class UsageFigures(BaseModel):
    records_read: int = Field(description="Kafka records read, by every attempt (a retry or a replay reads again)")
    rows_written: int = Field(description="Rows written to the target (quarantined rows not included; for a keyed "
                                          "table the rows its MERGEs inserted or updated, or the versions they added)")
    rows_quarantined: int = Field(description="Records written to quarantine tables (those that did not decode, and "
                                              "rows an expectation whose action is quarantine set aside)")
    rows_violating: int = Field(description="Rows that violated at least one of the pipeline's expectations, "
                                            "whatever their action (docs/contracts.md)")
    bytes_read: int = Field(description="Bytes of the records' keys and values read")
    bytes_written: int = Field(description="Bytes of the files written to a Delta target (quarantine included); "
                                           "0 for a Kafka target, which does not tell")
    wall_seconds: float = Field(description="From a worker's claim to the attempt's end")
    engine_seconds: float = Field(description="The Spark job's own time, start to result")
    runs: RunsByOutcome


class UsageRow(UsageFigures):
    tenant_id: uuid.UUID
    pipeline_id: uuid.UUID | None = Field(description="Null in the operator's view across tenants")
    pipeline_name: str | None = Field(description="The pipeline's latest name, kept after it is deleted")
    bucket: datetime = Field(description="The hour's (or day's) start, UTC")


class UsageReport(BaseModel):
    start: datetime = Field(serialization_alias="from")
    end: datetime = Field(serialization_alias="to")
    granularity: Literal["hour", "day"]
    pipeline_id: uuid.UUID | None
    items: list[UsageRow] = Field(description="Buckets with any usage, oldest first; a bucket without is left out")
