"""Planning a run: exact per-partition offset ranges ``[start, end)`` from committed offsets and the
broker's watermarks, capped like Spark's ``maxOffsetsPerTrigger``.

``compute_plan`` is pure (all inputs given) so that its rules are tested without a broker;
``plan_pipeline`` gathers the inputs from Kafka and the database. A partition never read before
starts where the source says: ``starting_offsets`` (earliest, latest, or per partition), or
``starting_timestamp``, which only the broker can turn into offsets (``starting_positions``). Either
way the position found on the first plan is kept (``lifecycle.initialize_positions``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any, Protocol

from sqlmodel import Session, select

from api.kafka.client import KafkaClient, Partition
from api.kafka.errors import TimestampNotResolvable
from api.offsets.models import PartitionOffset
from api.pipelines.models import Pipeline

EARLIEST, LATEST = -2, -1


@dataclass(frozen=True)
class PartitionPlan:
    topic: str
    partition: int
    start: int
    end: int
    earliest: int
    latest: int
    committed: int | None  # None: never read, the start came from starting_offsets

    @property
    def size(self) -> int:
        return self.end - self.start


@dataclass(frozen=True)
class Plan:
    partitions: list[PartitionPlan]

    @property
    def total(self) -> int:
        return sum(p.size for p in self.partitions)

    @property
    def lag(self) -> int:
        """Records between where the pipeline stands and the end of each partition."""
        return sum(max(p.latest - (p.committed if p.committed is not None else p.start), 0) for p in self.partitions)

    def ranges(self) -> dict[str, dict[str, list[int]]]:
        """The non-empty ranges as the Spark job takes them: ``{topic: {"partition": [start, end]}}``."""
        out: dict[str, dict[str, list[int]]] = {}
        for p in self.partitions:
            if p.size > 0:
                out.setdefault(p.topic, {})[str(p.partition)] = [p.start, p.end]
        return out

    def to_json(self) -> dict[str, Any]:
        return {"partitions": [asdict(p) for p in self.partitions], "total": self.total}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Plan:
        return cls(partitions=[PartitionPlan(**p) for p in doc["partitions"]])


def starting_offset(starting: Any, tp: Partition, earliest: int, latest: int) -> int:
    """Where a never-read partition starts: Spark's startingOffsets rules (unlisted partitions: earliest)."""
    wanted: int = EARLIEST
    if starting == "latest":
        wanted = LATEST
    elif isinstance(starting, dict):
        wanted = int(starting.get(tp[0], {}).get(str(tp[1]), EARLIEST))
    if wanted == EARLIEST:
        return earliest
    if wanted == LATEST:
        return latest
    return wanted


class TimestampLookup(Protocol):
    def offsets_for_timestamp(self, partitions: list[Partition], timestamp_ms: int) -> dict[Partition, int]: ...


def starting_positions(
    client: TimestampLookup, source: dict[str, Any], partitions: list[Partition],
    watermarks: dict[Partition, tuple[int, int]],
) -> dict[Partition, int]:
    """Where each of ``partitions`` starts if never read. With ``starting_timestamp`` the broker says
    (one lookup); a partition with no record at or after it raises ``TimestampNotResolvable``, or
    with ``starting_timestamp_strategy: latest`` starts at its latest offset."""
    if not source.get("starting_timestamp") or not partitions:
        starting = source.get("starting_offsets", "earliest")
        return {tp: starting_offset(starting, tp, *watermarks[tp]) for tp in partitions}
    timestamp_ms = int(datetime.fromisoformat(source["starting_timestamp"]).timestamp() * 1000)
    try:
        return dict(client.offsets_for_timestamp(partitions, timestamp_ms))
    except TimestampNotResolvable as exc:
        if source.get("starting_timestamp_strategy", "error") != "latest":
            raise
        unresolved = set(exc.partitions)
    resolvable = [tp for tp in partitions if tp not in unresolved]
    found = dict(client.offsets_for_timestamp(resolvable, timestamp_ms)) if resolvable else {}
    return found | {tp: watermarks[tp][1] for tp in unresolved}


def compute_plan(
    *,
    source: dict[str, Any],
    committed: dict[Partition, int],
    watermarks: dict[Partition, tuple[int, int]],
    max_offsets: int | None,
    positions: dict[Partition, int] | None = None,
) -> Plan:
    """``positions``: where never-read partitions start (``starting_positions``); by default the
    source's ``starting_offsets``."""
    starts: dict[Partition, int] = {}
    for tp, (earliest, latest) in watermarks.items():
        if tp in committed:
            starts[tp] = committed[tp]
        elif positions is not None and tp in positions:
            starts[tp] = positions[tp]
        else:
            starts[tp] = starting_offset(source.get("starting_offsets", "earliest"), tp, earliest, latest)
    # A start past the latest offset (a recreated topic) reads nothing rather than guessing.
    ends = {tp: max(starts[tp], latest) for tp, (_, latest) in watermarks.items()}
    backlog = sum(ends[tp] - starts[tp] for tp in watermarks)
    if max_offsets is not None and backlog > max_offsets:
        # Spark's rate limit: each partition gets its share of the cap in proportion to its backlog.
        for tp in watermarks:
            size = ends[tp] - starts[tp]
            share = max_offsets * size / backlog
            step = math.ceil(share) if share < 1 else math.floor(share)
            ends[tp] = min(ends[tp], starts[tp] + step)
    return Plan(partitions=[
        PartitionPlan(topic=tp[0], partition=tp[1], start=starts[tp], end=ends[tp], earliest=earliest,
                      latest=latest, committed=committed.get(tp))
        for tp, (earliest, latest) in sorted(watermarks.items())
    ])


def committed_offsets(session: Session, pipeline_id: Any) -> dict[Partition, int]:
    rows = session.exec(select(PartitionOffset).where(PartitionOffset.pipeline_id == pipeline_id)).all()
    return {(r.topic, r.partition): r.committed for r in rows}


def source_partitions(client: KafkaClient, source: dict[str, Any]) -> list[Partition]:
    if source.get("topic_pattern"):
        return client.partitions_for(pattern=source["topic_pattern"])
    return client.partitions_for(source["topics"])


def plan_pipeline(session: Session, pipeline: Pipeline, client: KafkaClient) -> Plan:
    partitions = source_partitions(client, pipeline.source)
    committed = committed_offsets(session, pipeline.id)
    watermarks = client.watermarks(partitions)
    never_read = [tp for tp in partitions if tp not in committed]
    return compute_plan(
        source=pipeline.source,
        committed=committed,
        watermarks=watermarks,
        max_offsets=pipeline.source.get("max_offsets_per_run"),
        positions=starting_positions(client, pipeline.source, never_read, watermarks),
    )
