"""Reading exact Kafka offset ranges into Spark.

``inlet_kafka`` is a PySpark Python Data Source: one input partition per chunk of an offset range,
read on an executor with confluent-kafka and yielded as Arrow batches whose columns are exactly
those of Spark's own Kafka source (``KAFKA_COLUMNS``): a reader through Spark's JVM connector, where
its jars can be had, would yield the same DataFrame.

Before reading, ``spark_jobs.watermarks`` compares the ranges with the partitions' earliest and
latest offsets on the driver: a consumer asked for a deleted offset would otherwise reset silently.
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import chain
from typing import TYPE_CHECKING, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from spark_jobs.errors import JobError, JobErrorKind
from spark_jobs.plans import ClientConfig, PartitionKey, read_plan, write_plan
from spark_jobs.read_budget import ConsumeSizing, ReadBudget, header_bytes

if TYPE_CHECKING:
    from confluent_kafka import KafkaError, Message
    from pyspark.sql import DataFrame, SparkSession

    from spark_jobs.egress import EgressPolicy
    from spark_jobs.spec import Ranges  # pydantic costs every Python worker ~1 s to import

_Headers = list[tuple[str, bytes | None]]

KAFKA_COLUMNS = (
    "key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, "
    "timestamp TIMESTAMP, timestampType INT"
)
HEADERS_COLUMN = "headers ARRAY<STRUCT<key: STRING, value: BINARY>>"

_BATCH_ROWS = 20_000
_MAX_CONSUME = 10_000
# How long librdkafka waits before fetching a partition again once its local queue is past its bounds
# (``queued.min.messages``, ``queued.max.messages.kbytes``). At its default of 1 s a task drained the
# queue and then sat idle: this reader, one consumer of 32 partitions, took 5.4-5.6 µs a record, and
# 2.6-2.8 µs at 10 ms (docs/performance.md). The queue's bounds, and so its memory, stay as they were.
FETCH_QUEUE_BACKOFF_MS = 10
# The young generation's collection threshold while a reader is open (Python's default: 700). Every
# consumed message is a GC-tracked object, as is its timestamp's tuple, so a batch of 10,000 set off
# ~30 young collections. Each moved the batch's live messages up a generation, and the older
# collections that followed (a full one every ~60,000 records) walked the task's every object: a
# quarter of a task's CPU (docs/performance.md). At this threshold a batch's messages die, freed by
# reference counting, before a collection looks at them. The threshold holds for the whole process
# while a reader is open, its decoding and writing included: only cyclic garbage waits longer, and
# a task makes little. A process that turned automatic collection off (threshold 0) keeps it off.
_YOUNG_THRESHOLD = 100_000
_readers_open = 0  # in this process; readers are generators, and may interleave
_restore: tuple[int, ...] = ()  # the thresholds before the first of them opened


def kafka_schema(include_headers: bool) -> str:
    return f"{KAFKA_COLUMNS}, {HEADERS_COLUMN}" if include_headers else KAFKA_COLUMNS


def kafka_struct(include_headers: bool) -> StructType:
    """``kafka_schema`` as a StructType, built without the JVM's DDL parser (no session needed)."""
    from pyspark.sql.types import ArrayType, BinaryType, IntegerType, LongType, StringType, StructField, TimestampType

    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))))
    return StructType(fields)


@dataclass(frozen=True)
class Chunk(InputPartition):
    topic: str
    partition: int
    start: int
    end: int


@dataclass(frozen=True)
class ReadPlan:
    """The ``inlet_kafka`` source's plan: the chunks its tasks read, and the client config (secrets)."""

    consumer_config: ClientConfig
    chunks: tuple[Chunk, ...]
    budget: ReadBudget


def consumer_config(kafka_config: dict[str, str], group_id: str, egress: EgressPolicy) -> ClientConfig:
    """The caller's client config, made safe for reading fixed ranges; an OAuth token endpoint's
    token is fetched now, through ``egress`` (``spark_jobs.oauth``)."""
    from spark_jobs.oauth import job_client_config  # httpx: only the driver needs it, never a task's import

    return {
        "group.id": group_id,  # librdkafka requires one; nothing is ever committed to it
        **job_client_config(kafka_config, egress),
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        # A position outside the log must fail loudly, never jump to earliest/latest.
        "auto.offset.reset": "error",
        "enable.partition.eof": True,
        "fetch.queue.backoff.ms": FETCH_QUEUE_BACKOFF_MS,
    }


def kafka_error_kind(error: KafkaError) -> JobErrorKind:
    from confluent_kafka import KafkaError

    from spark_jobs.kafka_errors import is_auth_error

    code = error.code()
    if is_auth_error(error):
        return "kafka_auth"
    if code in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
        return "data_loss"
    if code in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC, KafkaError._UNKNOWN_PARTITION):
        return "data_loss"
    return "kafka_unavailable"


