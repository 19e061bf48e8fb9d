"""Per-partition offsets of a pipeline: inspect them against the cluster, move them (Kafka Connect's
offsets API and ``kafka-consumer-groups --reset-offsets``, only while the pipeline is stopped), and
say which run wrote a given offset.

What to move and whether it may move is decided here; the move itself, and the replay windows a
``replace``-mode move leaves for the next runs, are the offsets ledger's (``api.ledger.service``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from sqlmodel import Session

from api.audit.models import AuditEvent
from api.audit.service import list_events, record_by
from api.connections.models import Connection
from api.connections.service import referenced_connection
from api.core.db import utcnow
from api.core.enqueue import enqueue_group_mirror
from api.core.errors import Conflict, DomainError, ValidationFailed
from api.core.etag import check_if_match, etag_for
from api.core.pagination import PageParams
from api.core.security import TenantContext
from api.kafka.client import Partition
from api.kafka.errors import (
    KafkaClientError,
    KafkaTimeout,
    KafkaUnavailable,
    TimestampNotResolvable,
)
from api.kafka.problems import KafkaProblem
from api.ledger import service as ledger
from api.ledger.models import PartitionOffset
from api.ledger.positions import reads_topic, select_partitions, starting_positions
from api.offsets.schemas import (
    ClusterStatus,
    KeyedReplay,
    OffsetChange,
    OffsetLookup,
    OffsetsChangeResult,
    OffsetsPatch,
    OffsetsRead,
    PartitionOffsetRead,
    RunRangeRead,
)
from api.pipelines.definition import definition_of
from api.pipelines.models import Pipeline
from api.pipelines.schemas import KafkaSource
from api.pipelines.service import get_pipeline
from api.runs.repository import active_run, runs_by_id
from api.tenancy.models import ApiKey
from api.webhooks.events import emit

RESOURCE_TYPE = "offsets"


class OffsetsClient(Protocol):
    """What this module asks of Kafka (``KafkaClient``; tests give a stand-in for timestamp lookups)."""

    def list_topics(self) -> dict[str, int]: ...

    def watermarks(self, partitions: Iterable[Partition]) -> dict[Partition, tuple[int, int]]: ...

    def offsets_for_timestamp(self, partitions: Iterable[Partition], timestamp_ms: int) -> dict[Partition, int]: ...


ClientFactory = Callable[[Connection], OffsetsClient]


# Errors.

class PipelineNotStopped(Conflict):
    code, title = "pipeline-not-stopped", "Offsets change only while the pipeline is stopped"


class OffsetsChangedMeanwhile(Conflict):
    code, title = "offsets-changed-meanwhile", "The offsets changed while the cluster was asked"


class OffsetsOutOfRange(ValidationFailed):
    code, title = "offsets-out-of-range", "Offsets outside the partitions' range"


class UnknownPartitions(ValidationFailed):
    code, title = "unknown-partitions", "Topics or partitions the pipeline does not read"


class TimestampUnresolved(ValidationFailed):
    code, title = "timestamp-not-resolvable", "The cluster gave no offset for that time"


class KafkaLookupFailed(KafkaProblem):
    """The cluster could not be asked for the offsets a change needs; nothing was changed."""

    code = "kafka-lookup-failed"

    def __init__(self, error: KafkaClientError) -> None:
        super().__init__(f"Looking up offsets failed ({error.kind}): {error.message}; nothing was changed", error)


# Reading.

def offsets_etag(stored: Iterable[PartitionOffset]) -> str:
    """Identifies the committed offsets' state: a hash of the sorted (topic, partition, committed)."""
    return etag_for("offsets", *sorted(f"{r.topic}/{r.partition}={r.committed}" for r in stored))


def _connection_released(session: Session, pipeline: Pipeline) -> Connection:
    """The pipeline's connection, and the transaction ended: its cluster answers at the pace of a server
    the tenant names, and nothing of the database (a pooled connection, a row lock, SQLite's write
    lock) is held while it does."""
    connection = referenced_connection(session, pipeline.connection_id)
    session.commit()
    return connection


