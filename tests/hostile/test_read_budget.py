"""A tenant's records cannot take a worker's memory (issue 52: six gzip'd records of 256 MiB of zeros,
1.5 MB in Kafka, took a worker's process tree to 7.6 GB and the run succeeded).

A run's reading is bounded after decompression (``spark_jobs.read_budget``): a record past its bound
fails the run as ``record_too_large`` at its offset, before its value is copied out of the Kafka
client; a task's batches are bounded by bytes as well as rows. What a run's processes hold while it
runs is bounded too: tests/worker/test_warm_engine.py (a run of such records killed past its bound)
and tests/worker/test_processes.py (the watch on a spark-submit's tree); the end-to-end figures are
bench/tenant_budgets.py's. The bombs here are sized for a 2-core machine: 48 MiB of zeros a record
(48 KB in Kafka)."""

from __future__ import annotations

import gzip
from collections.abc import Callable

import pytest
from confluent_kafka import Message
from pyspark.sql.pandas.types import to_arrow_schema

from spark_jobs import kafka_source
from spark_jobs.errors import JobError
from spark_jobs.kafka_source import Chunk, consumer_config, kafka_struct, read_chunks
from spark_jobs.read_budget import MIB, ReadBudget
from tests.factories import LOOPBACK_ALLOWED
from tests.fixtures.kafka import SandboxKafka, produce_gzip

BOMB = 48 * MIB


def _message(offset: int, value: bytes, headers: list[tuple[str, bytes]] | None = None) -> Message:
    return Message(topic="t", partition=0, offset=offset, key=b"k", value=value, timestamp=(1, 1_000), headers=headers)


def test_a_record_past_the_bound_fails_the_run_at_its_offset_and_one_past_the_range_does_not() -> None:
    """``kafka_source._take`` on records made by hand: key, value and headers count; the record at the
    chunk's end (not the run's) may be of any size."""
    budget = ReadBudget(max_record_bytes=1_000)
    schema = to_arrow_schema(kafka_struct(True), timezone="UTC")
    pending = {("t", 0): kafka_source._Pending(Chunk("t", 0, 10, 13))}

    def take(messages: list[Message]) -> tuple[set[tuple[str, int]], int]:
        return kafka_source._take(messages, pending, True, True, schema.field("timestamp").type,
                                  schema.field("headers").type, budget)

    assert take([_message(10, b"x" * 990)]) == ({("t", 0)}, 991)  # its key counts too
    with pytest.raises(JobError) as raised:
        take([_message(11, b"x" * 10, headers=[("h", b"z" * 995)])])
    assert raised.value.kind == "record_too_large" and (raised.value.topic, raised.value.partition) == ("t", 0)
    assert "t[0] at offset 11" in raised.value.message and "1,007 bytes" in raised.value.message
    assert "1,000" in raised.value.message and "INLET_RUN_MAX_RECORD_BYTES" in raised.value.message
    assert pending["t", 0].rows == 1 and pending["t", 0].position == 11  # nothing of it taken

    assert take([_message(11, b"x"), _message(12, b"x"), _message(13, b"y" * 5_000)]) == ({("t", 0)}, 5_001)
    assert pending["t", 0].rows == 3  # the record at the chunk's end is not the run's: neither taken nor refused


def test_a_gzip_bomb_is_refused_at_its_offset_and_batches_are_bounded_by_bytes(
        sandbox_kafka: SandboxKafka, kafka_topic: Callable[..., str]) -> None:
    """Through librdkafka's consumer: gzip'd records of 48 MiB of zeros (48 KB each in Kafka) after
    small ones; and 200 records of 100 KiB, which the rows' bound alone would yield as one 20 MB batch."""
    bootstrap = sandbox_kafka.bootstrap_servers
    bombed, many = kafka_topic(partitions=1), kafka_topic(partitions=1)
    produce_gzip(bootstrap, bombed, [b"small-0", b"small-1", bytes(BOMB), bytes(BOMB)])
    produce_gzip(bootstrap, many, [bytes(100 << 10)] * 200)
    assert len(gzip.compress(bytes(BOMB))) < BOMB // 500  # what the broker holds of one
    config = consumer_config({"bootstrap.servers": bootstrap}, "g", LOOPBACK_ALLOWED)
    schema = to_arrow_schema(kafka_struct(False), timezone="UTC")

    with pytest.raises(JobError) as raised:
        list(read_chunks(config, [Chunk(bombed, 0, 0, 4)], schema, ReadBudget(stall_timeout_s=30, max_record_bytes=8 * MIB)))
    assert raised.value.kind == "record_too_large" and f"{bombed}[0] at offset 2" in raised.value.message
    assert f"{BOMB:,} bytes" in raised.value.message
    # The small records before it read as usual.
    first = list(read_chunks(config, [Chunk(bombed, 0, 0, 2)], schema, ReadBudget(stall_timeout_s=30, max_record_bytes=8 * MIB)))
    assert [v for _, b in first for v in b.column("value").to_pylist()] == [b"small-0", b"small-1"]

    budget = ReadBudget(stall_timeout_s=30, max_record_bytes=MIB, max_batch_bytes=MIB)
    batches = [batch for _, batch in read_chunks(config, [Chunk(many, 0, 0, 200)], schema, budget)]
    assert sum(b.num_rows for b in batches) == 200
    assert [o for b in batches for o in b.column("offset").to_pylist()] == list(range(200))
    assert len(batches) >= 19 and max(b.nbytes for b in batches) <= MIB, [b.nbytes for b in batches]
