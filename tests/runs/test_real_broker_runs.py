"""Runs on a real Apache Kafka broker: HTTP API → Redis → Celery worker → spark-submit → Delta.

A SASL_SSL/SCRAM-SHA-512 connection carries the run (the executors authenticate exactly as the
control plane's connection test does), then a ``to_timestamp`` replay in replace mode, which the
sandbox cannot serve, leaves every record exactly once. Then the broker is stopped in the middle of
a run and started again: the run is retried and the table still holds every record exactly once.
Last, pipelines that start from a point in time (``starting_timestamp``), and a Kafka target whose
topic is missing: a clear failure, or created as the pipeline asks; and refused credentials."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from confluent_kafka import Producer

from api.kafka.client import KafkaClient
from api.kafka.config import KafkaClientConfig
from api.ledger.positions import partitions_to_read
from tests.factories import LOOPBACK_ALLOWED, create_pipeline, kafka_source, make_tenant, plaintext_connection_body
from tests.fixtures.kafka import produce_keyed
from tests.fixtures.kafka_broker import PASSWORD, USER
from tests.runs.helpers import committed_offsets, delta_coordinates, wait_for_run

pytestmark = pytest.mark.slow


def _produce(real_kafka, topic: str, partitions: int, per_partition: int, base_ms: int, step_ms: int) -> None:
    """``per_partition`` records into each partition, the i-th stamped ``base_ms + i * step_ms``."""
    producer = Producer({"bootstrap.servers": real_kafka.bootstrap_servers, "acks": "all", "enable.idempotence": True})
    for p in range(partitions):
        for i in range(per_partition):
            producer.produce(topic, key=f"k{i}".encode(), value=f'{{"p": {p}, "i": {i}}}'.encode(), partition=p,
                             timestamp=base_ms + i * step_ms)
    assert producer.flush(30) == 0


def _sasl_ssl(real_kafka, mechanism: str, password: str) -> dict[str, Any]:
    return {"name": "secured", "bootstrap_servers": real_kafka.bootstrap("SASL_SSL"), "security_protocol": "SASL_SSL",
            "sasl_mechanism": mechanism, "credentials": {"username": USER, "password": password},
            "ssl": {"ca_pem": real_kafka.ca.pem}}


def _run(stack, tenant, pipeline: dict[str, Any]) -> dict[str, Any]:
    triggered = stack.client.post(f"/pipelines/{pipeline['id']}/runs", headers=tenant.editor)
    assert triggered.status_code == 202, triggered.text
    done = wait_for_run(stack, triggered.json()["id"], tenant.viewer)
    assert done["state"] == "succeeded", (done, stack.log_text())
    return done


def test_a_sasl_ssl_run_then_a_timestamp_replay_keep_every_record_once(stack, real_kafka, real_topic) -> None:
    topic = real_topic(partitions=2)
    base = int(time.time() * 1000) - 3_600_000
    _produce(real_kafka, topic, 2, 20, base, 60_000)  # one record a minute for 20 minutes, per partition
    client = stack.client
    tenant = make_tenant(client)
    conn = client.post("/connections", headers=tenant.editor, json=_sasl_ssl(real_kafka, "SCRAM-SHA-512", PASSWORD))
    assert conn.status_code == 201, conn.text
    pipeline = create_pipeline(client, tenant, conn.json()["id"], schedule=None, state="paused",
                               source={"connection_id": conn.json()["id"], "topics": [topic], "value_format": "string"},
                               target={"type": "delta", "path": "bronze/real-sasl-ssl"})
    stack.start_worker()

    first = _run(stack, tenant, pipeline)
    uri = pipeline["status"]["target_uri"]
    once = sorted((topic, p, o) for p in range(2) for o in range(20))
    assert (first["records_read"], delta_coordinates(uri)) == (40, once)

    # Replay from minute 15: the broker resolves the time to offset 15 of each partition.
    offsets = f"/pipelines/{pipeline['id']}/offsets"
    since = datetime.fromtimestamp((base + 15 * 60_000) / 1000, UTC).isoformat()
    dry = client.patch(offsets, headers=tenant.editor, json={"to_timestamp": since, "replay_mode": "replace", "dry_run": True})
    assert dry.status_code == 200, dry.text
    assert [(r["partition"], r["before"], r["after"]) for r in dry.json()["rows"]] == [(0, 20, 15), (1, 20, 15)]
    assert committed_offsets(stack.settings.resolved_database_url, pipeline["id"]) == {(topic, 0): 20, (topic, 1): 20}
    replay = client.patch(offsets, headers=tenant.editor, json={"to_timestamp": since, "replay_mode": "replace"})
    assert replay.status_code == 200, replay.text

    second = _run(stack, tenant, pipeline)
    assert second["records_read"] == 10 and second["replace_ranges"] == {topic: {"0": [15, 20], "1": [15, 20]}}
    assert delta_coordinates(uri) == once
    log = client.get(f"/runs/{second['id']}/log", headers=tenant.viewer).text
    assert PASSWORD not in log + str(second)


def test_a_broker_restart_mid_run_loses_and_duplicates_nothing(stack, real_kafka, real_topic) -> None:
    topic = real_topic(partitions=3)
    _produce(real_kafka, topic, 3, 200, int(time.time() * 1000), 1)
    client = stack.client
    tenant = make_tenant(client)
    conn = client.post("/connections", json=plaintext_connection_body(real_kafka.bootstrap_servers), headers=tenant.editor)
    pipeline = create_pipeline(client, tenant, conn.json()["id"], schedule=None, state="paused",
                               source={"connection_id": conn.json()["id"], "topics": [topic], "value_format": "string"},
                               target={"type": "delta", "path": "bronze/real-restart"})
    stack.start_worker()
    run_id = client.post(f"/pipelines/{pipeline['id']}/runs", headers=tenant.editor).json()["id"]

    def planned_and_running() -> bool:
        run = client.get(f"/runs/{run_id}", headers=tenant.viewer).json()
        return run["state"] == "running" and run["partitions"] is not None

    def retried_or_over() -> bool:
        run = client.get(f"/runs/{run_id}", headers=tenant.viewer).json()
        return run["attempt"] >= 2 or run["state"] not in ("queued", "running")

    stack.wait_for(planned_and_running, timeout_s=60, every_s=0.1, what="the run to be planned and launched")
    real_kafka.stop()
    # The broker stays down until the attempt has failed (its job waits 30 s for a broker from when it
    # first asks, later on a busy machine) and the run is retried: a fixed pause raced the job's start.
    stack.wait_for(retried_or_over, timeout_s=240, every_s=0.5, what="the attempt to fail and the run to be retried")
    real_kafka.start()

    run = wait_for_run(stack, run_id, tenant.viewer)
    assert run["state"] == "succeeded", (run, stack.log_text())
    assert run["attempt"] >= 2, run  # retried after the broker came back
    assert delta_coordinates(pipeline["status"]["target_uri"]) == sorted((topic, p, o) for p in range(3) for o in range(200))
    assert committed_offsets(stack.settings.resolved_database_url, pipeline["id"]) == {(topic, p): 200 for p in range(3)}


def test_a_pipeline_starts_from_a_point_in_time(stack, real_kafka, real_topic) -> None:
    topic = real_topic(partitions=2)
    base = int(time.time() * 1000) - 3_600_000
    _produce(real_kafka, topic, 2, 20, base, 60_000)
    client = stack.client
    tenant = make_tenant(client)
    conn = client.post("/connections", json=plaintext_connection_body(real_kafka.bootstrap_servers), headers=tenant.editor)
    at = lambda minute: datetime.fromtimestamp((base + minute * 60_000) / 1000, UTC).isoformat()  # noqa: E731

    def pipeline(name: str, **source: Any) -> dict[str, Any]:
        return create_pipeline(client, tenant, conn.json()["id"], name=name, schedule=None, state="paused",
                               source={"connection_id": conn.json()["id"], "topics": [topic], "value_format": "string",
                                       **source}, target={"type": "delta", "path": f"bronze/{name}"})

    stack.start_worker()
    since = pipeline("since-minute-15", starting_timestamp=at(15))
    first = _run(stack, tenant, since)
    assert {(p["partition"], p["start"], p["end"]) for p in first["partitions"]} == {(0, 15, 20), (1, 15, 20)}
    assert delta_coordinates(since["status"]["target_uri"]) == sorted((topic, p, o) for p in range(2) for o in range(15, 20))

    # After every record: an error naming the partitions, or (asked for) the latest offset, kept from then on.
    strict = pipeline("strict", starting_timestamp=at(30))
    failed = wait_for_run(stack, client.post(f"/pipelines/{strict['id']}/runs", headers=tenant.editor).json()["id"],
                          tenant.viewer)
    assert (failed["state"], failed["attempt"], failed["error"]["kind"]) == ("failed", 1, "kafka_unresolvable"), failed
    assert f"{topic}[0], {topic}[1]" in failed["error"]["message"]
    lenient = pipeline("lenient", starting_timestamp=at(30), starting_timestamp_strategy="latest")
    skipped = wait_for_run(stack, client.post(f"/pipelines/{lenient['id']}/runs", headers=tenant.editor).json()["id"],
                           tenant.viewer)
    assert skipped["state"] == "skipped", skipped
    assert committed_offsets(stack.settings.resolved_database_url, lenient["id"]) == {(topic, 0): 20, (topic, 1): 20}
    _produce(real_kafka, topic, 2, 3, int(time.time() * 1000), 1)
    later = _run(stack, tenant, lenient)
    assert {(p["partition"], p["start"], p["end"]) for p in later["partitions"]} == {(0, 20, 23), (1, 20, 23)}


def test_a_kafka_target_topic_is_created_only_when_the_pipeline_asks(stack, real_kafka, real_topic) -> None:
    source_topic = real_topic(partitions=2)
    produce_keyed(real_kafka.bootstrap_servers, source_topic, 40)
    client = stack.client
    tenant = make_tenant(client)
    conn = client.post("/connections", json=plaintext_connection_body(real_kafka.bootstrap_servers), headers=tenant.editor)
    missing, wanted = (f"copy-{uuid.uuid4().hex[:8]}" for _ in range(2))

    def forward(name: str, **target: Any) -> dict[str, Any]:
        return create_pipeline(client, tenant, conn.json()["id"], name=name, schedule=None, state="paused",
                               source={"connection_id": conn.json()["id"], "topics": [source_topic], "value_format": "raw"},
                               target={"type": "kafka", "connection_id": conn.json()["id"], **target})

    stack.start_worker()
    strict = forward("strict", topic=missing)
    failed = wait_for_run(stack, client.post(f"/pipelines/{strict['id']}/runs", headers=tenant.editor).json()["id"],
                          tenant.viewer)
    assert (failed["state"], failed["attempt"]) == ("failed", 1), failed
    assert failed["error"]["kind"] == "kafka_target_missing"
    assert failed["error"]["message"] == (
        f"the target topic {missing} does not exist on {real_kafka.bootstrap_servers}: create it, or let Inlet "
        "create it with target.create_topic")

    creating = forward("creating", topic=wanted, create_topic={"partitions": 2, "config": {"retention.ms": "3600000"}})
    try:
        done = _run(stack, tenant, creating)
        assert done["records_read"] == 40
        with KafkaClient(KafkaClientConfig(real_kafka.bootstrap_servers), egress=LOOPBACK_ALLOWED, timeout_s=10) as kafka:
            assert partitions_to_read(kafka.list_topics(), kafka_source(topics=[wanted])) == [(wanted, 0), (wanted, 1)]
            assert sum(high - low for low, high in kafka.watermarks([(wanted, 0), (wanted, 1)]).values()) == 40
        configs = real_kafka.tool("kafka-configs.sh", "--describe", "--entity-type", "topics", "--entity-name", wanted)
        assert "retention.ms=3600000" in configs
        assert missing not in real_kafka.tool("kafka-topics.sh", "--list").split()
    finally:
        real_kafka.delete_topic(wanted)


def test_refused_credentials_fail_a_run_at_once_and_quietly(stack, real_kafka, real_topic) -> None:
    topic = real_topic(partitions=1)
    wrong = "not-" + PASSWORD
    client = stack.client
    tenant = make_tenant(client)
    conn = client.post("/connections", headers=tenant.editor, json=_sasl_ssl(real_kafka, "SCRAM-SHA-256", wrong))
    pipeline = create_pipeline(client, tenant, conn.json()["id"], schedule=None, state="paused",
                               source={"connection_id": conn.json()["id"], "topics": [topic], "value_format": "raw"},
                               target={"type": "delta", "path": "bronze/refused"})
    stack.start_worker()
    run = wait_for_run(stack, client.post(f"/pipelines/{pipeline['id']}/runs", headers=tenant.editor).json()["id"],
                       tenant.viewer)
    assert (run["state"], run["attempt"], run["error"]["kind"]) == ("failed", 1, "kafka_auth"), run  # not retried
    assert "SCRAM-SHA-256" in run["error"]["message"]
    log = client.get(f"/runs/{run['id']}/log", headers=tenant.viewer).text
    assert wrong not in str(run) + log + stack.log_text()