def read_offsets(
    *, session: Session, ctx: TenantContext, pipeline_id: uuid.UUID, client_factory: ClientFactory
) -> tuple[OffsetsRead, str]:
    """Every partition's committed offset beside the cluster's watermarks and the lag; when the cluster
    cannot be asked, the committed offsets alone, with the reason under ``cluster``."""
    pipeline = get_pipeline(session=session, ctx=ctx, pipeline_id=pipeline_id)
    stored = ledger.positions(session, pipeline)
    windows = ledger.replay_windows(session, pipeline)
    source = definition_of(pipeline).source
    watermarks: dict[Partition, tuple[int, int]] | None = None
    starts: dict[Partition, int] = {}
    cluster = ClusterStatus(status="ok")
    try:
        client = client_factory(_connection_released(session, pipeline))
        partitions, missing = select_partitions(client.list_topics(), source)
        watermarks = client.watermarks(partitions)
        try:
            starts = starting_positions(client, source, [tp for tp in partitions if tp not in stored], watermarks)
        except TimestampNotResolvable:
            starts = {}  # no record yet at or after starting_timestamp: the lag of those is unknown
        if missing:
            cluster = ClusterStatus(status="error", kind="not_found",
                                    detail=f"topics not found or not visible: {', '.join(missing)}")
    except (KafkaUnavailable, KafkaTimeout) as exc:
        cluster = ClusterStatus(status="unreachable", kind=exc.kind, detail=exc.message)
    except KafkaClientError as exc:
        cluster = ClusterStatus(status="error", kind=exc.kind, detail=exc.message)
    except DomainError as exc:  # the secret backend, say: the committed offsets are still worth showing
        cluster = ClusterStatus(status="unreachable", kind=exc.code, detail=exc.detail)
    keys = set(watermarks or {}) | {tp for tp in stored if reads_topic(source, tp[0])}
    rows = []
    for tp in sorted(keys):
        row = stored.get(tp)
        earliest, latest = (watermarks or {}).get(tp, (None, None))
        lag = None
        position = row.committed if row else starts.get(tp)
        if latest is not None and position is not None:
            lag = max(latest - position, 0)
        window = windows.get(tp)
        rows.append(PartitionOffsetRead(
            topic=tp[0], partition=tp[1], committed=row.committed if row else None, earliest=earliest,
            latest=latest, lag=lag, replay=[window.start, window.end] if window else None,
            last_run_id=row.last_run_id if row else None, updated_at=row.updated_at if row else None,
            newest_record_at=row.newest_record_at if row else None,
        ))
    total = sum(r.lag for r in rows if r.lag is not None) if watermarks is not None else None
    etag = offsets_etag(stored.values())
    return OffsetsRead(pipeline_id=pipeline.id, partitions=rows, total_lag=total, cluster=cluster,
                       observed_at=utcnow()), etag


# Resolving a change.

@dataclass(frozen=True)
class WantedOffset:
    """Where a change would move one partition, before its range is checked."""

    topic: str
    partition: int
    before: int | None
    wanted: int
    earliest: int
    latest: int


def _unknown(names: list[str]) -> UnknownPartitions:
    return UnknownPartitions(
        f"Not partitions of this pipeline as the cluster shows them now: {', '.join(names[:20])}",
        errors=[{"field": "offsets" if "[" in n else "topics", "message": f"{n} is not read by this pipeline",
                 "type": "unknown_partition"} for n in names[:100]],
        unknown=names,
    )


