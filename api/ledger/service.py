"""The offsets ledger: the one module that writes ``partition_offsets``, ``offset_replays`` and
``run_ranges``. Runs commit through it and the offsets API moves offsets through it.

- A partition's committed offset is the next offset a run will read. A run moves it only from the
  offset it was planned at (compare-and-set), after its data is durably in the target.
- A never-read partition's start is recorded when it is first planned, so a pipeline starting at
  ``latest`` keeps that position instead of a later ``latest`` (records in between would be lost).
- A ``replace``-mode move backwards leaves a replay window per partition: the runs that read those
  offsets again replace the rows already written instead of appending them. Windows never reach
  below the committed offset; runs consume them as they commit.
- Every committed run's range is indexed, so "which run wrote offset X" is one lookup.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from sqlalchemy import case, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, func, select

from api.core.db import rows_changed, utcnow
from api.core.scoping import scoped_select
from api.kafka.client import Partition
from api.ledger.models import OffsetReplay, PartitionOffset, RunRange
from api.pipelines.models import Pipeline

# ``{topic: {"partition": [start, end]}}``: the shape the Spark job takes ranges in.
RangesByTopic = dict[str, dict[str, list[int]]]


class PlannedRange(Protocol):
    """One partition of a run's plan (``api.runs.planning.PartitionPlan``)."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def start(self) -> int: ...
    @property
    def end(self) -> int: ...
    @property
    def committed(self) -> int | None: ...  # None: never read when planned


@dataclass(frozen=True)
class OffsetMove:
    """One partition's offset moved by the offsets API."""

    topic: str
    partition: int
    before: int | None
    after: int


class OffsetConflict(Exception):
    """A partition's committed offset moved since the run was planned."""

    def __init__(self, topic: str, partition: int, expected: int | None, found: int | None) -> None:
        super().__init__(f"{topic}[{partition}]: planned from {expected}, but the committed offset is now {found}")
        self.topic, self.partition = topic, partition


# Reading.

def committed(session: Session, pipeline_id: uuid.UUID) -> dict[Partition, int]:
    rows = session.exec(select(PartitionOffset).where(PartitionOffset.pipeline_id == pipeline_id)).all()
    return {(r.topic, r.partition): r.committed for r in rows}


def positions(session: Session, pipeline: Pipeline) -> dict[Partition, PartitionOffset]:
    rows = session.exec(scoped_select(PartitionOffset, pipeline.tenant_id)
                        .where(PartitionOffset.pipeline_id == pipeline.id)).all()
    return {(r.topic, r.partition): r for r in rows}


def replay_windows(session: Session, pipeline: Pipeline) -> dict[Partition, OffsetReplay]:
    rows = session.exec(scoped_select(OffsetReplay, pipeline.tenant_id)
                        .where(OffsetReplay.pipeline_id == pipeline.id)).all()
    return {(r.topic, r.partition): r for r in rows}


def ranges_holding(
    session: Session, *, tenant_id: uuid.UUID, pipeline_id: uuid.UUID, topic: str, partition: int, offset: int,
) -> list[RunRange]:
    """The committed run ranges ``[start, end)`` of this partition that hold ``offset``."""
    return list(session.exec(scoped_select(RunRange, tenant_id).where(
        RunRange.pipeline_id == pipeline_id, RunRange.topic == topic, RunRange.partition == partition,
        RunRange.start <= offset, RunRange.end > offset,
    )).all())


def replace_ranges_for(session: Session, pipeline: Pipeline, planned: Iterable[PlannedRange]) -> RangesByTopic | None:
    """Ranges of this plan whose earlier rows a replace-mode replay asked to overwrite: the plan's
    ranges cut to the replay windows; None if none."""
    windows = replay_windows(session, pipeline)
    out: RangesByTopic = {}
    for p in planned:
        window = windows.get((p.topic, p.partition))
        if window is None:
            continue
        start, end = max(p.start, window.start), min(p.end, window.end)
        if start < end:
            out.setdefault(p.topic, {})[str(p.partition)] = [start, end]
    return out or None


# A run's commit.

def record_starts(session: Session, pipeline: Pipeline, planned: Iterable[PlannedRange]) -> None:
    """Record where never-read partitions start (their first plan's start)."""
    now = utcnow()
    for p in planned:
        if p.committed is None:
            session.add(PartitionOffset(pipeline_id=pipeline.id, topic=p.topic, partition=p.partition,
                                        tenant_id=pipeline.tenant_id, committed=p.start, updated_at=now))
    session.flush()


