"""Which partitions a pipeline reads, and where a partition it never read starts.

Topic selection (named topics, or a pattern matched against the whole name as Kafka's Java consumer
and Spark's ``subscribePattern`` do) and starting positions (``starting_offsets`` as Spark takes
them, or ``starting_timestamp``, which only the broker can turn into offsets) are decided here, once,
for planning runs and for the offsets API alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

from api.kafka.client import Partition
from api.kafka.errors import KafkaLookupError, TimestampNotResolvable, TopicNotFound
from api.pipelines.schemas import KafkaSource, StartingOffsets
from api.pipelines.topic_patterns import compile_topic_pattern, matches_topic

EARLIEST, LATEST = -2, -1

Watermarks = Mapping[Partition, tuple[int, int]]


class TimestampLookup(Protocol):
    def offsets_for_timestamp(self, partitions: Iterable[Partition], timestamp_ms: int) -> dict[Partition, int]: ...


def select_partitions(visible: Mapping[str, int], source: KafkaSource) -> tuple[list[Partition], list[str]]:
    """The source's partitions among the ``visible`` topics (name → partition count), and the named
    topics that are not visible. A pattern matches whole names; an invalid one is a ``config`` error."""
    if source.topic_pattern:
        try:
            regex = compile_topic_pattern(source.topic_pattern)
        except ValueError as exc:
            raise KafkaLookupError(str(exc), kind="config") from None
        topics, missing = [t for t in sorted(visible) if regex.fullmatch(t)], []
    else:
        named = sorted(set(source.topics or ()))
        topics = [t for t in named if t in visible]
        missing = [t for t in named if t not in visible]
    return [(t, p) for t in topics for p in range(visible[t])], missing


def partitions_to_read(visible: Mapping[str, int], source: KafkaSource) -> list[Partition]:
    """As ``select_partitions``, but a named topic that is missing is an error (``TopicNotFound``)."""
    partitions, missing = select_partitions(visible, source)
    if missing:
        raise TopicNotFound(missing)
    return partitions


def reads_topic(source: KafkaSource, topic: str) -> bool:
    if source.topic_pattern:
        return matches_topic(source.topic_pattern, topic)
    return topic in (source.topics or ())


def starting_offset(starting: StartingOffsets, tp: Partition, earliest: int, latest: int) -> int:
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


def starting_positions(
    client: TimestampLookup, source: KafkaSource, partitions: list[Partition], watermarks: Watermarks,
) -> dict[Partition, int]:
    """Where each of ``partitions`` starts if never read. With ``starting_timestamp`` the broker says
    (one lookup); a partition with no record at or after it raises ``TimestampNotResolvable``, or
    with ``starting_timestamp_strategy: latest`` starts at its latest offset."""
    if source.starting_timestamp is None or not partitions:
        return {tp: starting_offset(source.starting_offsets, tp, *watermarks[tp]) for tp in partitions}
    timestamp_ms = int(source.starting_timestamp.timestamp() * 1000)
    try:
        return dict(client.offsets_for_timestamp(partitions, timestamp_ms))
    except TimestampNotResolvable as exc:
        if source.starting_timestamp_strategy != "latest":
            raise
        unresolved = set(exc.partitions)
    resolvable = [tp for tp in partitions if tp not in unresolved]
    found = dict(client.offsets_for_timestamp(resolvable, timestamp_ms)) if resolvable else {}
    return found | {tp: watermarks[tp][1] for tp in unresolved}