def _scope(body: OffsetsPatch | None, watermarks: dict[Partition, tuple[int, int]]) -> list[Partition]:
    if body is None:
        return sorted(watermarks)
    if body.offsets is not None:
        wanted = [(e.topic, e.partition) for e in body.offsets]
    else:
        topics = body.topics or sorted({t for t, _ in watermarks})
        known_topics = {t for t, _ in watermarks}
        unknown_topics = [t for t in topics if t not in known_topics]
        if unknown_topics:
            raise _unknown(unknown_topics)
        if body.partitions is None:
            return sorted(tp for tp in watermarks if tp[0] in topics)
        wanted = [(t, p) for t in topics for p in body.partitions]
    unknown = [f"{t}[{p}]" for t, p in wanted if (t, p) not in watermarks]
    if unknown:
        raise _unknown(unknown)
    return sorted(wanted)


def resolve_targets(
    body: OffsetsPatch | None,
    *,
    source: KafkaSource,
    watermarks: dict[Partition, tuple[int, int]],
    committed: dict[Partition, int],
    client: OffsetsClient,
    now: datetime,
) -> list[WantedOffset]:
    """Where each partition in scope should go, before any range check. ``body`` None: back to the
    pipeline's starting offsets. Timestamps are resolved by the broker, never guessed."""
    scope = _scope(body, watermarks)
    positions: dict[Partition, int] = {}

    def start_of(tp: Partition) -> int:
        if not positions:  # asked once, and only by the modes that need it (a timestamp is a lookup)
            try:
                positions.update(starting_positions(client, source, scope, watermarks))
            except TimestampNotResolvable as exc:
                assert source.starting_timestamp is not None  # only a timestamp is looked up
                raise _timestamp_unresolved(exc, source.starting_timestamp, "starting_timestamp") from None
        return positions[tp]

    wanted: dict[Partition, int]
    if body is None:
        wanted = {tp: start_of(tp) for tp in scope}
    elif body.offsets is not None:
        given = {(e.topic, e.partition): e.offset for e in body.offsets}
        wanted = {tp: start_of(tp) if (offset := given[tp]) is None else offset for tp in scope}
    elif body.reset is not None:
        wanted = {tp: watermarks[tp][0 if body.reset == "earliest" else 1] for tp in scope}
    elif body.shift_by is not None:
        wanted = {tp: committed.get(tp, start_of(tp)) + body.shift_by for tp in scope}
    else:
        moment = body.to_timestamp if body.to_timestamp is not None else now - body.duration  # type: ignore[operator]  # OffsetsPatch requires by_duration when to_timestamp is absent here
        timestamp_ms = int(moment.timestamp() * 1000)
        try:
            wanted = dict(client.offsets_for_timestamp(scope, timestamp_ms))
        except TimestampNotResolvable as exc:
            field = "to_timestamp" if body.to_timestamp is not None else "by_duration"
            raise _timestamp_unresolved(exc, moment, field) from None
    return [WantedOffset(topic=tp[0], partition=tp[1], before=committed.get(tp), wanted=wanted[tp],
                   earliest=watermarks[tp][0], latest=watermarks[tp][1]) for tp in scope]


def _timestamp_unresolved(exc: TimestampNotResolvable, moment: datetime, field: str) -> TimestampUnresolved:
    names = [f"{t}[{p}]" for t, p in exc.partitions]
    return TimestampUnresolved(
        f"The cluster gave no offset for {moment.isoformat()} on {', '.join(names[:20])}: nothing was "
        "changed. A time after a partition's last record has no offset, and some clusters cannot look "
        "timestamps up at all; choose explicit offsets or a reset instead",
        errors=[{"field": field, "message": f"{n}: no offset at or after {moment.isoformat()}",
                 "type": "timestamp_unresolvable"} for n in names[:100]],
        partitions=[{"topic": t, "partition": p} for t, p in exc.partitions], timestamp_ms=exc.timestamp_ms,
    )


