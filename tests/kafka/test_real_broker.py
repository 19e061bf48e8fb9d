"""The control plane's Kafka client on a real Apache Kafka broker (tests/fixtures/kafka_broker.py):
what the sandbox cannot serve — timestamp lookups, DeleteRecords, retention, a restart, and every
security protocol with the same client configuration a run uses."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer

from api.kafka.client import KafkaClient
from api.kafka.config import KafkaClientConfig
from api.kafka.errors import KafkaAuthError, KafkaUnavailable, TimestampNotResolvable
from api.ledger.positions import partitions_to_read
from tests.factories import LOOPBACK_ALLOWED, kafka_source
from tests.fixtures.kafka import produce_keyed
from tests.fixtures.kafka_broker import PASSWORD, USER


@pytest.fixture
def client(real_kafka):
    with KafkaClient(KafkaClientConfig(real_kafka.bootstrap_servers), egress=LOOPBACK_ALLOWED, timeout_s=5) as kafka:
        yield kafka


def _produce_at(bootstrap: str, topic: str, partition: int, timestamps_ms: list[int]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for i, ts in enumerate(timestamps_ms):
        producer.produce(topic, value=f"{i}".encode(), partition=partition, timestamp=ts)
    assert producer.flush(30) == 0


def test_watermarks_follow_produce_and_delete_records(client, real_kafka, real_topic) -> None:
    topic = real_topic(partitions=4)
    placed = produce_keyed(real_kafka.bootstrap_servers, topic, 400)
    partitions = partitions_to_read(client.list_topics(), kafka_source(topics=[topic]))
    assert partitions == [(topic, p) for p in range(4)]
    assert client.watermarks(partitions) == {(topic, p): (0, len(placed.get(p, []))) for p in range(4)}

    busiest = max(placed, key=lambda p: len(placed[p]))
    real_kafka.delete_records(topic, busiest, 25)  # the admin API's DeleteRecords
    assert client.watermarks([(topic, busiest)]) == {(topic, busiest): (25, len(placed[busiest]))}


def test_timestamp_lookups_resolve_per_partition(client, real_kafka, real_topic) -> None:
    topic = real_topic(partitions=2)
    base = int(time.time() * 1000) - 3_600_000
    _produce_at(real_kafka.bootstrap_servers, topic, 0, [base + 1000 * i for i in range(10)])  # offsets 0..9
    _produce_at(real_kafka.bootstrap_servers, topic, 1, [base + 500 * i for i in range(4)])  # offsets 0..3, up to +1.5 s

    found = client.offsets_for_timestamp([(topic, 0), (topic, 1)], base + 1000)
    assert found == {(topic, 0): 1, (topic, 1): 2}  # the first record at or after the timestamp
    # Past every record of partition 1: the broker answers -1 there, and Inlet refuses to guess.
    with pytest.raises(TimestampNotResolvable) as caught:
        client.offsets_for_timestamp([(topic, 0), (topic, 1)], base + 5000)
    assert caught.value.partitions == [(topic, 1)]


def test_retention_moves_the_earliest_offset(client, real_kafka, real_topic) -> None:
    topic = real_topic(partitions=1, config={"retention.ms": "2000", "segment.ms": "200", "segment.bytes": "1048576"})
    old = int(time.time() * 1000) - 60_000
    _produce_at(real_kafka.bootstrap_servers, topic, 0, [old] * 50)
    time.sleep(0.5)  # the next record goes to a new segment (segment.ms)
    _produce_at(real_kafka.bootstrap_servers, topic, 0, [int(time.time() * 1000) + 600_000])
    deadline = time.monotonic() + 60
    while client.watermarks([(topic, 0)])[(topic, 0)][0] == 0 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert client.watermarks([(topic, 0)]) == {(topic, 0): (50, 51)}  # the old segment is gone, the new record stays


@pytest.mark.parametrize("listener,protocol,mechanism,tls", [
    ("PLAINTEXT", "PLAINTEXT", None, False),
    ("SASL_PLAINTEXT", "SASL_PLAINTEXT", "PLAIN", False),
    ("SASL_PLAINTEXT", "SASL_PLAINTEXT", "SCRAM-SHA-256", False),
    ("SASL_PLAINTEXT", "SASL_PLAINTEXT", "SCRAM-SHA-512", False),
    ("SSL", "SSL", None, True),
    ("SASL_SSL", "SASL_SSL", "SCRAM-SHA-512", True),
])
def test_every_security_protocol_reads_metadata(real_kafka, real_topic, listener, protocol, mechanism, tls) -> None:
    topic = real_topic(partitions=2)
    config = KafkaClientConfig(
        bootstrap_servers=real_kafka.bootstrap(listener), security_protocol=protocol, sasl_mechanism=mechanism,
        credentials={"username": USER, "password": PASSWORD} if mechanism else None,
        ssl={"ca_pem": real_kafka.ca.pem} if tls else None,
    )
    with KafkaClient(config, egress=LOOPBACK_ALLOWED, timeout_s=5) as kafka:
        assert partitions_to_read(kafka.list_topics(), kafka_source(topics=[topic])) == [(topic, 0), (topic, 1)]
        assert kafka.cluster_metadata().brokers[0].port == real_kafka.ports[listener]


def test_a_wrong_password_is_an_auth_error_without_the_password(real_kafka) -> None:
    config = KafkaClientConfig(bootstrap_servers=real_kafka.bootstrap("SASL_PLAINTEXT"), security_protocol="SASL_PLAINTEXT",
                               sasl_mechanism="SCRAM-SHA-512", credentials={"username": USER, "password": "not-" + PASSWORD})
    with KafkaClient(config, egress=LOOPBACK_ALLOWED, timeout_s=5) as kafka, pytest.raises(KafkaAuthError) as caught:
        kafka.cluster_metadata()
    assert caught.value.kind == "auth" and "not-" + PASSWORD not in str(caught.value)


def test_a_restarted_broker_serves_the_same_offsets(client, real_kafka, real_topic) -> None:
    topic = real_topic(partitions=2)
    placed = produce_keyed(real_kafka.bootstrap_servers, topic, 100)
    before = client.watermarks([(topic, 0), (topic, 1)])
    real_kafka.stop()
    with pytest.raises(KafkaUnavailable):
        client.watermarks([(topic, 0)])
    real_kafka.start()
    assert before == {(topic, p): (0, len(placed.get(p, []))) for p in range(2)}
    with KafkaClient(KafkaClientConfig(real_kafka.bootstrap_servers), egress=LOOPBACK_ALLOWED, timeout_s=10) as fresh:
        assert fresh.watermarks([(topic, 0), (topic, 1)]) == before
