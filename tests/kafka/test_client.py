"""``api.kafka``: configuration mapping, and lookups against the sandbox Kafka over TCP."""

from __future__ import annotations

import re
import time

import pytest

from api.kafka import (
    ALLOWED_CLIENT_OPTIONS,
    KafkaAuthError,
    KafkaClient,
    KafkaClientConfig,
    KafkaConfigError,
    KafkaUnavailable,
    TimestampNotResolvable,
    TopicNotFound,
)
from api.ledger.positions import partitions_to_read
from tests.factories import LOOPBACK_ALLOWED, kafka_source
from tests.fixtures.kafka import SandboxKafka, produce_keyed

CA = "-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n"
KEY = "-----BEGIN PRIVATE KEY-----\nMIIEsecretkey\n-----END PRIVATE KEY-----\n"


def test_sasl_ssl_scram_config_maps_to_librdkafka_and_redacts_secrets() -> None:
    config = KafkaClientConfig(
        bootstrap_servers="b1.example.com:9093,b2.example.com:9093",
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        credentials={"username": "inlet", "password": "s3cr3t-pw"},
        ssl={"ca_pem": CA, "certificate_pem": CA, "key_pem": KEY, "key_password": "kp-secret", "endpoint_identification": True},
        options={"client.rack": "eu-west-1a", "socket.keepalive.enable": True},
    )
    assert config.librdkafka_config() == {
        "bootstrap.servers": "b1.example.com:9093,b2.example.com:9093",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "inlet",
        "sasl.password": "s3cr3t-pw",
        "ssl.ca.pem": CA,
        "ssl.certificate.pem": CA,
        "ssl.key.pem": KEY,
        "ssl.key.password": "kp-secret",
        "ssl.endpoint.identification.algorithm": "https",
        "client.rack": "eu-west-1a",
        "socket.keepalive.enable": "true",
    }
    redacted = config.redacted()
    assert redacted["sasl.password"] == redacted["ssl.key.pem"] == redacted["ssl.key.password"] == "[redacted]"
    assert redacted["ssl.ca.pem"] == f"<PEM, {len(CA)} chars>"
    for text in (str(redacted), repr(config)):
        assert "s3cr3t-pw" not in text and "kp-secret" not in text and "secretkey" not in text


def test_oauthbearer_config_uses_oidc_client_credentials() -> None:
    config = KafkaClientConfig(
        bootstrap_servers="kafka:9092",
        security_protocol="SASL_SSL",
        sasl_mechanism="OAUTHBEARER",
        credentials={"client_id": "inlet", "client_secret": "oauth-secret", "token_endpoint_url": "https://idp/token", "scope": "kafka"},
    )
    conf = config.librdkafka_config()
    assert {k: v for k, v in conf.items() if k.startswith("sasl.")} == {
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.client.id": "inlet",
        "sasl.oauthbearer.client.secret": "oauth-secret",
        "sasl.oauthbearer.token.endpoint.url": "https://idp/token",
        "sasl.oauthbearer.scope": "kafka",
    }
    assert config.redacted()["sasl.oauthbearer.client.secret"] == "[redacted]"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"bootstrap_servers": "no-port"}, "host:port"),
        ({"security_protocol": "SASL_SSL"}, "needs sasl_mechanism"),
        ({"sasl_mechanism": "PLAIN"}, "only valid with SASL"),
        ({"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN", "credentials": {"username": "u"}}, "password"),
        ({"ssl": {"ca_pem": CA}}, "only valid with SSL"),
        ({"security_protocol": "SSL", "ssl": {"key_pem": KEY}}, "both certificate_pem and key_pem"),
        ({"options": {"ssl.ca.location": "/etc/passwd", "plugin.library.paths": "x", "client.id": "ok"}}, "plugin.library.paths, ssl.ca.location"),
        ({"options": {"group.id": "g"}}, "not allowed: group.id"),
    ],
)
def test_invalid_configs_are_refused_with_the_reason(kwargs, message) -> None:
    with pytest.raises(KafkaConfigError, match=message) as caught:
        KafkaClientConfig(**{"bootstrap_servers": "kafka:9092", **kwargs})
    assert caught.value.kind == "config"


