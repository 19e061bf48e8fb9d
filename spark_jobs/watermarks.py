"""The job's first look at Kafka: before any task reads, the driver compares the run's ranges with
the partitions' earliest and latest offsets, because a consumer asked for a deleted offset would
otherwise reset silently.

The offsets come from the Admin API's ListOffsets (one request per leader for all the run's
partitions), never from ``Consumer.get_watermark_offsets``: after a broker answered its earliest
query with a retriable error (NOT_LEADER_OR_FOLLOWER, as during a leader change), librdkafka 2.16
answered the latest offset as the earliest one, which here reads as records deleted by retention.
A lookup that fails transiently (a dropped connection, a leader moving, a session re-authenticating
after a broker stalled) is asked again until its deadline; auth errors as long as
``kafka_errors.Refusals`` allows, whether answered for a partition or told to the client's
``error_cb`` (a refused login: librdkafka calls it only from poll, so the waits for answers poll).
A partition without a leader, or said unknown by a broker (a former leader, after the partition
moved), is data loss only when the cluster's metadata says it does not exist; else asked again.
"""

from __future__ import annotations

import time
from concurrent.futures import Future, wait
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import TYPE_CHECKING

from spark_jobs.errors import JobError
from spark_jobs.kafka_errors import Refusals
from spark_jobs.kafka_source import kafka_error_kind
from spark_jobs.plans import ClientConfig, PartitionKey

if TYPE_CHECKING:
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient, ListOffsetsResultInfo, OffsetSpec

    from spark_jobs.egress import EgressPolicy
    from spark_jobs.spec import Ranges, SourceSpec


_RETRY_PAUSE_S = 0.2
_POLL_S = 0.2  # how often a wait for answers serves the client's error_cb
_LATEST_FLOOR_S = 5.0  # the latest offsets' own time when the earliest took ~all of timeout_s
# A new client (each run makes one) drops its bootstrap connection once it learns the cluster's brokers
# and connects a learned one on its next 1-s tick: a lookup made in between waited 1 s on the sandbox,
# 3 s on the real broker (1 lookup in 8). Unanswered this long, the lookup gets a metadata request,
# which connects at once (``_refresh``, its wait capped at the tick it replaces). At 0.05 s a run's
# check on the real broker took 13-19 ms on average and 60 at most (25 checks each), against 23-27 and
# 110 at 0.1 s; nudged at 0.03 s or sooner, the metadata request itself often waited ~55 ms.
_CONNECT_NUDGE_S = 0.05


@dataclass(frozen=True)
class Gap:
    topic: str
    partition: int
    start: int
    end: int


def check_watermarks(source: SourceSpec, egress: EgressPolicy, timeout_s: float = 30.0) -> tuple[Ranges, list[Gap]]:
    """The ranges that can still be read, and the gaps lost to retention (on_data_loss=skip).

    Raises ``JobError(data_loss)`` for on_data_loss=fail. An end past the latest offset is always
    an error: the planner only asks for offsets that existed, so the log was truncated or recreated.

    The earliest offsets are asked until ``timeout_s``, the latest until then or for at least
    ``_LATEST_FLOOR_S`` after the earliest came (a cluster just back gets more than one try). So the
    check gives up after about ``timeout_s + _LATEST_FLOOR_S``: past its deadline a lookup only
    finishes the request under way (1 s more for its answers, then a metadata request of at most as
    long as the request's own timeout, 10 s at most).
    """
    from confluent_kafka.admin import AdminClient, OffsetSpec

    from spark_jobs.oauth import job_client_config  # httpx: only the driver needs it

    wanted = [(topic, int(key)) for topic, partitions in source.ranges.items()
              for key, (start, end) in partitions.items() if start < end]
    if not wanted:
        return {}, []
    refusals = Refusals()
    # A metadata request of one topic (``_refresh``) must never create it: librdkafka's default for a
    # producer-type client (an admin client is one) asks the broker to.
    config: ClientConfig = {**job_client_config(source.kafka_config, egress), **refusals.client_config(),
                            "allow.auto.create.topics": False}
    deadline = time.monotonic() + timeout_s
    admin = AdminClient(config)
    earliest = _offsets(admin, wanted, OffsetSpec.earliest(), deadline, refusals)
    latest = _offsets(admin, wanted, OffsetSpec.latest(), max(deadline, time.monotonic() + _LATEST_FLOOR_S), refusals)

    readable: Ranges = {}
    gaps: list[Gap] = []
    for topic, partition in wanted:
        start, end = source.ranges[topic][str(partition)]
        low, high = earliest[(topic, partition)], latest[(topic, partition)]
        if end > high:
            raise JobError("data_loss", f"{topic}[{partition}]: range [{start}, {end}) ends past the latest offset {high}"
                                        " (topic truncated or recreated)", topic, partition)
        if start < low:
            lost_to = min(low, end)
            if source.on_data_loss == "fail":
                raise JobError("data_loss", f"{topic}[{partition}]: offsets [{start}, {lost_to}) were deleted"
                                            f" (earliest available is {low})", topic, partition)
            gaps.append(Gap(topic, partition, start, lost_to))
            start = lost_to
        if start < end:
            readable.setdefault(topic, {})[str(partition)] = (start, end)
    return readable, gaps