def check_ranges(targets: list[WantedOffset], *, clamp: bool) -> list[OffsetChange]:
    """Targets inside [earliest, latest]; outside it, clamped (``clamp``) or a 422 naming each one."""
    outside = [t for t in targets if not t.earliest <= t.wanted <= t.latest]
    if outside and not clamp:
        raise OffsetsOutOfRange(
            f"{len(outside)} target(s) outside the partition's range [earliest, latest]; nothing was changed "
            "(send \"clamp\": true to clamp them)",
            errors=[{"field": f"offsets.{t.topic}[{t.partition}]",
                     "message": f"{t.wanted} is outside [{t.earliest}, {t.latest}]", "type": "out_of_range"}
                    for t in outside[:100]],
            partitions=[{"topic": t.topic, "partition": t.partition, "offset": t.wanted, "earliest": t.earliest,
                         "latest": t.latest} for t in outside],
        )
    return [OffsetChange(topic=t.topic, partition=t.partition, before=t.before,
                         after=min(max(t.wanted, t.earliest), t.latest), clamped=t in outside,
                         earliest=t.earliest, latest=t.latest) for t in targets]


# Changing.

def _changeable(
    session: Session, ctx: TenantContext, pipeline_id: uuid.UUID, replay_mode: str, if_match: str | None
) -> tuple[Pipeline, dict[Partition, PartitionOffset]]:
    """The pipeline, locked, and its offsets, when they may be changed; the problem saying why not."""
    pipeline = get_pipeline(session=session, ctx=ctx, pipeline_id=pipeline_id, lock=True)
    if replay_mode == "replace" and definition_of(pipeline).target.type != "delta":
        raise ValidationFailed.field("replay_mode", "replace needs a Delta target: a Kafka target cannot take "
                                     "back records it has written; use append")
    stored = ledger.positions(session, pipeline)
    check_if_match(if_match, offsets_etag(stored.values()))
    _require_stopped(session, pipeline)
    return pipeline, stored


def _require_stopped(session: Session, pipeline: Pipeline) -> None:
    active = active_run(session, pipeline.id)
    reasons = []
    if pipeline.state != "paused":
        reasons.append(f"the pipeline is {pipeline.state}")
    if active is not None:
        reasons.append(f"run {active.id} is {active.state}")
    if reasons:
        hint = "pause the pipeline first" + (" and wait for the run to finish or cancel it" if active else "")
        raise PipelineNotStopped(
            f"Offsets change only while the pipeline is paused with no queued or running run: "
            f"{' and '.join(reasons)}; {hint}",
            current_state=pipeline.state, active_run_id=str(active.id) if active else None,
        )


def _snapshot(moves: list[ledger.OffsetMove], key: str) -> list[dict[str, Any]]:
    return [{"topic": m.topic, "partition": m.partition, "committed": getattr(m, key)} for m in moves]


def _changed_event(session: Session, ctx: TenantContext, pipeline: Pipeline, mode: str, replay_mode: str,
                   moves: list[ledger.OffsetMove]) -> dict[str, Any]:
    """``offsets.changed``: what moved, how, and who moved it (the API key, by id and name)."""
    key = session.get(ApiKey, ctx.key_id) if ctx.key_id else None
    return {
        "pipeline_id": str(pipeline.id), "pipeline_name": pipeline.name, "mode": mode, "replay_mode": replay_mode,
        "partitions": [{"topic": m.topic, "partition": m.partition, "before": m.before, "after": m.after}
                       for m in moves],
        "changed_by": {"actor": ctx.actor, "api_key_id": str(ctx.key_id) if ctx.key_id else None,
                       "api_key_name": key.name if key else None},
    }