def test_allow_list_keeps_out_files_plugins_and_security_settings() -> None:
    assert not any(
        key.endswith(".location") or key.startswith(("plugin.", "security.", "sasl.username", "sasl.password", "ssl.key"))
        for key in ALLOWED_CLIENT_OPTIONS
    )
    assert {"group.id", "enable.auto.commit", "auto.offset.reset", "bootstrap.servers", "debug"}.isdisjoint(ALLOWED_CLIENT_OPTIONS)


@pytest.fixture
def client(sandbox_kafka):
    with KafkaClient(KafkaClientConfig(sandbox_kafka.bootstrap_servers), egress=LOOPBACK_ALLOWED, timeout_s=3) as kafka:
        yield kafka


def test_topics_and_pattern_resolution(client, kafka_topic) -> None:
    orders = kafka_topic(partitions=6, prefix="orders")
    refunds = kafka_topic(partitions=2, prefix="orders-refunds")
    kafka_topic(partitions=1, prefix="payments")

    topics = client.list_topics()
    assert topics[orders] == 6 and topics[refunds] == 2
    assert partitions_to_read(client.list_topics(), kafka_source(topics=[orders])) == [(orders, p) for p in range(6)]
    matched = partitions_to_read(client.list_topics(), kafka_source(topic_pattern=r"orders-[0-9a-f]{12}"))
    assert matched == [(orders, p) for p in range(6)]  # whole-name match: orders-refunds-… is not taken
    with pytest.raises(TopicNotFound) as caught:
        partitions_to_read(client.list_topics(), kafka_source(topics=[orders, "missing-topic"]))
    assert caught.value.names == ["missing-topic"] and caught.value.kind == "not_found"


def test_watermarks_follow_produce_and_retention(client, sandbox_kafka, kafka_topic, kafka_faults) -> None:
    topic = kafka_topic(partitions=6)
    placed = produce_keyed(sandbox_kafka.bootstrap_servers, topic, 900)
    partitions = partitions_to_read(client.list_topics(), kafka_source(topics=[topic]))

    assert client.watermarks(partitions) == {(topic, p): (0, len(placed.get(p, []))) for p in range(6)}

    busiest = max(placed, key=lambda p: len(placed[p]))
    kafka_faults.delete_records(topic, busiest, 25)
    assert client.watermarks([(topic, busiest)]) == {(topic, busiest): (25, len(placed[busiest]))}
    with pytest.raises(TopicNotFound, match=rf"{topic}\[6\]"):
        client.watermarks([(topic, 0), (topic, 6)])


def test_timestamp_lookup_raises_instead_of_guessing(client, sandbox_kafka, kafka_topic) -> None:
    """The sandbox cannot serve timestamp lookups: it answers -1 for every partition.

    On a real broker the same call returns offsets (covered nowhere here); what this test pins is
    that a -1 answer becomes ``TimestampNotResolvable`` naming the partitions, never an offset.
    """
    topic = kafka_topic(partitions=3)
    produce_keyed(sandbox_kafka.bootstrap_servers, topic, 30)
    with pytest.raises(TimestampNotResolvable) as caught:
        client.offsets_for_timestamp([(topic, p) for p in range(3)], int(time.time() * 1000) - 60_000)
    assert caught.value.partitions == [(topic, 0), (topic, 1), (topic, 2)]
    assert caught.value.kind == "unresolvable"


def test_cluster_metadata_for_the_connection_test(client, sandbox_kafka) -> None:
    metadata = client.cluster_metadata()
    expected = [(int(i + 1), "127.0.0.1", int(hp.rsplit(":", 1)[1])) for i, hp in enumerate(sandbox_kafka.bootstrap_servers.split(","))]
    assert [(b.id, b.host, b.port) for b in metadata.brokers] == expected
    assert metadata.topic_count == len(client.list_topics())
    assert 0 <= metadata.latency_ms < 3000


