"""Planning a run: exact per-partition offset ranges ``[start, end)`` from committed offsets and the
broker's watermarks, capped like Spark's ``maxOffsetsPerTrigger``.

``compute_plan`` is pure (all inputs given) so that its rules are tested without a broker;
``plan_next_run`` gathers the inputs from Kafka and the database. A partition never read before
starts where the source says (``api.ledger.positions``), and the position found on its first plan is
kept (``api.ledger.service.record_starts``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from sqlmodel import Session

from api.kafka.client import KafkaClient, Partition
from api.ledger import service as ledger
from api.ledger.positions import partitions_to_read, starting_offset, starting_positions
from api.ledger.service import RangesByTopic
from api.pipelines.definition import definition_of
from api.pipelines.models import Pipeline
from api.pipelines.schedules import ContinuousSchedule, Schedule
from api.pipelines.schemas import KafkaSource


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

    def ranges(self) -> RangesByTopic:
        """The non-empty ranges as the Spark job takes them: ``{topic: {"partition": [start, end]}}``."""
        out: RangesByTopic = {}
        for p in self.partitions:
            if p.size > 0:
                out.setdefault(p.topic, {})[str(p.partition)] = [p.start, p.end]
        return out

    def to_json(self) -> dict[str, Any]:
        return {"partitions": [asdict(p) for p in self.partitions], "total": self.total}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Plan:
        return cls(partitions=[PartitionPlan(**p) for p in doc["partitions"]])


def compute_plan(
    *,
    source: KafkaSource,
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
            starts[tp] = starting_offset(source.starting_offsets, tp, earliest, latest)
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


def plan_next_run(session: Session, pipeline: Pipeline, client: KafkaClient) -> Plan:
    """The next run's ranges: from the ledger's committed offsets to the cluster's watermarks now."""
    definition = definition_of(pipeline)
    source = definition.source
    partitions = partitions_to_read(client.list_topics(), source)
    committed = ledger.committed(session, pipeline.id)
    watermarks = client.watermarks(partitions)
    never_read = [tp for tp in partitions if tp not in committed]
    return compute_plan(
        source=source,
        committed=committed,
        watermarks=watermarks,
        max_offsets=_max_offsets(source.max_offsets_per_run, definition.schedule),
        positions=starting_positions(client, source, never_read, watermarks),
    )


def _max_offsets(source_cap: int | None, schedule: Schedule | None) -> int | None:
    """A run's cap: the source's ``max_offsets_per_run``, and a continuous schedule's (the smaller)."""
    if not isinstance(schedule, ContinuousSchedule):
        return source_cap
    return min(schedule.max_offsets_per_run, source_cap or schedule.max_offsets_per_run)