def change_offsets(
    *,
    session: Session,
    ctx: TenantContext,
    pipeline_id: uuid.UUID,
    body: OffsetsPatch | None,
    if_match: str | None,
    client_factory: ClientFactory,
    dry_run: bool | None = None,
) -> OffsetsChangeResult:
    """Move offsets as ``body`` says (None: reset every partition to the starting offsets).

    The same checks run for a dry run, so that its answer is the answer the real call would get.
    A change raises ``offsets.changed`` for the tenant's webhooks; after the commit, the pipeline's
    consumer group (if any) gets the new offsets. The cluster is asked with no transaction open, and
    what was checked before is checked again, the pipeline locked, before anything is written."""
    replay_mode = body.replay_mode if body else "append"
    dry = body.dry_run if body else bool(dry_run)
    pipeline, stored = _changeable(session, ctx, pipeline_id, replay_mode, if_match)
    definition = definition_of(pipeline)
    try:
        client = client_factory(_connection_released(session, pipeline))
        partitions, _ = select_partitions(client.list_topics(), definition.source)
        watermarks = client.watermarks(partitions)
        targets = resolve_targets(body, source=definition.source, watermarks=watermarks,
                                  committed={tp: r.committed for tp, r in stored.items()}, client=client, now=utcnow())
    except KafkaClientError as exc:
        raise KafkaLookupFailed(exc) from None
    rows = check_ranges(targets, clamp=body.clamp if body else False)
    mode = body.mode if body else "starting_offsets"
    changed = [r for r in rows if r.after != r.before]
    if not dry and changed:
        checked = offsets_etag(stored.values())
        session.expire_all()  # read afresh, not from what the first transaction loaded
        pipeline, stored = _changeable(session, ctx, pipeline_id, replay_mode, if_match)
        if definition_of(pipeline) != definition or offsets_etag(stored.values()) != checked:
            raise OffsetsChangedMeanwhile(
                "The pipeline or its offsets changed while the cluster was asked: read the offsets again and "
                "send the change again")
        moves = [ledger.OffsetMove(topic=r.topic, partition=r.partition, before=r.before, after=r.after)
                 for r in changed]
        stored = ledger.move(session, pipeline, moves, replace=replay_mode == "replace")
        record_by(session, ctx, resource_type=RESOURCE_TYPE, resource_id=pipeline.id,
                  action="patch" if body is not None else "reset",
                  before={"offsets": _snapshot(moves, "before")},
                  after={"mode": mode, "replay_mode": replay_mode, "offsets": _snapshot(moves, "after"),
                         "clamped": [{"topic": r.topic, "partition": r.partition} for r in changed if r.clamped]})
        emit(session, ctx.tenant_id, "offsets.changed",
             _changed_event(session, ctx, pipeline, mode, replay_mode, moves))
        if definition.source.commit_to_group:
            enqueue_group_mirror(session, pipeline.id)
    return OffsetsChangeResult(dry_run=dry, mode=mode, replay_mode=replay_mode, rows=rows,
                               keyed_table=KeyedReplay.of(definition.target, replay_mode),
                               etag=offsets_etag(stored.values()))


# History and lookup.

def history(
    *, session: Session, ctx: TenantContext, pipeline_id: uuid.UUID, page: PageParams
) -> tuple[list[AuditEvent], int]:
    get_pipeline(session=session, ctx=ctx, pipeline_id=pipeline_id)
    return list_events(session=session, ctx=ctx, page=page, resource_type=RESOURCE_TYPE, resource_id=str(pipeline_id))


def lookup(
    *, session: Session, ctx: TenantContext, pipeline_id: uuid.UUID, topic: str, partition: int, offset: int
) -> OffsetLookup:
    """The succeeded runs whose committed range [start, end) holds ``offset``, newest first."""
    get_pipeline(session=session, ctx=ctx, pipeline_id=pipeline_id)
    ranges = ledger.ranges_holding(session, tenant_id=ctx.tenant_id, pipeline_id=pipeline_id, topic=topic,
                                   partition=partition, offset=offset)
    runs = runs_by_id(session, ctx.tenant_id, (r.run_id for r in ranges))
    found = sorted(((r, runs[r.run_id]) for r in ranges if runs.get(r.run_id) and runs[r.run_id].state == "succeeded"),
                   key=lambda pair: pair[1].seq, reverse=True)
    return OffsetLookup(topic=topic, partition=partition, offset=offset, runs=[
        RunRangeRead(run_id=run.id, seq=run.seq, start=rr.start, end=rr.end, finished_at=run.finished_at)
        for rr, run in found
    ])
