"""Lag that Kafka's own tools see: a pipeline's committed offsets mirrored to a consumer group
(``source.commit_to_group``, api/offsets/group_mirror.py), checked with the Kafka distribution's
``kafka-consumer-groups.sh`` on a real broker after a run, a replay and a refused copy, and gone with
the pipeline. Then, without a worker, what the API sends after which commit."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer

from tests.factories import create_pipeline, create_sandbox_pipeline, make_tenant, plaintext_connection_body
from tests.fixtures.dispatch import app, dispatcher  # noqa: F401  (this module's app records what it sends)
from tests.fixtures.kafka import produce_keyed
from tests.runs.helpers import committed_offsets, wait_for_run


def _describe(real_kafka, group: str) -> dict[tuple[str, int], tuple[int, int, int]]:
    """``{(topic, partition): (current offset, log end offset, lag)}`` as kafka-consumer-groups.sh shows them."""
    out = real_kafka.tool("kafka-consumer-groups.sh", "--describe", "--group", group)
    rows = {}
    for line in out.splitlines():
        cells = line.split()
        if len(cells) >= 6 and cells[0] == group and cells[2].isdigit():
            rows[(cells[1], int(cells[2]))] = (int(cells[3]), int(cells[4]), int(cells[5]))
    return rows


@pytest.mark.slow
def test_kafka_consumer_groups_shows_inlets_offsets_and_lag(stack, real_kafka, real_topic) -> None:
    topic = real_topic(partitions=3)
    placed = produce_keyed(real_kafka.bootstrap_servers, topic, 90)
    sizes = {p: len(placed.get(p, [])) for p in range(3)}
    group = f"inlet-orders-{uuid.uuid4().hex[:6]}"
    stack.env["INLET_GROUP_MIRROR_RETRY_S"] = "1"
    client = stack.client
    tenant = make_tenant(client)
    conn = client.post("/connections", json=plaintext_connection_body(real_kafka.bootstrap_servers), headers=tenant.editor)
    pipeline = create_pipeline(client, tenant, conn.json()["id"], schedule=None, state="paused",
                               source={"connection_id": conn.json()["id"], "topics": [topic], "value_format": "string",
                                       "commit_to_group": group}, target={"type": "delta", "path": "bronze/mirrored"})
    stack.start_worker()

    def run() -> dict[str, Any]:
        done = wait_for_run(stack, client.post(f"/pipelines/{pipeline['id']}/runs", headers=tenant.editor).json()["id"],
                            tenant.viewer)
        assert done["state"] == "succeeded", (done, stack.log_text())
        return done

    def mirrored(expected: dict[tuple[str, int], tuple[int, int, int]]) -> bool:
        return _describe(real_kafka, group) == expected

    run()
    stack.wait_for(lambda: mirrored({(topic, p): (n, n, 0) for p, n in sizes.items()}), timeout_s=60,
                   what="the group to show the run's offsets")
    status = client.get(f"/pipelines/{pipeline['id']}", headers=tenant.viewer).json()["status"]["consumer_group"]
    assert {k: status[k] for k in ("group", "state", "partitions", "error", "attempts")} == {
        "group": group, "state": "ok", "partitions": 3, "error": None, "attempts": 0}

    # A replay moves the group back too: Kafka's tools show the lag the next run will read.
    assert client.patch(f"/pipelines/{pipeline['id']}/offsets", json={"shift_by": -10, "clamp": True},
                        headers=tenant.editor).status_code == 200
    back = {(topic, p): (max(n - 10, 0), n, min(n, 10)) for p, n in sizes.items()}
    stack.wait_for(lambda: mirrored(back), timeout_s=60, what="the group to show the replay")
    assert {tp: c for tp, (c, _, _) in back.items()} == committed_offsets(stack.settings.resolved_database_url,
                                                                          pipeline["id"])

    # Someone else's consumer joins the group: the broker refuses the copy, the run does not fail,
    # and the copy is retried until the member has gone.
    member = Consumer({"bootstrap.servers": real_kafka.bootstrap_servers, "group.id": group,
                       "enable.auto.commit": False, "auto.offset.reset": "latest"})
    member.subscribe([topic])
    deadline = time.monotonic() + 30
    while not member.assignment() and time.monotonic() < deadline:
        member.poll(0.2)
    assert member.assignment(), "the outside consumer never joined the group"
    produce_keyed(real_kafka.bootstrap_servers, topic, 30, key=lambda i: f"later-{i}")
    try:
        assert run()["records_read"] == 60  # the 30 replayed and the 30 new

        def refused() -> dict[str, Any] | None:
            state = client.get(f"/pipelines/{pipeline['id']}", headers=tenant.viewer).json()["status"]["consumer_group"]
            return state if state["state"] == "failed" else None

        failed = stack.wait_for(refused, timeout_s=60, what="the copy to be refused")
        assert failed["attempts"] >= 1 and failed["error"]
    finally:
        member.close()
    latest = committed_offsets(stack.settings.resolved_database_url, pipeline["id"])
    stack.wait_for(lambda: {tp: c for tp, (c, _, _) in _describe(real_kafka, group).items()} == latest, timeout_s=90,
                   what="the retried copy once the member left")

    assert client.delete(f"/pipelines/{pipeline['id']}", headers=tenant.editor).status_code == 204
    stack.wait_for(lambda: group not in real_kafka.tool("kafka-consumer-groups.sh", "--list").split(), timeout_s=60,
                   what="the group to be deleted with its pipeline")


def test_only_committed_changes_of_mirrored_pipelines_send_a_copy(client, tenant, dispatcher, sandbox_kafka,  # noqa: F811 (the fixture imported above)
                                                                  kafka_topic) -> None:
    topic = kafka_topic(partitions=2)
    produce_keyed(sandbox_kafka.bootstrap_servers, topic, 20)
    mirrored = create_sandbox_pipeline(client, tenant, sandbox_kafka.bootstrap_servers, [topic],
                                       source={"commit_to_group": "inlet-mirrored"})
    plain = create_sandbox_pipeline(client, tenant, sandbox_kafka.bootstrap_servers, [topic])

    def patch(pipeline: dict[str, Any], **body: Any) -> None:
        response = client.patch(f"/pipelines/{pipeline['id']}/offsets", json={"reset": "latest", **body},
                                headers=tenant.editor)
        assert response.status_code == 200, response.text

    patch(mirrored, dry_run=True)
    patch(plain)
    assert dispatcher.group_mirrors == []
    patch(mirrored)
    assert dispatcher.group_mirrors == [uuid.UUID(mirrored["id"])]
    reset = client.delete(f"/pipelines/{mirrored['id']}/offsets", headers=tenant.editor)
    assert reset.status_code == 200 and dispatcher.group_mirrors == [uuid.UUID(mirrored["id"])] * 2

    assert client.delete(f"/pipelines/{plain['id']}", headers=tenant.editor).status_code == 204
    assert dispatcher.group_deletes == []
    assert client.delete(f"/pipelines/{mirrored['id']}", headers=tenant.editor).status_code == 204
    assert dispatcher.group_deletes == [(uuid.UUID(mirrored["source"]["connection_id"]), "inlet-mirrored")]


def test_a_group_name_kafka_would_refuse_is_a_422(client, tenant) -> None:
    conn = client.post("/connections", json=plaintext_connection_body("broker-1.example.com:9092"), headers=tenant.editor)
    body = {"name": "p", "source": {"connection_id": conn.json()["id"], "topics": ["orders"], "commit_to_group": "has space"},
            "target": {"type": "delta", "path": "bronze/p"}, "schedule": None, "state": "paused"}
    response = client.post("/pipelines", json=body, headers=tenant.editor)
    assert response.status_code == 422
    assert [e["field"] for e in response.json()["errors"]] == ["source.commit_to_group"]
