"""What the sandbox cannot answer, through Terraform on a real Kafka broker: a replay to a point in
time (the sandbox serves no timestamp lookups), in replace mode so the replayed rows replace the
ones already written instead of duplicating them."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from confluent_kafka import Producer
from fastapi.testclient import TestClient

from tests.factories import Tenant
from tests.fixtures.kafka_broker import RealKafka
from tests.fixtures.terraform import Terraform

pytestmark = [pytest.mark.slow]


def config(bootstrap: str, topic: str, change: str) -> str:
    return f"""
resource "inlet_connection" "real" {{
  name              = "real"
  bootstrap_servers = "{bootstrap}"
}}

resource "inlet_pipeline" "events" {{
  name   = "events"
  source = {{ connection_id = inlet_connection.real.id, topics = ["{topic}"] }}
  target = {{ delta = {{ path = "bronze/events" }} }}
  state  = "paused"
}}

resource "inlet_pipeline_offsets" "events" {{
  pipeline_id = inlet_pipeline.events.id
  {change}
  depends_on  = [inlet_pipeline.events]
}}
"""


def test_a_replay_to_a_point_in_time_replaces_what_was_written(
    terraform: Terraform, client: TestClient, tenant: Tenant, real_kafka: RealKafka, real_topic: Callable[..., str],
) -> None:
    topic = real_topic(partitions=2)
    base_ms = int(time.time() * 1000) - 60 * 60_000  # one record a minute per partition, from an hour ago
    producer = Producer({"bootstrap.servers": real_kafka.bootstrap_servers, "acks": "all"})
    for partition in (0, 1):
        for i in range(10):
            producer.produce(topic, value=b"x", partition=partition, timestamp=base_ms + i * 60_000)
    assert producer.flush(30) == 0
    moment = datetime.fromtimestamp((base_ms + 6 * 60_000) / 1000, UTC).isoformat()

    terraform.write(config(real_kafka.bootstrap_servers, topic, 'reset = "latest"'))
    terraform.run("init")
    terraform.apply()
    terraform.write(config(real_kafka.bootstrap_servers, topic, f'to_timestamp = "{moment}"\n  replay_mode = "replace"'))
    terraform.apply()
    terraform.assert_no_changes()

    pipeline_id = terraform.resource("inlet_pipeline.events")["id"]
    shown = client.get(f"/pipelines/{pipeline_id}/offsets", headers=tenant.viewer).json()
    assert [(p["partition"], p["committed"], p["replay"]) for p in shown["partitions"]] == [
        (0, 6, [6, 10]), (1, 6, [6, 10])]  # the next runs replace the rows of offsets 6..9
    assert terraform.resource("inlet_pipeline_offsets.events")["committed"] == {f"{topic}:0": 6, f"{topic}:1": 6}
    terraform.run("destroy", "-auto-approve")
    assert client.get("/pipelines", headers=tenant.viewer).json()["items"] == []
