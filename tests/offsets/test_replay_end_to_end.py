"""Replaying offsets for real: HTTP API → Redis → Celery worker → spark-submit → Delta, three runs.

An append replay writes the replayed records again (duplicates, as append means); a replace replay
over the same offsets leaves the table holding each record exactly once, as delta-rs and Spark with
delta-spark both read it. Sandbox Kafka over TCP."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import pytest
from deltalake import DeltaTable

from tests.factories import create_sandbox_pipeline, make_tenant
from tests.fixtures.delta_spark import DeltaSpark
from tests.fixtures.kafka import SandboxKafka, produce_keyed
from tests.fixtures.stack import Stack
from tests.runs.helpers import delta_coordinates, run_succeeded, wait_for_run

pytestmark = pytest.mark.slow


def test_append_replay_duplicates_and_replace_replay_restores_exactly_once(
        stack: Stack, sandbox_kafka: SandboxKafka, kafka_topic: Callable[..., str], delta_spark: DeltaSpark) -> None:
    topic = kafka_topic(partitions=3)
    produced = produce_keyed(sandbox_kafka.bootstrap_servers, topic, 30)
    client = stack.client
    tenant = make_tenant(client)
    pipeline = create_sandbox_pipeline(client, tenant, sandbox_kafka.bootstrap_servers, [topic])
    offsets = f"/pipelines/{pipeline['id']}/offsets"
    stack.start_worker()

    first = run_succeeded(stack, tenant, pipeline)
    uri = pipeline["status"]["target_uri"]
    once = sorted((topic, p, o) for p, offs in produced.items() for o in offs)
    assert delta_coordinates(uri) == once
    replayed = {(topic, p, o) for p, offs in produced.items() for o in offs[-3:]}

    etag = client.get(offsets, headers=tenant.viewer).headers["etag"]
    appended = client.patch(offsets, json={"shift_by": -3, "clamp": True}, headers={**tenant.editor, "If-Match": etag})
    assert appended.status_code == 200, appended.text
    second = run_succeeded(stack, tenant, pipeline)
    assert second["records_read"] == len(replayed) and second["replace_ranges"] is None
    counts = Counter(delta_coordinates(uri))
    assert {c for c, n in counts.items() if n == 2} == replayed and set(counts.values()) == {1, 2}

    replaced = client.patch(offsets, json={"shift_by": -3, "clamp": True, "replay_mode": "replace"}, headers=tenant.editor)
    assert replaced.status_code == 200, replaced.text
    assert [p["replay"] for p in client.get(offsets, headers=tenant.viewer).json()["partitions"]] == [
        [len(produced[p]) - 3, len(produced[p])] if p in produced else None for p in range(3)
    ]
    third = run_succeeded(stack, tenant, pipeline)
    assert third["replace_ranges"] == {topic: {str(p): [len(offs) - 3, len(offs)] for p, offs in produced.items()}}
    assert delta_coordinates(uri) == once
    delta_spark.assert_reads_alike(uri, DeltaTable(uri).to_pyarrow_table())  # files partly rewritten by the replace
    inspected = client.get(offsets, headers=tenant.viewer).json()
    assert [(p["committed"], p["lag"], p["replay"]) for p in inspected["partitions"]] == [
        (len(produced.get(p, [])), 0, None) for p in range(3)
    ]

    partition, offs = next(iter(produced.items()))
    lookup = client.get(f"{offsets}/lookup", params={"topic": topic, "partition": partition, "offset": offs[-1]},
                        headers=tenant.viewer).json()
    assert [r["run_id"] for r in lookup["runs"]] == [third["id"], second["id"], first["id"]]
    history = client.get(f"{offsets}/history", headers=tenant.viewer).json()["items"]
    assert [(e["action"], e["after"]["replay_mode"]) for e in history] == [("patch", "replace"), ("patch", "append")]


def test_a_replay_into_a_table_another_engine_made_append_only_fails_for_good_with_its_offsets_unmoved(
        stack: Stack, sandbox_kafka: SandboxKafka, kafka_topic: Callable[..., str]) -> None:
    """``delta.appendOnly`` set by another engine: a replace replay would remove rows, which the table
    forbids (spark_jobs/table_features.py). The run fails as ``table_unsupported`` on its first
    attempt, nothing is written, and the offsets stay where the replay put them."""
    topic = kafka_topic(partitions=2)
    produced = produce_keyed(sandbox_kafka.bootstrap_servers, topic, 20)
    client = stack.client
    tenant = make_tenant(client)
    pipeline = create_sandbox_pipeline(client, tenant, sandbox_kafka.bootstrap_servers, [topic])
    offsets = f"/pipelines/{pipeline['id']}/offsets"
    stack.start_worker()
    run_succeeded(stack, tenant, pipeline)
    uri = pipeline["status"]["target_uri"]
    DeltaTable(uri).alter.set_table_properties({"delta.appendOnly": "true"})  # as another engine's ALTER TABLE
    version = DeltaTable(uri).version()
    replaced = client.patch(offsets, json={"shift_by": -3, "clamp": True, "replay_mode": "replace"}, headers=tenant.editor)
    assert replaced.status_code == 200, replaced.text
    before = client.get(offsets, headers=tenant.viewer).json()["partitions"]

    triggered = client.post(f"/pipelines/{pipeline['id']}/runs", headers=tenant.editor)
    done = wait_for_run(stack, triggered.json()["id"], tenant.viewer)

    assert (done["state"], done["attempt"], done["error"]["kind"]) == ("failed", 1, "table_unsupported"), done
    assert "append-only (delta.appendOnly=true)" in done["error"]["message"]
    assert DeltaTable(uri).version() == version
    assert client.get(offsets, headers=tenant.viewer).json()["partitions"] == before
    assert sorted(delta_coordinates(uri)) == sorted((topic, p, o) for p, offs in produced.items() for o in offs)
