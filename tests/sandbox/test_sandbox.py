"""The sandbox Kafka itself: the ctypes cluster, its CLI and control interface, the event trickle."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient

from sandbox import SandboxCluster, SandboxError
from sandbox.control import SandboxControlClient
from sandbox.sample_events import produce_sample_events
from tests.fixtures.kafka import REPO_ROOT, produce_keyed, read_range, start_sandbox_process, stop_sandbox_process


def _port_open(bootstrap: str) -> bool:
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex((host, int(port))) == 0


def test_in_process_cluster_serves_kafka_and_closes_its_ports() -> None:
    with SandboxCluster(brokers=2) as cluster:
        cluster.create_topic("in-process", 3, replication=2)
        metadata = AdminClient({"bootstrap.servers": cluster.bootstrap_servers}).list_topics(timeout=5)
        assert sorted(metadata.brokers) == [1, 2]
        assert sorted(metadata.topics["in-process"].partitions) == [0, 1, 2]
        placed = produce_keyed(cluster.bootstrap_servers, "in-process", 30, key=lambda i: "same")
        assert list(placed.values()) == [list(range(30))]
        with pytest.raises(SandboxError, match="Topic already exists"):
            cluster.create_topic("in-process", 3)
        with pytest.raises(ValueError, match="broker id must be 1..2"):
            cluster.broker_down(3)
        bootstrap = cluster.bootstrap_servers
        assert _port_open(bootstrap)
    assert not cluster.running
    assert not _port_open(bootstrap)


def test_keyed_messages_read_back_as_exact_offset_ranges(sandbox_kafka, kafka_topic) -> None:
    topic = kafka_topic(partitions=6)
    placed = produce_keyed(sandbox_kafka.bootstrap_servers, topic, 1200, key=lambda i: f"customer-{i % 40}")

    assert sorted(placed) == [0, 1, 2, 3, 4, 5]
    assert sum(len(offsets) for offsets in placed.values()) == 1200
    keys_by_partition = {}
    for partition, offsets in placed.items():
        assert offsets == list(range(len(offsets)))  # dense, from 0
        messages = read_range(sandbox_kafka.bootstrap_servers, topic, partition, 10, 30)
        assert [m.offset() for m in messages] == list(range(10, 30))
        whole = read_range(sandbox_kafka.bootstrap_servers, topic, partition, 0, len(offsets))
        keys_by_partition[partition] = {m.key() for m in whole}
    # A key never straddles partitions: the partitioner is deterministic per key.
    assert sum(len(keys) for keys in keys_by_partition.values()) == 40


def test_delete_records_moves_earliest_offset_and_a_read_below_it_fails(sandbox_kafka, kafka_topic, kafka_faults) -> None:
    topic = kafka_topic(partitions=2)
    placed = produce_keyed(sandbox_kafka.bootstrap_servers, topic, 100, key=lambda i: "one-key")
    (partition, _), = placed.items()

    kafka_faults.delete_records(topic, partition, 40)

    consumer = Consumer({"bootstrap.servers": sandbox_kafka.bootstrap_servers, "group.id": "wm", "auto.offset.reset": "error"})
    try:
        assert consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=5) == (40, 100)
        consumer.assign([TopicPartition(topic, partition, 10)])
        msg = consumer.poll(5)
        assert msg is not None and msg.error() is not None
        assert msg.error().code() == KafkaError._AUTO_OFFSET_RESET
    finally:
        consumer.close()
    assert [m.offset() for m in read_range(sandbox_kafka.bootstrap_servers, topic, partition, 40, 45)] == [40, 41, 42, 43, 44]


def test_control_interface_reports_refusals(sandbox_kafka, kafka_topic) -> None:
    topic = kafka_topic(partitions=1)
    assert sandbox_kafka.status() == {"bootstrap_servers": sandbox_kafka.bootstrap_servers, "brokers": 3}
    with pytest.raises(SandboxError, match="create-topic: create topic: Broker: Topic already exists"):
        sandbox_kafka.create_topic(topic, 1)
    with pytest.raises(SandboxError, match="Offset out of range"):
        sandbox_kafka.delete_records(topic, 0, 5)
    with pytest.raises(SandboxError, match="unknown Kafka error name 'NOPE'"):
        sandbox_kafka.push_request_errors("Fetch", ["NOPE"])


def _inlet(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli.main", "sandbox-kafka", *args], cwd=REPO_ROOT, check=False, capture_output=True, text=True, timeout=30
    )


def test_cli_serves_until_sigterm_and_acts_through_the_state_file(tmp_path) -> None:
    state_file = tmp_path / "sandbox.state"
    process, bootstrap = start_sandbox_process(state_file, brokers=1, extra_args=["--topic", "orders:2"])
    try:
        lines = state_file.read_text().splitlines()
        assert lines[0] == bootstrap and bootstrap.startswith("127.0.0.1:")
        assert lines[1].startswith("http://127.0.0.1:")

        created = _inlet("create-topic", "payments", "--partitions", "5", "--state-file", str(state_file))
        assert created.returncode == 0, created.stderr
        topics = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=5).topics
        assert len(topics["orders"].partitions) == 2 and len(topics["payments"].partitions) == 5

        again = _inlet("create-topic", "payments", "--partitions", "5", "--state-file", str(state_file))
        assert again.returncode == 1 and "Topic already exists" in again.stderr
        assert json.loads(_inlet("status", "--state-file", str(state_file)).stdout)["brokers"] == 1
        second = _inlet("serve", "--state-file", str(state_file))
        assert second.returncode == 1 and "already running" in second.stderr
    finally:
        assert stop_sandbox_process(process) == 0
    assert not state_file.exists()
    assert _inlet("status", "--state-file", str(state_file)).returncode == 1


def test_cli_without_serve_keyword_starts_the_sandbox(tmp_path) -> None:
    """The documented form ``inlet sandbox-kafka --brokers N ...`` goes through cli.main's parser."""
    state_file, stderr = tmp_path / "bare.state", tmp_path / "stderr"
    # Its stderr goes to a file: a pipe nobody reads until the end could fill and hold the process.
    with stderr.open("w") as err:
        process = subprocess.Popen(
            [sys.executable, "-m", "cli.main", "sandbox-kafka", "--brokers", "1", "--state-file", str(state_file)],
            cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=err, text=True,
        )
    first_line = process.stdout.readline().strip()
    if not first_line:
        process.wait(10)
        pytest.fail(f"inlet sandbox-kafka --brokers 1 ... exited with {process.returncode}: {stderr.read_text()}")
    assert first_line.startswith("127.0.0.1:")
    process.send_signal(signal.SIGINT)
    try:
        process.wait(30)  # 0.6 s here; CI's once took more than 10 s
    except subprocess.TimeoutExpired:
        process.kill()
        pytest.fail(f"inlet sandbox-kafka did not stop within 30 s of SIGINT: {stderr.read_text()}")
    assert process.returncode == 0, stderr.read_text()
    assert not state_file.exists()