def commit_run(
    session: Session, *, run_id: uuid.UUID, pipeline_id: uuid.UUID, tenant_id: uuid.UUID,
    planned: Sequence[PlannedRange], replaced: RangesByTopic | None,
    newest: Mapping[tuple[str, int], datetime] | None = None,
) -> None:
    """Advance each partition from its planned start to its end (compare-and-set), index the ranges
    written, and consume the replay windows ``replaced`` covered; ``newest``: the Kafka timestamp of
    the newest record the run read per partition (a partition keeps the latest it has seen).
    ``OffsetConflict`` (nothing written) when a partition's offset moved since the plan."""
    try:
        with session.begin_nested():
            _advance(session, run_id, pipeline_id, tenant_id, planned, newest or {})
    except IntegrityError:  # a never-read partition was recorded meanwhile
        raise OffsetConflict("?", -1, None, None) from None
    for p in planned:
        if p.end > p.start:
            session.add(RunRange(run_id=run_id, pipeline_id=pipeline_id, tenant_id=tenant_id,
                                 topic=p.topic, partition=p.partition, start=p.start, end=p.end))
    _consume_replays(session, pipeline_id, replaced or {})
    session.flush()


def newest_committed(session: Session, pipeline_id: uuid.UUID) -> datetime | None:
    """The pipeline's freshness at its worst partition: the oldest of the partitions' newest committed
    records' Kafka timestamps (None until a run read one)."""
    return session.exec(select(func.min(PartitionOffset.newest_record_at))
                        .where(PartitionOffset.pipeline_id == pipeline_id)).one()


def _advance(session: Session, run_id: uuid.UUID, pipeline_id: uuid.UUID, tenant_id: uuid.UUID,
             planned: Sequence[PlannedRange], newest: Mapping[tuple[str, int], datetime]) -> None:
    now = utcnow()
    for p in planned:
        read = newest.get((p.topic, p.partition))
        if p.committed is None:
            exists = session.get(PartitionOffset, (pipeline_id, p.topic, p.partition))
            if exists is not None:
                raise OffsetConflict(p.topic, p.partition, None, exists.committed)
            session.add(PartitionOffset(pipeline_id=pipeline_id, topic=p.topic, partition=p.partition,
                                        tenant_id=tenant_id, committed=p.end, last_run_id=run_id, updated_at=now,
                                        newest_record_at=read))
            continue
        kept = col(PartitionOffset.newest_record_at)
        changed = rows_changed(session, update(PartitionOffset).where(
            col(PartitionOffset.pipeline_id) == pipeline_id, col(PartitionOffset.topic) == p.topic,
            col(PartitionOffset.partition) == p.partition, col(PartitionOffset.committed) == p.committed,
        ).values(committed=p.end, last_run_id=run_id, updated_at=now,
                 newest_record_at=kept if read is None else case((kept.is_(None) | (kept < read), read), else_=kept)))
        if changed != 1:
            found = session.get(PartitionOffset, (pipeline_id, p.topic, p.partition))
            raise OffsetConflict(p.topic, p.partition, p.committed, found.committed if found else None)
    session.flush()


def _consume_replays(session: Session, pipeline_id: uuid.UUID, replaced: RangesByTopic) -> None:
    """The replayed rows a run replaced are done: trim each window past the run's range, or drop it.

    Windows start at or above the committed offset (moves trim them so) and a run reads from the
    committed offset, so what is left of a window is always the part above the run's end."""
    for topic, partitions in replaced.items():
        for partition, (_, end) in partitions.items():
            window = session.get(OffsetReplay, (pipeline_id, topic, int(partition)))
            if window is None:
                continue
            if end >= window.end:
                session.delete(window)
            else:
                window.start = max(window.start, end)
                session.add(window)


# The offsets API's moves.

def move(session: Session, pipeline: Pipeline, moves: list[OffsetMove], *,
         replace: bool) -> dict[Partition, PartitionOffset]:
    """Set each partition's committed offset; keep its replay window at or above the new position,
    and in ``replace`` mode add what a backward move will read again. Returns every position after."""
    stored = positions(session, pipeline)
    windows = replay_windows(session, pipeline)
    now = utcnow()
    for m in moves:
        tp = (m.topic, m.partition)
        row = stored.get(tp)
        if row is None:
            row = PartitionOffset(pipeline_id=pipeline.id, tenant_id=pipeline.tenant_id, topic=m.topic,
                                  partition=m.partition, committed=m.after, updated_at=now)
        else:
            row.committed, row.updated_at = m.after, now
        session.add(row)
        stored[tp] = row
        _move_window(session, pipeline, windows.get(tp), m, replace)
    session.flush()
    return stored


def _move_window(session: Session, pipeline: Pipeline, window: OffsetReplay | None, m: OffsetMove,
                 replace: bool) -> None:
    """Windows of one partition are kept as one span: a gap between two (only when append and
    replace moves mix before a run) is replaced too, read again by the same run."""
    start = end = None
    if window is not None and window.end > max(window.start, m.after):
        start, end = max(window.start, m.after), window.end
    if replace and m.before is not None and m.after < m.before:
        start = m.after if start is None else min(start, m.after)
        end = m.before if end is None else max(end, m.before)
    if start is None or end is None:
        if window is not None:
            session.delete(window)
        return
    if window is None:
        session.add(OffsetReplay(pipeline_id=pipeline.id, tenant_id=pipeline.tenant_id, topic=m.topic,
                                 partition=m.partition, start=start, end=end))
    elif (window.start, window.end) != (start, end):
        window.start, window.end, window.created_at = start, end, utcnow()
        session.add(window)