def test_a_down_broker_names_the_partitions_it_leads(client, kafka_topic, kafka_faults) -> None:
    topic = kafka_topic(partitions=6)
    partitions = partitions_to_read(client.list_topics(), kafka_source(topics=[topic]))
    client.watermarks(partitions)
    kafka_faults.broker_down(2)

    with pytest.raises(KafkaUnavailable) as caught:
        client.watermarks(partitions)
    assert caught.value.kind == "no_leader"
    led_by_2 = [p for p in range(6) if f"{topic}[{p}]" in caught.value.message]
    assert 0 < len(led_by_2) < 6  # the other brokers' partitions answered


def test_all_brokers_down_is_refused_within_the_timeout(sandbox_kafka, kafka_faults) -> None:
    kafka_faults.broker_down(-1)
    started = time.monotonic()
    with KafkaClient(KafkaClientConfig(sandbox_kafka.bootstrap_servers), egress=LOOPBACK_ALLOWED, timeout_s=1) as kafka, pytest.raises(KafkaUnavailable) as caught:
        kafka.cluster_metadata()
    assert caught.value.kind == "refused"
    assert "Connection refused" in caught.value.message
    assert time.monotonic() - started < 2


def test_unknown_host_is_a_dns_error() -> None:
    with KafkaClient(KafkaClientConfig("no-such-broker.invalid:9092"), egress=LOOPBACK_ALLOWED, timeout_s=1) as kafka, pytest.raises(KafkaUnavailable) as caught:
        kafka.list_topics()
    assert caught.value.kind == "dns"
    assert "no-such-broker.invalid" in caught.value.message


def test_authorization_errors_are_typed(client, kafka_topic, kafka_faults) -> None:
    topic = kafka_topic(partitions=1)
    kafka_faults.request_errors("ListOffsets", ["TOPIC_AUTHORIZATION_FAILED"] * 2)
    with pytest.raises(KafkaAuthError) as caught:
        client.watermarks([(topic, 0)])
    assert caught.value.kind == "auth"


def test_errors_never_carry_credentials() -> None:
    config = KafkaClientConfig(
        bootstrap_servers="127.0.0.1:1",
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        credentials={"username": "svc", "password": "hunter2-very-secret"},
    )
    with KafkaClient(config, egress=LOOPBACK_ALLOWED, timeout_s=1) as kafka, pytest.raises(KafkaUnavailable) as caught:
        kafka.cluster_metadata()
    assert caught.value.kind == "refused"
    assert "hunter2" not in str(caught.value)
    # And if librdkafka ever echoed one, it is scrubbed.
    assert kafka._scrub("auth failed for password hunter2-very-secret") == "auth failed for password [redacted]"


def test_a_cluster_refusing_sasl_is_an_auth_error_at_once_not_after_the_timeout(sandbox_kafka: SandboxKafka) -> None:
    # librdkafka retries a refused authentication and tells only error_cb (the sandbox serves no SASL
    # handshake at all, an OAUTHBEARER broker refuses a token alike): the client watches error_cb.
    config = KafkaClientConfig(sandbox_kafka.bootstrap_servers, security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                               credentials={"username": "ingest", "password": "sasl-Secret-9f2"})
    began = time.monotonic()
    with KafkaClient(config, egress=LOOPBACK_ALLOWED, timeout_s=5) as kafka, pytest.raises(KafkaAuthError) as caught:
        kafka.cluster_metadata()
    assert time.monotonic() - began < 2
    host = re.search(r"sasl_plaintext://([^/]+)/", caught.value.message)
    assert host is not None and host.group(1) in sandbox_kafka.bootstrap_servers.split(","), caught.value.message
    assert (caught.value.kind, re.sub(r"after \d+ms", "after Nms", caught.value.message)) == (
        "auth", (f"metadata request: sasl_plaintext://{host.group(1)}/bootstrap: Failed to initialize SASL authentication: SASL "
                 "Handshake not supported by broker (required by mechanism PLAIN) (after Nms in state AUTH_LEGACY)"))
