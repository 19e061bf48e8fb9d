"""A reprocess of a pipeline's quarantine as the API takes it (a run shows it: ``api.runs.schemas.ReprocessRead``)."""

from __future__ import annotations

from typing import Any

from pydantic import AwareDatetime, BaseModel, Field, model_validator

from api.core.errors import field_error
from api.offsets.schemas import MAX_OFFSET
from api.pipelines.schemas import TopicName


class ReprocessRange(BaseModel):
    """Quarantined records of one partition by their Kafka offsets: [start, end)."""

    topic: TopicName
    partition: int = Field(ge=0, le=1_000_000)
    start: int = Field(ge=0, le=MAX_OFFSET, description="First offset (inclusive)")
    end: int = Field(ge=0, le=MAX_OFFSET, description="End offset (exclusive)")

    @model_validator(mode="after")
    def _ordered(self) -> ReprocessRange:
        if self.end <= self.start:
            raise field_error("end", f"end ({self.end}) must be greater than start ({self.start})")
        return self


class ReprocessRequest(BaseModel):
    """Which quarantined records to replay through the pipeline's decoding and contract as they are
    now: those of ``ranges`` (every partition when omitted) whose Kafka timestamp is in
    [``since``, ``until``) (unbounded where omitted)."""

    model_config = {"extra": "forbid"}

    ranges: list[ReprocessRange] | None = Field(default=None, min_length=1, max_length=10_000)
    since: AwareDatetime | None = Field(default=None, description="Records with a Kafka timestamp at or after this")
    until: AwareDatetime | None = Field(default=None, description="Records with a Kafka timestamp before this")
    dry_run: bool = Field(default=False, description="Decode and count what would land; write nothing")

    @model_validator(mode="after")
    def _window(self) -> ReprocessRequest:
        if self.since is not None and self.until is not None and self.until <= self.since:
            raise field_error("until", "until must be after since")
        seen: set[tuple[str, int]] = set()
        for i, r in enumerate(self.ranges or []):
            if (r.topic, r.partition) in seen:
                raise field_error(f"ranges.{i}", f"{r.topic}[{r.partition}] is given twice")
            seen.add((r.topic, r.partition))
        return self

    def job_ranges(self) -> dict[str, dict[str, list[int]]] | None:
        """``ranges`` as the job takes them: ``{topic: {"partition": [start, end]}}``."""
        if self.ranges is None:
            return None
        out: dict[str, dict[str, list[int]]] = {}
        for r in self.ranges:
            out.setdefault(r.topic, {})[str(r.partition)] = [r.start, r.end]
        return out

    def order(self) -> dict[str, Any]:
        """What the run keeps of the request (``runs.reprocess``), and its job's spec reads."""
        return {"ranges": self.job_ranges(), "since": self.since.isoformat() if self.since else None,
                "until": self.until.isoformat() if self.until else None, "dry_run": self.dry_run}

