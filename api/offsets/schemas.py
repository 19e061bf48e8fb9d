"""Offsets as the API shows and takes them: the per-partition table, and the one body of a change
(explicit offsets, Kafka Connect's sink offsets, or a reset mode over a scope)."""

from __future__ import annotations

import re
import uuid
from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    field_validator,
    model_validator,
)

from api.core.errors import field_error
from api.pipelines.schemas import DeltaTarget, Target, TopicName

ReplayMode = Literal["append", "replace"]
OffsetsMode = Literal["offsets", "earliest", "latest", "to_timestamp", "by_duration", "shift_by", "starting_offsets"]
MODE_FIELDS = ("offsets", "reset", "to_timestamp", "by_duration", "shift_by")

# ISO 8601 durations as kafka-consumer-groups' --by-duration takes them (PnDTnHnMnS, plus weeks).
_DURATION = re.compile(r"^P(?!\Z)(\d+W)?(\d+D)?(T(?=\d)(\d+H)?(\d+M)?(\d+(\.\d+)?S)?)?\Z")
_TIMEDELTA = TypeAdapter(timedelta)
MAX_OFFSET = 2**63 - 1


class ClusterStatus(BaseModel):
    status: Literal["ok", "unreachable", "error"]
    kind: str | None = Field(default=None, description="How the lookup failed: refused, dns, tls, timeout, auth, not_found…")
    detail: str | None = None


class PartitionOffsetRead(BaseModel):
    topic: str
    partition: int
    committed: int | None = Field(description="The next offset the pipeline reads; null if never read")
    earliest: int | None = Field(description="The partition's log start offset; null if the cluster was not reached")
    latest: int | None = Field(description="The partition's last stable offset; null if the cluster was not reached")
    lag: int | None = Field(description="Records between where the pipeline stands (its starting position if never "
                                        "read) and latest")
    replay: list[int] | None = Field(default=None, description="A pending replace-mode replay window [start, end)")
    last_run_id: uuid.UUID | None
    updated_at: datetime | None
    newest_record_at: datetime | None = Field(default=None, description="The Kafka timestamp of the newest record "
                                                                        "committed here (the partition's freshness: "
                                                                        "now minus this); null until a run read one")


class OffsetsRead(BaseModel):
    pipeline_id: uuid.UUID
    partitions: list[PartitionOffsetRead]
    total_lag: int | None = Field(description="Sum of the partitions' lag; null if the cluster was not reached")
    cluster: ClusterStatus
    observed_at: datetime


class OffsetEntry(BaseModel):
    """One partition's new offset. Kafka Connect's sink shape
    ``{"partition": {"kafka_topic", "kafka_partition"}, "offset": {"kafka_offset"}}`` is accepted too."""

    model_config = ConfigDict(extra="forbid")

    topic: TopicName
    partition: int = Field(ge=0, le=1_000_000)
    offset: int | None = Field(ge=0, le=MAX_OFFSET,
                               description="The next offset to read; null: the pipeline's starting_offsets")

    @model_validator(mode="before")
    @classmethod
    def _kafka_connect(cls, value: Any) -> Any:
        if isinstance(value, dict) and isinstance(value.get("partition"), dict):
            where = value["partition"]
            offset = value.get("offset")
            if set(where) - {"kafka_topic", "kafka_partition"}:
                raise field_error("partition", "partition takes kafka_topic and kafka_partition")
            if offset is not None and (not isinstance(offset, dict) or set(offset) - {"kafka_offset"}):
                raise field_error("offset", "offset takes kafka_offset (or null)")
            return {"topic": where.get("kafka_topic"), "partition": where.get("kafka_partition"),
                    "offset": None if offset is None else offset.get("kafka_offset")}
        return value


