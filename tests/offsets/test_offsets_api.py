"""``/pipelines/{id}/offsets`` over HTTP against the sandbox Kafka: inspect, move in every mode (dry run
and applied), the rules (paused, no active run, If-Match, ranges, scope), audit history, lookup."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from tests.factories import (
    Tenant,
    assert_auth_refused,
    assert_problem,
    create_sandbox_pipeline,
)
from tests.fixtures.kafka import SandboxKafka
from tests.offsets.helpers import replay_windows, run_without_spark

PER_PARTITION = {0: 10, 1: 6, 2: 0}


@pytest.fixture
def topic(sandbox_kafka: SandboxKafka, kafka_topic: Callable[..., str]) -> str:
    """A 3-partition topic holding 10, 6 and 0 records."""
    name = kafka_topic(partitions=3)
    for partition, n in PER_PARTITION.items():
        if n:
            _produce_to(sandbox_kafka.bootstrap_servers, name, partition, n)
    return name


def _produce_to(bootstrap: str, topic: str, partition: int, n: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(n):
        producer.produce(topic, value=f"{partition}-{i}".encode(), partition=partition)
    assert producer.flush(30) == 0


@pytest.fixture
def pipe(client: TestClient, tenant: Tenant, sandbox_kafka: SandboxKafka, topic: str) -> dict[str, Any]:
    return create_sandbox_pipeline(client, tenant, sandbox_kafka.bootstrap_servers, [topic])


def _path(pipe: dict[str, Any], suffix: str = "") -> str:
    return f"/pipelines/{pipe['id']}/offsets{suffix}"


def _get(client: TestClient, tenant: Tenant, pipe: dict[str, Any]) -> tuple[dict[str, Any], str]:
    response = client.get(_path(pipe), headers=tenant.viewer)
    assert response.status_code == 200, response.text
    return response.json(), response.headers["etag"]


def _committed(client: TestClient, tenant: Tenant, pipe: dict[str, Any]) -> dict[int, int | None]:
    return {p["partition"]: p["committed"] for p in _get(client, tenant, pipe)[0]["partitions"]}


def _patch(client: TestClient, tenant: Tenant, pipe: dict[str, Any], body: dict[str, Any], **headers: str) -> httpx.Response:
    return client.patch(_path(pipe), json=body, headers={**tenant.editor, **headers})


def _rows(response: httpx.Response) -> list[tuple[int, int | None, int, bool]]:
    return [(r["partition"], r["before"], r["after"], r["clamped"]) for r in response.json()["rows"]]


def test_inspect_before_any_run_then_after_setting_offsets(client: TestClient, tenant: Tenant, pipe: dict[str, Any], topic: str) -> None:
    body, etag = _get(client, tenant, pipe)
    assert body["cluster"] == {"status": "ok", "kind": None, "detail": None}
    assert body["pipeline_id"] == pipe["id"] and body["observed_at"]
    assert body["partitions"] == [
        {"topic": topic, "partition": p, "committed": None, "earliest": 0, "latest": n, "lag": n, "replay": None,
         "last_run_id": None, "updated_at": None, "newest_record_at": None}
        for p, n in PER_PARTITION.items()
    ]
    assert body["total_lag"] == 16

    moved = _patch(client, tenant, pipe, {"offsets": [{"topic": topic, "partition": 0, "offset": 7}]}, **{"If-Match": etag})
    assert moved.status_code == 200, moved.text
    assert moved.json() == {"dry_run": False, "mode": "offsets", "replay_mode": "append", "etag": moved.headers["etag"],
                            "keyed_table": None,
                            "rows": [{"topic": topic, "partition": 0, "before": None, "after": 7, "clamped": False,
                                      "earliest": 0, "latest": 10}]}
    after, new_etag = _get(client, tenant, pipe)
    assert new_etag == moved.headers["etag"] != etag
    assert [(p["committed"], p["lag"]) for p in after["partitions"]] == [(7, 3), (None, 6), (None, 0)]
    assert after["total_lag"] == 9 and after["partitions"][0]["updated_at"] is not None


def test_lag_counts_from_the_starting_position_of_never_read_partitions(client: TestClient, tenant: Tenant, sandbox_kafka: SandboxKafka, topic: str) -> None:
    pipe = create_sandbox_pipeline(client, tenant, sandbox_kafka.bootstrap_servers, [topic],
                                   source={"starting_offsets": "latest"})
    body, _ = _get(client, tenant, pipe)
    assert [p["lag"] for p in body["partitions"]] == [0, 0, 0] and body["total_lag"] == 0


@pytest.mark.parametrize(("body", "expected", "mode"), [
    ({"reset": "earliest"}, [(0, 4, 0, False), (1, None, 0, False), (2, None, 0, False)], "earliest"),
    ({"reset": "latest"}, [(0, 4, 10, False), (1, None, 6, False), (2, None, 0, False)], "latest"),
    ({"shift_by": 3, "partitions": [0, 1]}, [(0, 4, 7, False), (1, None, 3, False)], "shift_by"),
    ({"reset": "latest", "partitions": [1]}, [(1, None, 6, False)], "latest"),
])
def test_modes_dry_run_then_applied(client: TestClient, tenant: Tenant, pipe: dict[str, Any], topic: str, body: Any, expected: Any, mode: str) -> None:
    assert _patch(client, tenant, pipe, {"offsets": [{"topic": topic, "partition": 0, "offset": 4}]}).status_code == 200
    _, etag = _get(client, tenant, pipe)

    dry = _patch(client, tenant, pipe, {**body, "dry_run": True, "topics": [topic]})
    assert dry.status_code == 200, dry.text
    assert dry.json()["dry_run"] is True and dry.json()["mode"] == mode and _rows(dry) == expected
    assert dry.headers["etag"] == dry.json()["etag"] == etag
    assert _get(client, tenant, pipe)[1] == etag
    assert _committed(client, tenant, pipe) == {0: 4, 1: None, 2: None}

    applied = _patch(client, tenant, pipe, {**body, "topics": [topic]})
    assert applied.status_code == 200, applied.text
    assert applied.json()["dry_run"] is False and _rows(applied) == expected
    committed = {0: 4, 1: None, 2: None} | {p: after for p, _, after, _ in expected}
    assert _committed(client, tenant, pipe) == committed
    assert applied.headers["etag"] == _get(client, tenant, pipe)[1]


def test_explicit_offsets_null_means_the_starting_offsets(client: TestClient, tenant: Tenant, sandbox_kafka: SandboxKafka, topic: str) -> None:
    pipe = create_sandbox_pipeline(client, tenant, sandbox_kafka.bootstrap_servers, [topic],
                                   source={"starting_offsets": {topic: {"0": 2, "1": -1}}})
    response = _patch(client, tenant, pipe, {"offsets": [{"topic": topic, "partition": p, "offset": None} for p in range(3)]})
    assert response.status_code == 200, response.text
    assert _rows(response) == [(0, None, 2, False), (1, None, 6, False), (2, None, 0, False)]


def test_kafka_connect_body_is_accepted(client: TestClient, tenant: Tenant, pipe: dict[str, Any], topic: str) -> None:
    body = {"offsets": [
        {"partition": {"kafka_topic": topic, "kafka_partition": 1}, "offset": {"kafka_offset": 5}},
        {"partition": {"kafka_topic": topic, "kafka_partition": 0}, "offset": None},
    ]}
    response = _patch(client, tenant, pipe, body)
    assert response.status_code == 200, response.text
    assert _rows(response) == [(0, None, 0, False), (1, None, 5, False)]
    assert _committed(client, tenant, pipe) == {0: 0, 1: 5, 2: None}


def test_delete_resets_every_partition_to_the_starting_offsets(client: TestClient, tenant: Tenant, pipe: dict[str, Any], topic: str) -> None:
    _patch(client, tenant, pipe, {"reset": "latest"})
    dry = client.delete(_path(pipe), params={"dry_run": "true"}, headers=tenant.editor)
    assert dry.status_code == 200, dry.text
    assert dry.json()["mode"] == "starting_offsets" and dry.json()["dry_run"] is True
    assert _rows(dry) == [(0, 10, 0, False), (1, 6, 0, False), (2, 0, 0, False)]
    assert _committed(client, tenant, pipe) == {0: 10, 1: 6, 2: 0}
    done = client.delete(_path(pipe), headers=tenant.editor)
    assert done.status_code == 200 and _rows(done) == _rows(dry)
    assert _committed(client, tenant, pipe) == {0: 0, 1: 0, 2: 0}
    history = client.get(_path(pipe, "/history"), headers=tenant.viewer).json()["items"]
    assert [e["action"] for e in history] == ["reset", "patch"]


def test_refused_while_active_or_with_a_queued_run(client: TestClient, tenant: Tenant, pipe: dict[str, Any], topic: str) -> None:
    client.post(f"/pipelines/{pipe['id']}/resume", headers=tenant.editor)
    for response in (_patch(client, tenant, pipe, {"reset": "latest", "dry_run": True}),
                     client.delete(_path(pipe), headers=tenant.editor)):
        body = assert_problem(response, 409)
        assert "pause the pipeline first" in body["detail"]
        assert body["current_state"] == "active" and body["active_run_id"] is None

    client.post(f"/pipelines/{pipe['id']}/pause", headers=tenant.editor)
    run = client.post(f"/pipelines/{pipe['id']}/runs", headers=tenant.editor).json()  # queued: no worker here
    body = assert_problem(_patch(client, tenant, pipe, {"reset": "latest"}), 409)
    assert body["active_run_id"] == run["id"] and run["id"] in body["detail"] and "queued" in body["detail"]
    assert "pause the pipeline first" in body["detail"]
    assert _committed(client, tenant, pipe) == {0: None, 1: None, 2: None}

    client.post(f"/runs/{run['id']}/cancel", headers=tenant.editor)
    assert _patch(client, tenant, pipe, {"reset": "latest"}).status_code == 200


def test_stale_etag_is_412_for_changes_and_dry_runs(client: TestClient, tenant: Tenant, pipe: dict[str, Any], topic: str) -> None:
    _, etag = _get(client, tenant, pipe)
    assert _patch(client, tenant, pipe, {"reset": "latest"}, **{"If-Match": etag}).status_code == 200
    for response in (_patch(client, tenant, pipe, {"reset": "earliest"}, **{"If-Match": etag}),
                     _patch(client, tenant, pipe, {"reset": "earliest", "dry_run": True}, **{"If-Match": etag}),
                     client.delete(_path(pipe), headers={**tenant.editor, "If-Match": etag})):
        body = assert_problem(response, 412)
        assert body["current_etag"] == _get(client, tenant, pipe)[1]
    assert _committed(client, tenant, pipe) == {0: 10, 1: 6, 2: 0}
    assert _patch(client, tenant, pipe, {"reset": "earliest"}, **{"If-Match": "*"}).status_code == 200


def test_out_of_range_is_422_naming_each_partition_or_clamped(client: TestClient, tenant: Tenant, pipe: dict[str, Any], topic: str) -> None:
    body = {"offsets": [{"topic": topic, "partition": 0, "offset": 11}, {"topic": topic, "partition": 1, "offset": 3},
                        {"topic": topic, "partition": 2, "offset": 5}]}
    refused = assert_problem(_patch(client, tenant, pipe, body), 422, fields={f"offsets.{topic}[0]", f"offsets.{topic}[2]"})
    assert refused["type"].endswith("/offsets-out-of-range")
    assert refused["partitions"] == [{"topic": topic, "partition": 0, "offset": 11, "earliest": 0, "latest": 10},
                                     {"topic": topic, "partition": 2, "offset": 5, "earliest": 0, "latest": 0}]
    assert [e["message"] for e in refused["errors"]] == ["11 is outside [0, 10]", "5 is outside [0, 0]"]
    assert _committed(client, tenant, pipe) == {0: None, 1: None, 2: None}

    clamped = _patch(client, tenant, pipe, {**body, "clamp": True})
    assert clamped.status_code == 200, clamped.text
    assert _rows(clamped) == [(0, None, 10, True), (1, None, 3, False), (2, None, 0, True)]
    shifted = _patch(client, tenant, pipe, {"shift_by": -5, "clamp": True})
    assert _rows(shifted) == [(0, 10, 5, False), (1, 3, 0, True), (2, 0, 0, True)]
    assert assert_problem(_patch(client, tenant, pipe, {"shift_by": -6}), 422)["partitions"][0]["offset"] == -1


def test_unknown_topics_or_partitions_are_422(client: TestClient, tenant: Tenant, pipe: dict[str, Any], topic: str) -> None:
    cases = [
        ({"offsets": [{"topic": topic, "partition": 3, "offset": 0}]}, [f"{topic}[3]"]),
        ({"offsets": [{"topic": "not-read-here", "partition": 0, "offset": 0}]}, ["not-read-here[0]"]),
        ({"reset": "earliest", "topics": ["not-read-here"]}, ["not-read-here"]),
        ({"reset": "earliest", "partitions": [1, 7]}, [f"{topic}[7]"]),
    ]
    for body, unknown in cases:
        problem = assert_problem(_patch(client, tenant, pipe, body), 422)
        assert problem["type"].endswith("/unknown-partitions") and problem["unknown"] == unknown
    assert _committed(client, tenant, pipe) == {0: None, 1: None, 2: None}


def test_invalid_bodies_are_422(client: TestClient, tenant: Tenant, pipe: dict[str, Any], topic: str) -> None:
    bad = [
        ({}, None),
        ({"reset": "earliest", "shift_by": 1}, None),
        ({"reset": "middle"}, {"reset"}),
        ({"by_duration": "1h"}, {"by_duration"}),
        ({"by_duration": "-PT1H"}, {"by_duration"}),
        ({"to_timestamp": "2026-11-01T00:00:00"}, {"to_timestamp"}),
        ({"offsets": [{"topic": topic, "partition": 0, "offset": -1}]}, None),
        ({"offsets": [{"topic": topic, "partition": 0, "offset": 1}], "topics": [topic]}, None),
        ({"offsets": [{"topic": topic, "partition": 0, "offset": 1}, {"topic": topic, "partition": 0, "offset": 2}]}, None),
        ({"reset": "earliest", "replay_mode": "overwrite"}, {"replay_mode"}),
        ({"reset": "earliest", "surprise": 1}, {"surprise"}),
    ]
    for body, fields in bad:
        assert_problem(_patch(client, tenant, pipe, body), 422, fields=fields)
    missing = client.get(_path(pipe, "/lookup"), params={"topic": topic, "partition": 0}, headers=tenant.viewer)
    assert_problem(missing, 422, fields={"query.offset"})


def test_timestamp_modes_answer_a_clear_error_when_the_cluster_cannot_resolve(client: TestClient, tenant: Tenant, pipe: dict[str, Any], topic: str) -> None:
    """The sandbox cannot serve timestamp lookups (ListOffsets by time answers -1): the API must say so
    with a 422 naming the partitions and change nothing. The resolution itself, as a real broker answers
    it, is covered with a stand-in client in test_resolution.py."""
    for body, field in (({"to_timestamp": "2026-11-01T00:00:00Z", "topics": [topic], "partitions": [0, 1]}, "to_timestamp"),
                        ({"by_duration": "PT1H"}, "by_duration")):
        problem = assert_problem(_patch(client, tenant, pipe, body), 422, fields={field})
        assert problem["type"].endswith("/timestamp-not-resolvable")
        expected = [0, 1] if field == "to_timestamp" else [0, 1, 2]
        assert problem["partitions"] == [{"topic": topic, "partition": p} for p in expected]
        assert f"{topic}[0]" in problem["detail"] and "nothing was changed" in problem["detail"]
    assert _committed(client, tenant, pipe) == {0: None, 1: None, 2: None}


def test_replace_needs_a_delta_target(client: TestClient, tenant: Tenant, sandbox_kafka: SandboxKafka, topic: str) -> None:
    conn = client.post("/connections", json={"name": f"c-{uuid.uuid4().hex[:6]}", "security_protocol": "PLAINTEXT",
                                             "bootstrap_servers": sandbox_kafka.bootstrap_servers}, headers=tenant.editor).json()
    pipe = create_sandbox_pipeline(client, tenant, sandbox_kafka.bootstrap_servers, [topic],
                                   target={"type": "kafka", "connection_id": conn["id"], "topic": "copy"})
    assert_problem(_patch(client, tenant, pipe, {"reset": "earliest", "replay_mode": "replace"}), 422, fields={"replay_mode"})
    assert _patch(client, tenant, pipe, {"reset": "earliest", "replay_mode": "append"}).status_code == 200


def test_every_change_is_audited_and_listed_in_history(client: TestClient, tenant: Tenant, pipe: dict[str, Any], topic: str) -> None:
    key_id = client.get("/me", headers=tenant.editor).json()["key_id"]
    _patch(client, tenant, pipe, {"reset": "latest"})
    _patch(client, tenant, pipe, {"reset": "earliest", "dry_run": True})  # not a change
    _patch(client, tenant, pipe, {"shift_by": -20, "partitions": [0], "clamp": True, "replay_mode": "replace"})
    _patch(client, tenant, pipe, {"reset": "earliest", "topics": [topic], "partitions": [0]})  # no-op: not a change
    client.delete(_path(pipe), headers=tenant.editor)

    page = client.get(_path(pipe, "/history"), params={"limit": 2}, headers=tenant.viewer)
    assert page.status_code == 200, page.text
    assert (page.json()["total"], page.json()["limit"], page.json()["offset"]) == (3, 2, 0)
    events = client.get(_path(pipe, "/history"), params={"sort": "created_at"}, headers=tenant.viewer).json()["items"]
    assert [(e["resource_type"], e["resource_id"], e["action"], e["actor_key_id"]) for e in events] == [
        ("offsets", pipe["id"], "patch", key_id), ("offsets", pipe["id"], "patch", key_id),
        ("offsets", pipe["id"], "reset", key_id),
    ]
    first, shifted, reset = events
    assert first["before"] == {"offsets": [{"topic": topic, "partition": p, "committed": None} for p in range(3)]}
    assert first["after"] == {"mode": "latest", "replay_mode": "append", "clamped": [],
                              "offsets": [{"topic": topic, "partition": p, "committed": n} for p, n in PER_PARTITION.items()]}
    assert shifted["before"]["offsets"] == [{"topic": topic, "partition": 0, "committed": 10}]
    assert shifted["after"] == {"mode": "shift_by", "replay_mode": "replace", "clamped": [{"topic": topic, "partition": 0}],
                                "offsets": [{"topic": topic, "partition": 0, "committed": 0}]}
    assert reset["after"]["mode"] == "starting_offsets"
    assert reset["after"]["offsets"] == [{"topic": topic, "partition": 1, "committed": 0}]
    trail = client.get("/audit-events", params={"resource_type": "offsets"}, headers=tenant.viewer).json()
    assert trail["total"] == 3


def test_another_tenants_pipeline_is_404(client: TestClient, tenant: Tenant, other_tenant: Tenant, pipe: dict[str, Any], topic: str) -> None:
    for method, suffix, kwargs in (
        ("GET", "", {}), ("PATCH", "", {"json": {"reset": "latest"}}), ("DELETE", "", {}),
        ("GET", "/history", {}), ("GET", "/lookup", {"params": {"topic": topic, "partition": 0, "offset": 0}}),
    ):
        headers = other_tenant.editor
        assert_problem(client.request(method, _path(pipe, suffix), headers=headers, **kwargs), 404)
        missing = f"/pipelines/{uuid.uuid4()}/offsets{suffix}"
        assert_problem(client.request(method, missing, headers=tenant.editor, **kwargs), 404)
    assert _committed(client, tenant, pipe) == {0: None, 1: None, 2: None}


def test_roles(client: TestClient, tenant: Tenant, pipe: dict[str, Any], topic: str) -> None:
    assert_auth_refused(client, "GET", _path(pipe), tenant, "viewer")
    assert_auth_refused(client, "GET", _path(pipe, "/history"), tenant, "viewer")
    assert_auth_refused(client, "GET", _path(pipe, f"/lookup?topic={topic}&partition=0&offset=0"), tenant, "viewer")
    assert_auth_refused(client, "PATCH", _path(pipe), tenant, "editor", json={"reset": "latest"})
    assert_auth_refused(client, "DELETE", _path(pipe), tenant, "editor")
    assert _committed(client, tenant, pipe) == {0: None, 1: None, 2: None}


def test_unreachable_cluster_still_shows_the_committed_offsets(client: TestClient, app: Any, tenant: Tenant, pipe: dict[str, Any], topic: str) -> None:
    _patch(client, tenant, pipe, {"reset": "latest", "partitions": [0]})
    _, etag = _get(client, tenant, pipe)
    app.state.settings = app.state.settings.model_copy(update={"kafka_timeout_s": 1.0})
    conn_id = pipe["source"]["connection_id"]
    moved = client.patch(f"/connections/{conn_id}", json={"bootstrap_servers": "127.0.0.1:9"},
                         headers={**tenant.editor, "Content-Type": "application/merge-patch+json"})
    assert moved.status_code == 200, moved.text

    response = client.get(_path(pipe), headers=tenant.viewer)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["cluster"]["status"] == "unreachable" and body["cluster"]["kind"] in {"refused", "timeout"}
    assert body["cluster"]["detail"]
    assert [(p["partition"], p["committed"], p["earliest"], p["latest"], p["lag"]) for p in body["partitions"]] == [
        (0, 10, None, None, None)]
    assert body["total_lag"] is None and response.headers["etag"] == etag
    problem = assert_problem(_patch(client, tenant, pipe, {"reset": "earliest"}), 502 if body["cluster"]["kind"] != "timeout" else 504)
    assert "nothing was changed" in problem["detail"]


def test_lookup_names_the_runs_that_wrote_an_offset(client: TestClient, tenant: Tenant, pipe: dict[str, Any], topic: str) -> None:
    first = run_without_spark(client, tenant, pipe["id"])
    _patch(client, tenant, pipe, {"offsets": [{"topic": topic, "partition": 0, "offset": 4}]})
    second = run_without_spark(client, tenant, pipe["id"])

    def lookup(partition: int, offset: int) -> dict[str, Any]:
        response = client.get(_path(pipe, "/lookup"), params={"topic": topic, "partition": partition, "offset": offset},
                              headers=tenant.viewer)
        assert response.status_code == 200, response.text
        return response.json()

    replayed = lookup(0, 5)
    assert replayed == {"topic": topic, "partition": 0, "offset": 5, "runs": [
        {"run_id": second["id"], "seq": 2, "start": 4, "end": 10, "finished_at": replayed["runs"][0]["finished_at"]},
        {"run_id": first["id"], "seq": 1, "start": 0, "end": 10, "finished_at": replayed["runs"][1]["finished_at"]},
    ]}
    assert [r["run_id"] for r in lookup(0, 3)["runs"]] == [first["id"]]
    assert [r["run_id"] for r in lookup(1, 5)["runs"]] == [first["id"]]
    assert lookup(1, 6)["runs"] == [] and lookup(2, 0)["runs"] == []


def test_replace_mode_leaves_windows_the_next_runs_replace_and_consume(client: TestClient, tenant: Tenant, pipe: dict[str, Any], topic: str) -> None:
    run_without_spark(client, tenant, pipe["id"])  # 0..10, 0..6
    response = _patch(client, tenant, pipe, {"offsets": [{"topic": topic, "partition": 0, "offset": 2},
                                                         {"topic": topic, "partition": 1, "offset": 4}],
                                             "replay_mode": "replace"})
    assert response.status_code == 200 and response.json()["replay_mode"] == "replace"
    assert replay_windows(client, pipe["id"]) == {(topic, 0): (2, 10), (topic, 1): (4, 6)}
    assert [p["replay"] for p in _get(client, tenant, pipe)[0]["partitions"]] == [[2, 10], [4, 6], None]
    # A forward move trims a window; an append move back adds none.
    _patch(client, tenant, pipe, {"offsets": [{"topic": topic, "partition": 0, "offset": 5}]})
    _patch(client, tenant, pipe, {"offsets": [{"topic": topic, "partition": 1, "offset": 0}]})
    assert replay_windows(client, pipe["id"]) == {(topic, 0): (5, 10), (topic, 1): (4, 6)}

    run = run_without_spark(client, tenant, pipe["id"])
    assert run["replace_ranges"] == {topic: {"0": [5, 10], "1": [4, 6]}}
    assert replay_windows(client, pipe["id"]) == {}


def test_a_capped_run_consumes_only_the_part_of_a_window_it_read(client: TestClient, tenant: Tenant, sandbox_kafka: SandboxKafka, topic: str) -> None:
    pipe = create_sandbox_pipeline(client, tenant, sandbox_kafka.bootstrap_servers, [topic],
                                   source={"max_offsets_per_run": 4})
    _patch(client, tenant, pipe, {"reset": "latest"})
    _patch(client, tenant, pipe, {"reset": "earliest", "partitions": [0], "replay_mode": "replace"})
    assert replay_windows(client, pipe["id"]) == {(topic, 0): (0, 10)}
    run = run_without_spark(client, tenant, pipe["id"])
    assert run["replace_ranges"] == {topic: {"0": [0, 4]}}
    assert replay_windows(client, pipe["id"]) == {(topic, 0): (4, 10)}
    run = run_without_spark(client, tenant, pipe["id"])
    assert run["replace_ranges"] == {topic: {"0": [4, 8]}}
    assert replay_windows(client, pipe["id"]) == {(topic, 0): (8, 10)}


def test_offsets_moved_while_the_cluster_is_asked_refuse_the_change_that_read_them_before(
        client: TestClient, app: Any, tenant: Tenant, pipe: dict[str, Any], topic: str) -> None:
    """The cluster is asked with no transaction open (on SQLite the write lock was held across it):
    another change lands meanwhile, and the first, checked again before it writes, is a 409 that
    changes nothing."""
    clients = app.state.kafka_clients
    real = clients.client

    class Meanwhile:
        """The cluster's client, through which another editor's change lands during the first's lookup."""

        def __init__(self, inner: Any) -> None:
            self.inner, self.moved = inner, None

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

        def watermarks(self, partitions: Any) -> Any:
            clients.client = real
            self.moved = _patch(client, tenant, pipe, {"offsets": [{"topic": topic, "partition": 1, "offset": 2}]})
            return self.inner.watermarks(partitions)

    meanwhile: list[Meanwhile] = []
    clients.client = lambda conn: meanwhile.append(Meanwhile(real(conn))) or meanwhile[-1]
    try:
        first = _patch(client, tenant, pipe, {"offsets": [{"topic": topic, "partition": 0, "offset": 5}]})
    finally:
        clients.client = real

    assert meanwhile[0].moved is not None and meanwhile[0].moved.status_code == 200, meanwhile[0].moved
    problem = assert_problem(first, 409)
    assert problem["type"].endswith("/offsets-changed-meanwhile") and "read the offsets again" in problem["detail"]
    assert _committed(client, tenant, pipe) == {0: None, 1: 2, 2: None}
