"""The job's first look at Kafka (``check_watermarks``, on the driver before any task reads) waits out
a cluster that drops its connections for a while, as the readers do, and names the partition when
the cluster stays away past its timeout. Sandbox Kafka, its brokers taken down and brought back."""

from __future__ import annotations

import threading
import time

import pytest

from spark_jobs.errors import JobError
from spark_jobs.spec import SourceSpec
from spark_jobs.watermarks import check_watermarks
from tests.factories import LOOPBACK_ALLOWED
from tests.fixtures.kafka_broker import PASSWORD, USER

ALL_BROKERS = -1


def _source(bootstrap: str, topic: str, ranges: dict[str, tuple[int, int]]) -> SourceSpec:
    return SourceSpec(kafka_config={"bootstrap.servers": bootstrap}, ranges={topic: ranges})


def test_brokers_back_within_the_timeout_answer_the_watermarks(sandbox_kafka, kafka_faults, kafka_topic, produce_keyed) -> None:
    topic = kafka_topic(partitions=3)
    placed = produce_keyed(sandbox_kafka.bootstrap_servers, topic, 60)
    ranges = {str(p): (0, len(offsets)) for p, offsets in placed.items()}
    kafka_faults.broker_down(ALL_BROKERS)
    back = threading.Timer(3.0, kafka_faults.broker_up, args=(ALL_BROKERS,))
    back.start()
    began = time.monotonic()
    try:
        readable, gaps = check_watermarks(_source(sandbox_kafka.bootstrap_servers, topic, ranges), LOOPBACK_ALLOWED,
                                          timeout_s=30)
    finally:
        back.cancel()
    assert time.monotonic() - began >= 2.5  # answered after the brokers came back, not from a cache
    assert (readable, gaps) == ({topic: ranges}, [])


def test_brokers_away_past_the_timeout_fail_it_as_kafka_unavailable(sandbox_kafka, kafka_faults, kafka_topic,
                                                                    produce_keyed) -> None:
    topic = kafka_topic(partitions=1)
    produce_keyed(sandbox_kafka.bootstrap_servers, topic, 5)
    kafka_faults.broker_down(ALL_BROKERS)
    began = time.monotonic()

    with pytest.raises(JobError) as raised:
        check_watermarks(_source(sandbox_kafka.bootstrap_servers, topic, {"0": (0, 5)}), LOOPBACK_ALLOWED, timeout_s=3)

    assert 3 <= time.monotonic() - began < 15
    assert (raised.value.kind, raised.value.topic, raised.value.partition) == ("kafka_unavailable", topic, 0)
    assert raised.value.message.startswith(f"offsets of {topic}[0]: ")


LIST_OFFSETS = 2
UNKNOWN_TOPIC_OR_PART, NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT, SASL_AUTHENTICATION_FAILED = 3, 6, 7, 58


@pytest.mark.parametrize("errors", [[NOT_LEADER_OR_FOLLOWER], [NOT_LEADER_OR_FOLLOWER] * 3, [REQUEST_TIMED_OUT] * 3,
                                    [SASL_AUTHENTICATION_FAILED]])
def test_lookups_refused_for_a_while_are_asked_again_and_answered_exactly(sandbox_kafka, kafka_faults, kafka_topic,
                                                                        produce_keyed, errors: list[int]) -> None:
    # One NOT_LEADER_OR_FOLLOWER was enough for Consumer.get_watermark_offsets to answer the latest
    # offset as the earliest (librdkafka 2.16): every record read as deleted by retention.
    topic = kafka_topic(partitions=3)
    placed = produce_keyed(sandbox_kafka.bootstrap_servers, topic, 60)
    ranges = {str(p): (0, len(offsets)) for p, offsets in placed.items()}
    kafka_faults.request_errors(LIST_OFFSETS, errors)

    readable, gaps = check_watermarks(_source(sandbox_kafka.bootstrap_servers, topic, ranges), LOOPBACK_ALLOWED)

    assert (readable, gaps) == ({topic: ranges}, [])


def test_a_partition_a_broker_calls_unknown_while_the_metadata_has_it_is_asked_again(sandbox_kafka, kafka_faults,
                                                                                    kafka_topic, produce_keyed) -> None:
    # A former leader answers UNKNOWN_TOPIC_OR_PART for a partition that moved away from it; taken
    # for a deleted topic, the run would fail as data_loss, which the control plane never retries.
    topic = kafka_topic(partitions=3)
    placed = produce_keyed(sandbox_kafka.bootstrap_servers, topic, 60)
    ranges = {str(p): (0, len(offsets)) for p, offsets in placed.items()}
    kafka_faults.request_errors(LIST_OFFSETS, [UNKNOWN_TOPIC_OR_PART] * 3)

    readable, gaps = check_watermarks(_source(sandbox_kafka.bootstrap_servers, topic, ranges), LOOPBACK_ALLOWED)

    assert (readable, gaps) == ({topic: ranges}, [])


def test_a_deleted_topic_is_data_loss_at_once(sandbox_kafka, kafka_topic) -> None:
    began = time.monotonic()
    with pytest.raises(JobError) as raised:
        check_watermarks(_source(sandbox_kafka.bootstrap_servers, "never-created", {"0": (0, 5)}), LOOPBACK_ALLOWED)
    assert (raised.value.kind, raised.value.topic, raised.value.partition) == ("data_loss", "never-created", 0)
    assert time.monotonic() - began < 10  # the metadata's word, not the 30 s timeout


def test_a_wrong_password_is_kafka_auth_after_the_grace_not_unavailable_at_the_timeout(real_kafka, real_topic) -> None:
    # The broker refuses the login, not a request: only the client's error_cb tells, when polled.
    topic = real_topic(partitions=1)
    source = SourceSpec(kafka_config={"bootstrap.servers": real_kafka.bootstrap("SASL_PLAINTEXT"),
                                      "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
                                      "sasl.username": USER, "sasl.password": "not-" + PASSWORD},
                        ranges={topic: {"0": (0, 5)}})
    began = time.monotonic()

    with pytest.raises(JobError) as raised:
        check_watermarks(source, LOOPBACK_ALLOWED, timeout_s=60)

    assert time.monotonic() - began < 30
    assert (raised.value.kind, raised.value.topic, raised.value.partition) == ("kafka_auth", topic, 0)
    assert "not-" + PASSWORD not in raised.value.message
