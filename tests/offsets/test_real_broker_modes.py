"""Every way of moving offsets, resolved through the API against a real Kafka broker: explicit
offsets, earliest, latest, ``to_timestamp``, ``by_duration``, ``shift_by`` and the reset to the
starting position, as dry runs (what the real call would do) and one applied change."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from confluent_kafka import Producer

from tests.factories import create_sandbox_pipeline


def test_every_mode_resolves_on_a_real_broker(client, tenant, real_kafka, real_topic) -> None:
    topic = real_topic(partitions=2)
    now_ms = int(time.time() * 1000)
    base = now_ms - 100 * 60_000  # partition 0: one record a minute from 100 minutes ago; partition 1: half as many
    producer = Producer({"bootstrap.servers": real_kafka.bootstrap_servers, "acks": "all"})
    for p, count in ((0, 100), (1, 50)):
        for i in range(count):
            producer.produce(topic, value=b"x", partition=p, timestamp=base + i * 60_000 * (2 if p else 1))
    assert producer.flush(30) == 0
    real_kafka.delete_records(topic, 1, 5)  # partition 1 now starts at 5
    pipeline = create_sandbox_pipeline(client, tenant, real_kafka.bootstrap_servers, [topic])
    offsets = f"/pipelines/{pipeline['id']}/offsets"

    def dry(**body: object) -> list[tuple[int, int | None, int, bool]]:
        response = client.patch(offsets, json={**body, "dry_run": True}, headers=tenant.editor)
        assert response.status_code == 200, response.text
        return [(r["partition"], r["before"], r["after"], r["clamped"]) for r in response.json()["rows"]]

    assert dry(offsets=[{"topic": topic, "partition": 0, "offset": 42}]) == [(0, None, 42, False)]
    assert dry(reset="earliest") == [(0, None, 0, False), (1, None, 5, False)]
    assert dry(reset="latest") == [(0, None, 100, False), (1, None, 50, False)]
    assert dry(to_timestamp=datetime.fromtimestamp((base + 30 * 60_000) / 1000, UTC).isoformat()) == [
        (0, None, 30, False), (1, None, 15, False)]
    assert dry(by_duration="PT40M30S", partitions=[0]) == [(0, None, 60, False)]  # a record a minute, 40.5 min back
    assert dry(shift_by=-3, clamp=True) == [(0, None, 0, True), (1, None, 5, True)]  # from earliest, clamped

    applied = client.patch(offsets, json={"reset": "latest"}, headers=tenant.editor)
    assert applied.status_code == 200, applied.text
    assert dry(shift_by=-10) == [(0, 100, 90, False), (1, 50, 40, False)]
    reset = client.delete(offsets, params={"dry_run": "true"}, headers=tenant.editor)
    assert [(r["partition"], r["after"]) for r in reset.json()["rows"]] == [(0, 0), (1, 5)]  # starting_offsets: earliest
    shown = client.get(offsets, headers=tenant.viewer).json()
    assert [(p["committed"], p["earliest"], p["latest"], p["lag"]) for p in shown["partitions"]] == [
        (100, 0, 100, 0), (50, 5, 50, 0)]
