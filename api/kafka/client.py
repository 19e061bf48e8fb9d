"""``KafkaClient``: the one way Inlet's control plane talks to Kafka.

Metadata and offset lookups only (planning runs, checking offsets, testing a connection), each
bounded by one deadline and batched per broker. Failures come out as the typed errors of
``api.kafka.errors``; nothing here knows whether the cluster is a real one or the sandbox.

Every address goes through the egress policy (``spark_jobs.egress``) first: the bootstrap servers
before the handle is made, the brokers the cluster advertises as soon as its metadata names them
(before any lookup that would connect to them), and an OAUTHBEARER token endpoint, which Inlet asks
itself (``spark_jobs.oauth``) instead of librdkafka. librdkafka still resolves broker names itself
when it connects, so a name whose answer changes between the check and the connection is the one
gap left (docs/security.md).

A client holds one librdkafka handle; use one per request or task, as a context manager.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Protocol, Self

from confluent_kafka import ConsumerGroupTopicPartitions, IsolationLevel, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec
from confluent_kafka.admin import ClusterMetadata as _RawMetadata

from api.kafka.config import KafkaClientConfig
from api.kafka.errors import (
    KafkaAuthError,
    KafkaClientError,
    KafkaEgressDenied,
    KafkaLookupError,
    KafkaTimeout,
    KafkaTokenError,
    KafkaUnavailable,
    TimestampNotResolvable,
    TopicNotFound,
)
from spark_jobs.public import EgressPolicy, EgressRefused, TokenRefused, is_auth_error, with_token_source

log = logging.getLogger(__name__)

Partition = tuple[str, int]

# _NOENT: librdkafka's "no leaders found" when none of the asked partitions exists.
_NOT_FOUND_CODES = frozenset(
    {KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC, KafkaError._UNKNOWN_PARTITION, KafkaError._NOENT}
)
_TIMEOUT_CODES = frozenset({KafkaError._TIMED_OUT, KafkaError.REQUEST_TIMED_OUT, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN})
_LEADER_CODES = frozenset(
    {
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.BROKER_NOT_AVAILABLE,
        KafkaError.REPLICA_NOT_AVAILABLE,
    }
)
_OFFSET_INVALID = -1001
_BROKER_CHECK_S = 60.0  # an advertised broker's address is checked again after this long
_AUTH_WATCH_S = 0.25  # a refusal of the credentials is noticed this soon (see _metadata)
_UNSUPPORTED_CODES = frozenset(
    {KafkaError.UNSUPPORTED_VERSION, KafkaError.UNSUPPORTED_FOR_MESSAGE_FORMAT, KafkaError._UNSUPPORTED_FEATURE}
)


@dataclass(frozen=True)
class BrokerInfo:
    id: int
    host: str
    port: int


@dataclass(frozen=True)
class ClusterMetadata:
    cluster_id: str | None
    controller_id: int
    brokers: list[BrokerInfo]
    topic_count: int
    latency_ms: float


class NewTopicSettings(Protocol):
    """How to create a missing topic (a Kafka target's ``create_topic``, defaults applied)."""

    @property
    def partitions(self) -> int: ...
    @property
    def replication_factor(self) -> int: ...  # -1: the broker's default
    @property
    def config(self) -> Mapping[str, str]: ...


def _is_internal(topic: str) -> bool:
    # Kafka's own topics (__consumer_offsets, __transaction_state) are never ingestion sources;
    # Java consumers exclude them from pattern subscriptions too.
    return topic.startswith("__")


class KafkaClient:
    """Bounded, batched lookups against one cluster; every call finishes within ``timeout_s``."""

    def __init__(self, config: KafkaClientConfig, *, egress: EgressPolicy, timeout_s: float = 5.0,
                 client_id: str = "inlet-control-plane") -> None:
        if timeout_s <= 0:
            raise ValueError("timeout_s must be positive")
        self.config = config
        self.egress = egress
        self._brokers_checked: dict[tuple[str, int], float] = {}
        self.timeout_s = timeout_s
        self._client_id = client_id
        self._admin: AdminClient | None = None
        self._errors: list[KafkaError] = []
        self._errors_lock = threading.Lock()
        self._secrets = config.secret_values()

    # Lifecycle.

    def close(self) -> None:
        # AdminClient has no close(); dropping the last reference destroys the handle.
        self._admin = None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # Lookups.

    def list_topics(self) -> dict[str, int]:
        """Visible, non-internal topics → partition count."""
        metadata = self._metadata(time.monotonic() + self.timeout_s)
        return {
            name: len(topic.partitions)
            for name, topic in sorted(metadata.topics.items())
            if topic.error is None and not _is_internal(name)
        }

    def watermarks(self, partitions: Iterable[Partition]) -> dict[Partition, tuple[int, int]]:
        """``(earliest, latest)`` offsets per partition: log start offset and last stable offset.

        ``latest`` is read as a read_committed consumer sees it, because that is where a run's reads
        must stop (open transactions stay out); without transactions it equals the high watermark.
        """
        wanted = sorted(set(partitions))
        if not wanted:
            return {}
        deadline = time.monotonic() + self.timeout_s
        self._check_exist(wanted, deadline)
        earliest = self._list_offsets(wanted, OffsetSpec.earliest(), deadline)
        latest = self._list_offsets(wanted, OffsetSpec.latest(), deadline)
        return {tp: (earliest[tp], latest[tp]) for tp in wanted}

    def offsets_for_timestamp(self, partitions: Iterable[Partition], timestamp_ms: int) -> dict[Partition, int]:
        """The first offset whose record timestamp is at or after ``timestamp_ms``, per partition.

        Raises ``TimestampNotResolvable`` for partitions the broker gives no offset for (see there).
        """
        wanted = sorted(set(partitions))
        if not wanted:
            return {}
        deadline = time.monotonic() + self.timeout_s
        self._check_exist(wanted, deadline)
        try:
            offsets = self._list_offsets(wanted, OffsetSpec.for_timestamp(timestamp_ms), deadline)
        except _Unsupported as exc:
            raise TimestampNotResolvable(timestamp_ms, wanted, f"the broker cannot serve timestamp lookups ({exc})") from None
        unresolved = [tp for tp, offset in offsets.items() if offset < 0]
        if unresolved:
            raise TimestampNotResolvable(
                timestamp_ms,
                unresolved,
                "the broker returned no offset (no record at or after that time, or timestamp lookups unsupported)",
            )
        return offsets

    def cluster_metadata(self) -> ClusterMetadata:
        """Brokers, controller and topic count, with the round-trip latency: the connection test."""
        started = time.monotonic()
        metadata = self._metadata(started + self.timeout_s)
        latency_ms = (time.monotonic() - started) * 1000
        return ClusterMetadata(
            cluster_id=metadata.cluster_id,
            controller_id=metadata.controller_id,
            brokers=sorted((BrokerInfo(b.id, str(b.host), b.port) for b in metadata.brokers.values()), key=lambda b: b.id),
            topic_count=sum(1 for name, t in metadata.topics.items() if t.error is None and not _is_internal(name)),
            latency_ms=round(latency_ms, 2),
        )

    def ensure_topic(self, name: str, create: NewTopicSettings | None) -> bool:
        """Whether ``name`` had to be created: a missing topic is created as ``create`` says, or
        refused with kind ``target_missing``."""
        deadline = time.monotonic() + self.timeout_s
        topic = self._metadata(deadline).topics.get(name)
        if topic is not None and topic.error is None:
            return False
        if create is None:
            raise KafkaLookupError(
                f"the target topic {name} does not exist on {self.config.bootstrap_servers}: create it, or let Inlet "
                "create it with target.create_topic", kind="target_missing")
        request = NewTopic(name, num_partitions=create.partitions, replication_factor=create.replication_factor,
                           config=dict(create.config))
        admin = self._handle()
        self._reset_errors()
        try:
            admin.create_topics([request], request_timeout=self._remaining(deadline))[name].result(
                timeout=self._remaining(deadline))
        except KafkaException as exc:
            if exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
                return False  # created meanwhile by someone else
            raise KafkaClientError(self._scrub(f"creating the target topic {name}: {exc.args[0].str()}"),
                                   kind="target_refused") from None
        except concurrent.futures.TimeoutError:
            raise KafkaTimeout(f"creating the target topic {name}: no answer within {self.timeout_s:g}s") from None
        log.info("created the target topic %s (%d partitions)", name, create.partitions)
        return True

    def commit_group_offsets(self, group: str, offsets: dict[Partition, int]) -> None:
        """Set ``group``'s committed offsets (the admin API's AlterConsumerGroupOffsets), as an
        outsider: the broker refuses while the group has active members, and says why."""
        if not offsets:
            return
        deadline = time.monotonic() + self.timeout_s
        self._metadata(deadline)  # the advertised brokers checked before the group's coordinator is asked
        admin = self._handle()
        self._reset_errors()
        request = ConsumerGroupTopicPartitions(group, [TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())])
        try:
            future = admin.alter_consumer_group_offsets([request], request_timeout=self._remaining(deadline))[group]
            answer = future.result(timeout=self._remaining(deadline))
        except KafkaException as exc:
            raise self._map(exc.args[0], f"committing offsets of consumer group {group}") from None
        except concurrent.futures.TimeoutError:
            raise KafkaTimeout(f"committing offsets of consumer group {group}: no answer within {self.timeout_s:g}s") from None
        refused = [tp for tp in answer.topic_partitions if tp.error is not None]
        if refused:
            raise self._map(refused[0].error, f"committing offsets of consumer group {group} on {refused[0].topic}[{refused[0].partition}]")

    def delete_group(self, group: str) -> bool:
        """Delete ``group`` (the admin API's DeleteGroups); False when it did not exist."""
        deadline = time.monotonic() + self.timeout_s
        self._metadata(deadline)  # the advertised brokers checked before the group's coordinator is asked
        admin = self._handle()
        self._reset_errors()
        try:
            admin.delete_consumer_groups([group], request_timeout=self._remaining(deadline))[group].result(
                timeout=self._remaining(deadline))
        except KafkaException as exc:
            if exc.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND:
                return False
            raise self._map(exc.args[0], f"deleting consumer group {group}") from None
        except concurrent.futures.TimeoutError:
            raise KafkaTimeout(f"deleting consumer group {group}: no answer within {self.timeout_s:g}s") from None
        return True

    # Internals.

    def _handle(self) -> AdminClient:
        if self._admin is None:
            self._check_bootstrap()
            try:
                # An OIDC token endpoint is asked here, through the egress policy (spark_jobs.oauth).
                base = with_token_source(self.config.librdkafka_config(), self.egress, timeout_s=self.timeout_s)
            except TokenRefused as exc:
                if exc.kind == "token_endpoint_refused":
                    raise KafkaEgressDenied(exc.message, kind=exc.kind) from None
                raise KafkaTokenError(exc.message, kind=exc.kind, status=exc.status) from None
            conf: dict[str, object] = {
                "client.id": self._client_id,
                **base,
                "error_cb": self._on_error,
                # librdkafka logs through Python logging (served on poll), not onto stderr.
                "logger": logging.getLogger("api.kafka.librdkafka"),
                "log.connection.close": False,
            }
            try:
                self._admin = AdminClient(conf)  # type: ignore[arg-type]  # the stubs leave out the callables it takes (error_cb, logger)
            except KafkaException as exc:
                raise KafkaClientError(self._scrub(f"invalid client configuration: {exc.args[0].str()}"), kind="config") from None
        return self._admin

    def _check_bootstrap(self) -> None:
        """Refuse a bootstrap server whose address the egress policy denies. A name that does not
        resolve is left to librdkafka, which reports it (kind ``dns``)."""
        for position, entry in enumerate(self.config.bootstrap_servers.split(","), start=1):
            host, _, port = entry.strip().rpartition(":")
            try:
                self.egress.resolve(host.strip("[]"), int(port), timeout_s=self.timeout_s)
            except EgressRefused as exc:
                raise KafkaEgressDenied(f"bootstrap server {position}: {exc.message}", kind="bootstrap_denied") from None
            except (OSError, TimeoutError, ValueError):
                continue

    def _check_brokers(self, metadata: _RawMetadata) -> None:
        """Refuse a cluster that advertises a broker at an address the egress policy denies, before
        anything connects to it (each broker checked again after ``_BROKER_CHECK_S``)."""
        now = time.monotonic()
        for broker in metadata.brokers.values():
            key = (str(broker.host), int(broker.port))
            if now - self._brokers_checked.get(key, -_BROKER_CHECK_S) < _BROKER_CHECK_S:
                continue
            try:
                self.egress.resolve(key[0], key[1], timeout_s=self.timeout_s)
            except EgressRefused as exc:
                raise KafkaEgressDenied(f"the cluster advertises broker {broker.id} at an address Inlet may not "
                                        f"connect to: {exc.message}", kind="broker_denied") from None
            except (OSError, TimeoutError):
                continue  # unresolvable here: librdkafka cannot connect to it either
            self._brokers_checked[key] = now

    def _on_error(self, error: KafkaError) -> None:
        with self._errors_lock:
            self._errors.append(error)

    def _remaining(self, deadline: float) -> float:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise KafkaTimeout(f"no answer from {self.config.bootstrap_servers} within {self.timeout_s:g}s")
        return remaining

    def _metadata(self, deadline: float) -> _RawMetadata:
        """The cluster's metadata, asked in slices of ``_AUTH_WATCH_S``: a cluster that refuses the
        credentials answers nothing (librdkafka retries, and tells only ``error_cb``, which a blocked
        call never serves), so between slices ``error_cb`` is served and a refusal ends the wait."""
        admin = self._handle()
        self._reset_errors()
        remaining = self._remaining(deadline)
        while True:
            try:
                metadata = admin.list_topics(timeout=min(remaining, _AUTH_WATCH_S))
                break
            except KafkaException as exc:
                error: KafkaError = exc.args[0]
                remaining = deadline - time.monotonic()
                if remaining <= 0 or error.code() not in _TIMEOUT_CODES or self._refused():
                    raise self._map(error, "metadata request") from None
        self._check_brokers(metadata)
        return metadata

    def _refused(self) -> bool:
        """Whether ``error_cb`` has seen the cluster refuse the credentials (served here)."""
        self._handle().poll(0)
        with self._errors_lock:
            return any(is_auth_error(e) for e in self._errors)

    def _check_exist(self, partitions: list[Partition], deadline: float) -> None:
        # ListOffsets cannot tell a missing partition from a leaderless one; metadata can.
        topics = self._metadata(deadline).topics
        missing = [
            f"{t}[{p}]" for t, p in partitions if t not in topics or topics[t].error is not None or p not in topics[t].partitions
        ]
        if missing:
            raise TopicNotFound(missing)

    def _list_offsets(self, partitions: list[Partition], spec: OffsetSpec, deadline: float) -> dict[Partition, int]:
        """One ListOffsets per leader broker; offsets as the broker gave them (-1 included)."""
        admin = self._handle()
        self._reset_errors()
        timeout = self._remaining(deadline)
        requests = {TopicPartition(t, p): spec for t, p in partitions}
        try:
            futures = admin.list_offsets(requests, isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=timeout)
        except KafkaException as exc:
            raise self._map(exc.args[0], "offset lookup") from None
        offsets: dict[Partition, int] = {}
        not_found: list[str] = []
        leaderless: list[str] = []
        for tp, future in futures.items():
            name = f"{tp.topic}[{tp.partition}]"
            try:
                offset = future.result(timeout=self._remaining(deadline)).offset
            except concurrent.futures.TimeoutError:
                raise self._map(KafkaError(KafkaError._TIMED_OUT), "offset lookup") from None
            except KafkaException as exc:
                error: KafkaError = exc.args[0]
                if error.code() in _NOT_FOUND_CODES:
                    not_found.append(name)
                elif error.code() in _LEADER_CODES:
                    leaderless.append(name)
                elif error.code() in _UNSUPPORTED_CODES:
                    raise _Unsupported(error.str()) from None
                else:
                    raise self._map(error, "offset lookup") from None
                continue
            # librdkafka reports a leader it could not reach as OFFSET_INVALID without an error.
            if offset == _OFFSET_INVALID:
                leaderless.append(name)
            offsets[(tp.topic, tp.partition)] = offset
        if not_found:
            raise TopicNotFound(not_found)
        if leaderless:
            raise KafkaUnavailable(
                self._scrub(f"offset lookup: no answer from the leader of {', '.join(sorted(leaderless))}"), kind="no_leader"
            )
        return offsets

    def _reset_errors(self) -> None:
        with self._errors_lock:
            self._errors.clear()

    def _map(self, error: KafkaError, during: str) -> KafkaClientError:
        """Turn a librdkafka error into a typed one, using what error_cb saw as the cause."""
        self._handle().poll(0)  # serves error_cb and the log queue
        with self._errors_lock:
            seen = list(self._errors)
        code = error.code()
        candidates = [error, *seen]
        auth = next((e for e in candidates if is_auth_error(e)), None)
        if auth is not None:
            return KafkaAuthError(self._scrub(f"{during}: {auth.str()}"))
        if code in _NOT_FOUND_CODES:
            return KafkaLookupError(self._scrub(f"{during}: {error.str()}"), kind="not_found")
        for e in seen:
            if e.code() == KafkaError._SSL:
                return KafkaUnavailable(self._scrub(f"{during}: TLS failure: {e.str()}"), kind="tls")
            if e.code() == KafkaError._RESOLVE:
                return KafkaUnavailable(self._scrub(f"{during}: {e.str()}"), kind="dns")
        refused = next((e for e in seen if e.code() == KafkaError._TRANSPORT and "refused" in e.str().lower()), None)
        if refused is not None:
            return KafkaUnavailable(self._scrub(f"{during}: {refused.str()}"), kind="refused")
        if code in _TIMEOUT_CODES:
            cause = next((e.str() for e in reversed(seen) if e.code() != KafkaError._ALL_BROKERS_DOWN), None)
            detail = f" (last broker error: {cause})" if cause else ""
            return KafkaTimeout(
                self._scrub(f"{during}: no answer from {self.config.bootstrap_servers} within {self.timeout_s:g}s{detail}")
            )
        cls = KafkaUnavailable if error.retriable() else KafkaClientError
        return cls(self._scrub(f"{during}: {error.str()}"), kind="unknown")

    def _scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "[redacted]")
        return text


class _Unsupported(Exception):
    """Internal: the broker does not support the requested lookup."""