def _offsets(admin: AdminClient, wanted: list[PartitionKey], spec: OffsetSpec, deadline: float,
             refusals: Refusals) -> dict[PartitionKey, int]:
    """``spec``'s offset of every partition in ``wanted``; the partitions whose lookup failed
    transiently are asked again until ``deadline``, after the client's metadata of their topics is
    read again (``_refresh``)."""
    from confluent_kafka import KafkaError, KafkaException, TopicPartition

    # No leader, or a broker that does not lead it (any longer): a deleted topic, or a partition moving.
    gone_or_moving = (KafkaError._NOENT, KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC,
                      KafkaError._UNKNOWN_PARTITION)
    found: dict[PartitionKey, int] = {}
    while True:
        asked = [p for p in wanted if p not in found]
        failed: list[tuple[PartitionKey, KafkaError]] = []
        remaining = max(0.1, deadline - time.monotonic())
        try:
            futures = admin.list_offsets({TopicPartition(t, p): spec for t, p in asked}, request_timeout=remaining)
        except KafkaException as exc:
            failed = [(asked[0], exc.args[0])]
        else:  # a future fails as a whole ("no leaders found") or for its own partition
            if wait(list(futures.values()), timeout=_CONNECT_NUDGE_S).not_done:
                _refresh(admin, {t for t, _ in asked}, min(deadline, time.monotonic() + 1.0))
            _await(admin, list(futures.values()), remaining + 1, refusals)
            for tp, future in futures.items():
                try:
                    offset = future.result(timeout=0).offset
                except KafkaException as exc:
                    failed.append(((tp.topic, tp.partition), exc.args[0]))
                    continue
                except FutureTimeout:  # no answer in time, or the wait ended for a refusal
                    failed.append(((tp.topic, tp.partition), KafkaError(KafkaError._TIMED_OUT, "no answer to ListOffsets")))
                    continue
                if offset < 0:  # librdkafka's answer for a leader it could not reach
                    failed.append(((tp.topic, tp.partition), _unreachable()))
                else:
                    found[(tp.topic, tp.partition)] = offset
        if not failed:
            refusals.progressed()
            return found
        for _, e in failed:
            refusals.on_error(e)
        (topic, partition), error = failed[0]
        kind = kafka_error_kind(error)
        if any(e.code() in gone_or_moving for _, e in failed):  # gone, or between leaders? the metadata says
            gone = _absent(admin, asked, remaining)
            if gone is not None:
                ((topic, partition), error), kind = gone, "data_loss"
            elif error.code() in gone_or_moving:
                kind = "kafka_unavailable"
        cause = refusals.final()
        if cause is not None:
            raise JobError(kafka_error_kind(cause), f"offsets of {topic}[{partition}]: {cause.str()}", topic, partition)
        if error.fatal() or kind not in ("kafka_unavailable", "kafka_auth") or time.monotonic() >= deadline:
            raise JobError(kind, f"offsets of {topic}[{partition}]: {error.str()}", topic, partition)
        time.sleep(_RETRY_PAUSE_S)
        _refresh(admin, {t for (t, _), _ in failed}, deadline)


def _await(admin: AdminClient, futures: list[Future[ListOffsetsResultInfo]], timeout: float,
           refusals: Refusals) -> None:
    """Wait up to ``timeout`` for ``futures``, polling ``admin`` meanwhile: librdkafka calls its
    ``error_cb`` only from poll, and a refused login (a wrong password) is told only there, while
    the lookups wait for a connection until their timeout. Ends early once ``refusals`` ends the work."""
    until = time.monotonic() + timeout
    pending = set(futures)
    while True:
        admin.poll(0)
        left = until - time.monotonic()
        if not pending or left <= 0 or refusals.final() is not None:
            return
        pending = wait(pending, timeout=min(left, _POLL_S)).not_done


def _refresh(admin: AdminClient, topics: set[str], deadline: float) -> None:
    """Read ``topics``' metadata again. librdkafka's admin client does not on a lookup's error: after
    a broker that stalled came back with new leader epochs (a real broker paused 18 s), the client
    kept asking with the old ones and was answered FENCED_LEADER_EPOCH until its metadata aged out,
    minutes later; a metadata request of the topic ends that at once. A new client per try would too,
    but a dropped client may be collected on one of librdkafka's threads, which aborts the process."""
    from confluent_kafka import KafkaException

    for topic in sorted(topics):
        try:
            admin.list_topics(topic=topic, timeout=max(0.1, min(5.0, deadline - time.monotonic())))
        except KafkaException:
            return  # no metadata yet: the next lookup says what holds


def _absent(admin: AdminClient, partitions: list[PartitionKey], timeout: float) -> tuple[PartitionKey, KafkaError] | None:
    """The first of ``partitions`` that the cluster's metadata says does not exist (its topic
    deleted), with the error that names it; None while the metadata cannot be had."""
    from confluent_kafka import KafkaError, KafkaException

    try:
        topics = admin.list_topics(timeout=min(timeout, 10.0)).topics
    except KafkaException:
        return None
    for topic, partition in partitions:
        meta = topics.get(topic)
        if (meta is None or partition not in meta.partitions
                or (meta.error is not None and meta.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART)):
            return (topic, partition), KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART, "the topic or partition does not exist")
    return None


def _unreachable() -> KafkaError:
    from confluent_kafka import KafkaError

    return KafkaError(KafkaError._TRANSPORT, "no answer from the partition's leader")