def chunk_ranges(ranges: Ranges, max_records_per_task: int) -> list[Chunk]:
    """Split every range into near-equal chunks of at most ``max_records_per_task`` offsets."""
    chunks = []
    for topic, partitions in sorted(ranges.items()):
        for key, (start, end) in sorted(partitions.items(), key=lambda kv: int(kv[0])):
            pieces = math.ceil((end - start) / max_records_per_task)
            for i in range(pieces):
                chunks.append(
                    Chunk(topic, int(key), start + (end - start) * i // pieces, start + (end - start) * (i + 1) // pieces)
                )
    return chunks


def read_chunk(config: ClientConfig, chunk: Chunk, schema: pa.Schema, budget: ReadBudget) -> Iterator[pa.RecordBatch]:
    """Arrow batches of exactly the records with offsets in ``[chunk.start, chunk.end)``."""
    for _, batch in read_chunks(config, [chunk], schema, budget):
        yield batch


def read_chunks(
    config: ClientConfig, chunks: list[Chunk], schema: pa.Schema, budget: ReadBudget
) -> Iterator[tuple[Chunk, pa.RecordBatch]]:
    """Arrow batches (in ``schema``, a subset-in-order of the Kafka columns) of several chunks, read
    by ONE consumer; each batch holds records of one chunk only, and is yielded with it. ``budget``
    bounds a record, a batch and a stall (``spark_jobs.read_budget``).

    Offsets may be missing inside a range (compaction, transaction markers); a record at or past a
    chunk's end is never emitted, and its partition is paused so the consumer stops fetching it.
    Chunks must be of distinct partitions. Runs on an executor.
    """
    from confluent_kafka import Consumer, Message, TopicPartition

    from spark_jobs.kafka_errors import Refusals

    refusals = Refusals()
    consumer = Consumer({**config, **refusals.client_config()})
    with_headers = "headers" in schema.names
    ts_type = schema.field("timestamp").type
    headers_type = schema.field("headers").type if with_headers else None
    pending: dict[PartitionKey, _Pending] = {(c.topic, c.partition): _Pending(c) for c in chunks if c.start < c.end}
    if len(pending) != len([c for c in chunks if c.start < c.end]):
        raise ValueError("read_chunks: two chunks of the same partition")
    one_topic = len({t for t, _ in pending}) <= 1

    def flush(p: _Pending) -> tuple[Chunk, pa.RecordBatch]:
        batch = p.pieces[0] if len(p.pieces) == 1 else pa.concat_batches(p.pieces)
        p.pieces, p.rows, p.bytes = [], 0, 0
        return p.chunk, batch.select(schema.names).cast(schema)

    with _collections_deferred():
        try:
            consumer.assign([TopicPartition(t, p, c.chunk.start) for (t, p), c in pending.items()])
            now = time.monotonic()
            for p in pending.values():
                p.last_progress = now
            sizing = ConsumeSizing(budget, _MAX_CONSUME)
            while pending:
                if (refused := refusals.final()) is not None:
                    only = next(iter(pending)) if len(pending) == 1 else (None, None)
                    raise JobError(kafka_error_kind(refused), f"{only[0]}[{only[1]}]: {refused.str()}" if only[0] else refused.str(), *only)
                # consume(n) waits for n messages or the timeout: never ask for more than the ranges hold.
                left = sum(p.chunk.end - p.position for p in pending.values())
                messages = consumer.consume(min(sizing.records, left), timeout=1.0)
                errors = [(m, error) for m in messages if (error := m.error()) is not None] if any(map(Message.error, messages)) else []
                if errors:
                    messages = [m for m in messages if m.error() is None]
                touched, largest = (_take(messages, pending, one_topic, with_headers, ts_type, headers_type, budget)
                                    if messages else (set(), 0))
                sizing.consumed(largest)
                for message, error in errors:
                    _note_error(message, error, pending, touched)
                now = time.monotonic()
                if touched:
                    refusals.progressed()
                for key in touched:
                    p = pending[key]
                    p.last_progress = now
                    if p.position >= p.chunk.end:
                        consumer.pause([TopicPartition(*key)])
                        del pending[key]
                        if p.rows:
                            yield flush(p)
                    elif p.rows >= _BATCH_ROWS or p.bytes >= budget.flush_bytes:
                        yield flush(p)
                _check_progress(pending, now, budget.stall_timeout_s)
        finally:
            consumer.close()


@contextmanager
def _collections_deferred() -> Iterator[None]:
    """Python's young collections held back to ``_YOUNG_THRESHOLD`` while any reader is open; the
    thresholds set before the first one opened are set again when the last one closes."""
    global _readers_open, _restore
    if _readers_open == 0:
        _restore = gc.get_threshold()
        if _restore[0]:
            gc.set_threshold(max(_restore[0], _YOUNG_THRESHOLD), *_restore[1:])
    _readers_open += 1
    try:
        yield
    finally:
        _readers_open -= 1
        if _readers_open == 0:
            gc.set_threshold(*_restore)


def _note_error(message: Message, error: KafkaError, pending: dict[PartitionKey, _Pending],
                touched: set[PartitionKey]) -> None:
    """A consumed error: the end of a partition reached (its chunk done if at or past the chunk's
    end), a transient one (librdkafka retries; the stall timeout bounds it), or the run's failure."""
    # A client-wide error (all brokers down, say) names no topic or partition.
    topic, partition = message.topic(), message.partition()
    key = (topic, partition) if topic is not None and partition is not None else None
    waiting = pending.get(key) if key is not None else None
    if error.code() == _partition_eof():
        offset = message.offset()
        if key is not None and waiting is not None and offset is not None and offset >= waiting.chunk.end:
            waiting.position = waiting.chunk.end
            touched.add(key)
        return
    if kafka_error_kind(error) == "kafka_unavailable" and not error.fatal():
        return
    where = f"{topic}[{partition}] at offset {waiting.position}" if waiting is not None else f"{topic}[{partition}]"
    raise JobError(kafka_error_kind(error), f"{where}: {error.str()}", *((topic, partition) if topic else (None, None)))


def _check_progress(pending: dict[PartitionKey, _Pending], now: float, stall_timeout_s: float) -> None:
    for key, p in pending.items():
        if now - p.last_progress > stall_timeout_s:
            raise JobError(
                "kafka_unavailable", f"{key[0]}[{key[1]}]: no progress at offset {p.position} for {stall_timeout_s:.0f}s", *key
            )


def _take(
    messages: list[Message],
    pending: dict[PartitionKey, _Pending],
    one_topic: bool,
    with_headers: bool,
    ts_type: pa.DataType,
    headers_type: pa.DataType | None,
    budget: ReadBudget,
) -> tuple[set[PartitionKey], int]:
    """Add a consumed batch of (error-free) messages to their chunks' pieces, column by column: one
    ``map`` of the field's method per field costs far less per record than a loop appending to lists
    (and half what a comprehension calling it does), and numbers go straight into numpy arrays. A
    record past the budget's bound is refused before its value is copied out of the client. The
    partitions touched, and the largest record's bytes."""
    from confluent_kafka import Message

    n = len(messages)
    sizes = np.fromiter(map(len, messages), np.int64, n)  # the values' lengths, read without copying them
    partitions = np.fromiter(map(Message.partition, messages), np.int32, n)
    topics = None if one_topic else pa.array(list(map(Message.topic, messages)), pa.string())
    # Each timestamp is a (type, ms) pair: all of them in one array, type and time taking turns.
    stamps = np.fromiter(chain.from_iterable(map(Message.timestamp, messages)), np.int64, 2 * n)
    keys = list(map(Message.key, messages))
    key_column = pa.nulls(n, pa.binary()) if keys.count(None) == n else pa.array(keys, pa.binary())
    sizes += pc.binary_length(key_column).fill_null(0).to_numpy()
    headers = None
    if with_headers:
        # A consumed message's headers are (key, value) pairs; the stub's type also has produce's dict form.
        headers = pa.array(
            [[{"key": k, "value": v} for k, v in cast(_Headers, h)] if (h := m.headers()) else None for m in messages], headers_type
        )
        sizes += header_bytes(headers)
    if sizes.max() > budget.max_record_bytes:
        budget.refuse_oversized(messages, sizes, lambda key, offset: (p := pending.get(key)) is not None
                                and p.position <= offset < p.chunk.end)
    columns = {
        "key": key_column,
        "value": pa.array(list(map(Message.value, messages)), pa.binary()),
        "offset": pa.array(np.fromiter(map(Message.offset, messages), np.int64, n)),
        "timestamp": pa.array(stamps[1::2], pa.timestamp("ms", tz="UTC")).cast(ts_type),
        # confluent-kafka counts timestamp types from 0 = unavailable; Java (Spark) from -1.
        "timestampType": pa.array(stamps[0::2] - 1, pa.int32()),
    }
    if headers is not None:
        columns["headers"] = headers
    everything = pa.RecordBatch.from_pydict(columns)
    touched = set()
    for key, rows in _by_partition(everything, partitions, topics, next(iter(pending))[0] if one_topic else None):
        p = pending.get(key)
        if p is None:
            continue  # a paused partition's last fetched records
        beyond = pc.max(rows.column("offset")).as_py()
        piece = rows if beyond < p.chunk.end else rows.filter(pc.less(rows.column("offset"), p.chunk.end))
        if piece.num_rows:
            count = piece.num_rows
            piece = pa.RecordBatch.from_arrays(
                [piece.column("key"), piece.column("value"), pa.repeat(pa.scalar(key[0], pa.string()), count),
                 pa.repeat(pa.scalar(key[1], pa.int32()), count), *(piece.column(c) for c in piece.schema.names[2:])],
                names=["key", "value", "topic", "partition", *piece.schema.names[2:]],
            )
            p.pieces.append(piece)
            p.rows += count
            p.bytes += piece.nbytes
        p.position = p.chunk.end if beyond >= p.chunk.end - 1 else beyond + 1
        touched.add(key)
    return touched, int(sizes.max())


def _by_partition(rows: pa.RecordBatch, partitions: np.ndarray, topics: pa.Array | None,
                  topic: str | None) -> Iterator[tuple[PartitionKey, pa.RecordBatch]]:
    """``rows`` (with their ``partitions`` and ``topics``, or all of ``topic``) grouped by partition,
    each partition's rows in their consumed (offset) order. librdkafka queues each partition's
    fetched records together, so a batch nearly always holds each partition in one run: it is then
    only sliced. Else it is sorted first (stable), once: filtering the batch once per partition cost
    0.6-0.75 us a record with 32 partitions in a batch, the sort 0.08."""
    starts = _runs(partitions, topics)
    firsts = partitions[starts].astype(np.int64)  # each run's (topic, partition) as one number
    if topics is not None:
        firsts |= pc.dictionary_encode(topics).indices.to_numpy()[starts].astype(np.int64) << 32
    if len(np.unique(firsts)) < len(starts):  # a partition in two runs
        keys = pa.table({"p": partitions} if topics is None else {"t": topics, "p": partitions})
        order = pc.sort_indices(keys, sort_keys=[(name, "ascending") for name in keys.column_names])
        rows, partitions = rows.take(order), partitions[order.to_numpy()]
        topics = topics.take(order) if topics is not None else None
        starts = _runs(partitions, topics)
    for start, stop in zip(starts, [*starts[1:], len(partitions)], strict=True):
        yield _key(start, partitions, topics, topic), rows.slice(start, stop - start)


def _key(row: int, partitions: np.ndarray, topics: pa.Array | None, topic: str | None) -> PartitionKey:
    return (str(topics[row].as_py()) if topics is not None else str(topic)), int(partitions[row])


def _runs(partitions: np.ndarray, topics: pa.Array | None) -> list[int]:
    """Where each run of records of one (topic, partition) starts."""
    changes = partitions[1:] != partitions[:-1]
    if topics is not None:
        changes |= pc.not_equal(topics.slice(1), topics.slice(0, len(topics) - 1)).to_numpy(zero_copy_only=False)
    return [0, *(np.flatnonzero(changes) + 1).tolist()]


def _partition_eof() -> int:
    from confluent_kafka import KafkaError

    return KafkaError._PARTITION_EOF


class _Pending:
    """A chunk being read: its position and the record batches not yet yielded."""

    def __init__(self, chunk: Chunk):
        self.chunk, self.position, self.last_progress = chunk, chunk.start, 0.0
        self.pieces: list[pa.RecordBatch] = []
        self.rows = self.bytes = 0


class InletKafkaDataSource(DataSource):
    """``spark.read.format("inlet_kafka").option("plan", path)``: reads the chunks in a plan file.

    The plan file (driver-local, 0600) holds the client config with its secrets, so they travel
    only inside the pickled reader, never in the query plan's options.
    """

    @classmethod
    def name(cls) -> str:
        return "inlet_kafka"

    def schema(self) -> str:
        return kafka_schema(self.options.get("include_headers", "false") == "true")

    def reader(self, schema: StructType) -> DataSourceReader:
        return _KafkaReader(read_plan(self.options["plan"], ReadPlan), schema)


class _KafkaReader(DataSourceReader):
    def __init__(self, plan: ReadPlan, schema: StructType):
        self.config = plan.consumer_config
        self.chunks = plan.chunks
        self.budget = plan.budget
        self.arrow_schema = to_arrow_schema(schema, timezone="UTC")

    def partitions(self) -> list[InputPartition]:
        return list(self.chunks)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, Chunk)
        return read_chunk(self.config, partition, self.arrow_schema, self.budget)


def read_records(spark: SparkSession, plan: ReadPlan, include_headers: bool, plan_path: str) -> DataFrame:
    """``plan``'s chunks as a DataFrame of Spark's Kafka columns, read by ``inlet_kafka`` (the plan
    goes to ``plan_path``, a private file)."""
    spark.dataSource.register(InletKafkaDataSource)
    return (
        spark.read.format("inlet_kafka")
        .option("plan", write_plan(plan_path, plan))
        .option("include_headers", str(include_headers).lower())
        .load()
    )