def test_sample_events_are_keyed_json_order_events(sandbox_kafka, kafka_topic) -> None:
    topic = kafka_topic(partitions=3)
    produced = produce_sample_events(
        sandbox_kafka.bootstrap_servers, topic, rate_per_s=2000, stop_event=threading.Event(), max_events=120, seed=7
    )
    assert produced == 120

    consumer = Consumer({"bootstrap.servers": sandbox_kafka.bootstrap_servers, "group.id": "sample", "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(3)])
        messages = []
        while len(messages) < 120:
            batch = consumer.consume(120, 5)
            assert batch, f"only {len(messages)} events read"
            messages += batch
    finally:
        consumer.close()
    events = [json.loads(m.value()) for m in messages]
    assert all(m.key().decode() == e["order_id"] for m, e in zip(messages, events, strict=True))
    assert all(dict(m.headers())["event_type"].decode() == e["event_type"] for m, e in zip(messages, events, strict=True))
    assert {e["event_type"] for e in events} >= {"order_created", "order_paid"}
    assert {"event_id", "occurred_at", "customer_id", "currency", "total", "items"} <= set(events[0])
    # One order's events share a partition and arrive in lifecycle order.
    lifecycle = ["order_created", "order_paid", "order_shipped", "order_delivered"]
    by_order: dict[str, list[tuple[int, str]]] = {}
    for m, e in zip(messages, events, strict=True):
        by_order.setdefault(e["order_id"], []).append((m.partition(), e["event_type"]))
    for history in by_order.values():
        assert len({p for p, _ in history}) == 1
        types = [t for _, t in history if t != "order_cancelled"]
        assert types == lifecycle[: len(types)]


def test_trickle_command_produces_to_a_running_sandbox(sandbox_kafka, kafka_topic) -> None:
    topic = kafka_topic(partitions=2)
    result = _inlet("trickle", "--topic", topic, "--rate", "500", "--count", "25", "--state-file", str(sandbox_kafka.state_file))
    assert result.returncode == 0, result.stderr
    client = SandboxControlClient.from_state_file(sandbox_kafka.state_file)
    consumer = Consumer({"bootstrap.servers": client.bootstrap_servers, "group.id": "trickle"})
    try:
        total = sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1] for p in range(2))
    finally:
        consumer.close()
    assert total == 25