class OffsetsPatch(BaseModel):
    """Exactly one of ``offsets``, ``reset``, ``to_timestamp``, ``by_duration``, ``shift_by``."""

    model_config = ConfigDict(extra="forbid")

    offsets: list[OffsetEntry] | None = Field(default=None, min_length=1, max_length=10_000)
    reset: Literal["earliest", "latest"] | None = None
    to_timestamp: AwareDatetime | None = Field(default=None, description="First offset at or after this time")
    by_duration: str | None = Field(default=None, max_length=64, examples=["PT1H"],
                                    description="ISO 8601 duration back from now, resolved like to_timestamp")
    shift_by: int | None = Field(default=None, ge=-MAX_OFFSET, le=MAX_OFFSET,
                                 description="Move each partition's position by this many offsets")
    topics: list[TopicName] | None = Field(default=None, min_length=1, max_length=100,
                                           description="Scope of a mode (default: every topic of the pipeline)")
    partitions: list[int] | None = Field(default=None, min_length=1, max_length=10_000,
                                         description="Partition numbers within the scope's topics")
    dry_run: bool = Field(default=False, description="Resolve and show the change; change nothing")
    clamp: bool = Field(default=False, description="Clamp out-of-range targets to [earliest, latest] instead of a 422")
    replay_mode: ReplayMode = Field(
        default="append",
        description="append: the next runs write replayed records again; replace: they replace the rows "
                    "already written for the replayed offsets (Delta targets only)",
    )

    @field_validator("by_duration")
    @classmethod
    def _duration(cls, value: str | None) -> str | None:
        if value is not None and (not _DURATION.match(value) or _TIMEDELTA.validate_python(value) <= timedelta(0)):
            raise ValueError("not a positive ISO 8601 duration such as PT1H, P1D or P1DT12H30M")
        return value

    @field_validator("partitions")
    @classmethod
    def _partitions(cls, value: list[int] | None) -> list[int] | None:
        if value is not None:
            if any(p < 0 for p in value):
                raise ValueError("partition numbers are >= 0")
            if len(set(value)) != len(value):
                raise ValueError("partitions must not repeat")
        return value

    @model_validator(mode="after")
    def _one_mode(self) -> OffsetsPatch:
        given = [name for name in MODE_FIELDS if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of {', '.join(MODE_FIELDS)} (got {', '.join(given) or 'none'})")
        if self.offsets is not None:
            if self.topics is not None or self.partitions is not None:
                raise field_error("topics" if self.topics is not None else "partitions",
                                  "topics/partitions scope a mode; explicit offsets name their partitions")
            seen = [(e.topic, e.partition) for e in self.offsets]
            if len(set(seen)) != len(seen):
                raise field_error("offsets", "offsets names a partition more than once")
        return self

    @property
    def duration(self) -> timedelta | None:
        return None if self.by_duration is None else _TIMEDELTA.validate_python(self.by_duration)

    @property
    def mode(self) -> str:
        if self.reset is not None:
            return self.reset
        return next(name for name in MODE_FIELDS if getattr(self, name) is not None)


class OffsetChange(BaseModel):
    topic: str
    partition: int
    before: int | None = Field(description="The committed offset before; null if never read")
    after: int = Field(description="The committed offset after")
    clamped: bool = Field(description="The target was outside [earliest, latest] and was clamped")
    earliest: int
    latest: int


class KeyedReplay(BaseModel):
    """What the next runs do with the replayed ranges of a keyed table (a Delta target in mode upsert):
    they re-apply the changes by sequence (docs/keyed-tables.md)."""

    key: list[str] = Field(description="The value fields that identify a row")
    sequence_by: str | None = Field(description="What orders a key's changes: a value field; null: the Kafka offset")
    applied_as: Literal["append"] = Field(
        default="append", description="A replace replay re-applies its ranges as an append replay does: a keyed "
                                      "table holds a row per key, not rows of offsets to take out")
    detail: str

    @classmethod
    def of(cls, target: Target, replay_mode: ReplayMode) -> KeyedReplay | None:
        """The note for ``target``'s replays; None unless it is a keyed table."""
        if not isinstance(target, DeltaTarget) or target.mode != "upsert":
            return None
        order = f"by {target.sequence_by}" if target.sequence_by else "by Kafka offset"
        replace = (" replay_mode replace behaves as append for a keyed table: nothing is taken out first."
                   if replay_mode == "replace" else "")
        if target.scd_type == 2:
            return cls(key=list(target.key or []), sequence_by=target.sequence_by, detail=(
                f"The replayed changes are added to each key's history, ordered {order}: a change whose sequence is "
                "already in the key's history adds nothing and closed versions stay closed; a change the history "
                f"lacks becomes a version between its neighbours by sequence.{replace}"))
        return cls(key=list(target.key or []), sequence_by=target.sequence_by, detail=(
            f"The replayed changes are re-applied per key, ordered {order}: a change sets a row only if it is newer "
            "than the one the row holds, so rows only move forward and replayed older changes are no-ops; a deleted "
            f"key stays deleted unless a replayed change is newer than its delete.{replace}"))


class OffsetsChangeResult(BaseModel):
    dry_run: bool
    mode: OffsetsMode
    replay_mode: ReplayMode
    rows: list[OffsetChange]
    keyed_table: KeyedReplay | None = Field(
        default=None, description="A keyed table (target mode upsert): how the next runs re-apply the replayed "
                                  "changes; null for other targets")
    etag: str = Field(description="The offsets' ETag after the change (unchanged for a dry run)")


class RunRangeRead(BaseModel):
    run_id: uuid.UUID
    seq: int
    start: int
    end: int
    finished_at: datetime | None


class OffsetLookup(BaseModel):
    topic: str
    partition: int
    offset: int
    runs: list[RunRangeRead] = Field(description="Succeeded runs whose committed range holds the offset, newest first")
