"""spark-submit run of Kafka ranges into another Kafka topic (real spark-submit, sandbox Kafka), on
``local[2]`` and through the standalone cluster's executors."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.fixtures.kafka import read_range
from tests.spark_jobs.helpers import Placement, make_spec

pytestmark = pytest.mark.slow


def test_every_source_record_reaches_the_target_with_its_coordinates(sandbox_kafka, kafka_topic, produce_keyed,
                                                                    placement: Placement, tmp_path: Path) -> None:
    source, target = kafka_topic(partitions=6), kafka_topic(partitions=3)
    placed = produce_keyed(sandbox_kafka.bootstrap_servers, source, 300, headers={"trace": b"abc"})
    ranges = {source: {str(p): (1, len(offsets)) for p, offsets in placed.items()}}
    spec = make_spec(sandbox_kafka.bootstrap_servers, ranges,
                     {"type": "kafka", "kafka_config": {"bootstrap.servers": sandbox_kafka.bootstrap_servers}, "topic": target},
                     include_headers=True)

    result = placement.run(spec, tmp_path)

    assert result.status == "succeeded", result.error
    expected = {(source, p, o) for p, offsets in placed.items() for o in offsets[1:]}
    assert result.rows_written == len(expected)
    received = {}
    probe = Consumer({"bootstrap.servers": sandbox_kafka.bootstrap_servers, "group.id": "probe"})
    for partition in range(3):
        _, high = probe.get_watermark_offsets(TopicPartition(target, partition), timeout=10)
        for message in read_range(sandbox_kafka.bootstrap_servers, target, partition, 0, high):
            headers = dict(message.headers())
            coordinate = (headers["inlet.topic"].decode(), int(headers["inlet.partition"]), int(headers["inlet.offset"]))
            assert headers["trace"] == b"abc" and headers["inlet.run_id"] == spec.run_id.encode()
            received[coordinate] = (message.key(), message.value())
    probe.close()
    sent = {
        (source, p, m.offset()): (m.key(), m.value())
        for p, offsets in placed.items()
        for m in read_range(sandbox_kafka.bootstrap_servers, source, p, 1, len(offsets))
    }
    assert received == sent and set(received) == expected
