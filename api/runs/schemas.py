"""Runs as the API shows them."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, Field

from api.runs.states import RunState, RunTrigger


class RunPartition(BaseModel):
    topic: str
    partition: int
    start: int = Field(description="First offset of the range (inclusive)")
    end: int = Field(description="End of the range (exclusive): the committed offset after success")
    earliest: int | None = None
    latest: int | None = None
    records_read: int | None = None
    first_offset: int | None = None
    last_offset: int | None = None
    gap: list[int] | None = Field(default=None, description="Offsets lost to retention and skipped: [from, to)")


class RunError(BaseModel):
    kind: str
    message: str
    topic: str | None = None
    partition: int | None = None


class ExpectationOutcome(BaseModel):
    name: str
    action: Literal["warn", "quarantine", "fail"]
    rows_violating: int = Field(description="The run's decoded rows that violated the expectation")


class ReprocessRead(BaseModel):
    """A reprocess run's order and, once it ran, what it did."""

    ranges: dict[str, dict[str, list[int]]] | None = Field(description="The partitions' offset ranges chosen; "
                                                                       "null: every partition")
    since: AwareDatetime | None
    until: AwareDatetime | None
    dry_run: bool
    selected: int | None = Field(default=None, description="Quarantined records chosen")
    decoded: int | None = Field(default=None, description="Of those, the ones that decode and pass the expectations "
                                                          "now: they landed in the table and left the quarantine (a "
                                                          "dry run: would land)")
    still_quarantined: int | None = Field(default=None, description="The chosen records that still fail: they stay "
                                                                    "in the quarantine as they were")


class RunRead(BaseModel):
    id: uuid.UUID
    pipeline_id: uuid.UUID
    seq: int = Field(description="The pipeline's run number, also the Delta transaction version")
    state: RunState
    trigger: RunTrigger
    scheduled_for: datetime | None
    attempt: int
    cancel_requested: bool
    partitions: list[RunPartition] | None = Field(description="The plan: exact ranges per partition")
    replace_ranges: dict[str, Any] | None
    records_read: int | None
    rows_written: int | None = Field(description="Rows written to the target, quarantined ones not included; for a "
                                                 "keyed table the rows its MERGE inserted or updated (SCD type 2: the "
                                                 "versions it added): a replay of applied changes writes 0")
    rows_quarantined: int | None = Field(description="Records written to the quarantine table: those that did not "
                                                     "decode, and rows that broke an expectation whose action is "
                                                     "quarantine")
    expectations: list[ExpectationOutcome] | None = Field(
        default=None, description="Per expectation of the pipeline's contract, the rows that violated it (a succeeded "
                                  "run's; a run failed by an expectation names it in error)")
    rows_violating: int | None = Field(default=None, description="Rows that violated at least one expectation")
    reprocess: ReprocessRead | None = Field(default=None, description="A reprocess of the quarantine (trigger "
                                                                      "reprocess): what it chose and what it did")
    bytes_read: int | None
    delta_version: int | None
    already_committed: bool | None
    error: RunError | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    duration_s: float | None
    log_tail: list[str] | None = Field(default=None, description="The last lines of the run's log (single reads)")
