"""A tenant's input cannot stall the API or crash it: topic patterns are matched in linear time,
and every recursive input (a schema's nesting, a JSON body's) is bounded with a 422, never a 500.

Rows of issue 29: a ``(a+)+c`` pattern against a long topic held the API for every tenant (Python's
``re`` backtracks: the time doubles per character), and a schema nested 4,000 deep was a 500.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.factories import assert_problem, create_connection, create_sandbox_pipeline, pipeline_body

# Under Python's ``re`` the pattern below needs ~2**40 steps against this topic: without linear
# matching this test does not finish (the timeout fails it), it does not merely run slow.
LONG_RUN_OF_A = "a" * 40
CATASTROPHIC = "(a+)+c"


@pytest.mark.timeout(60)
def test_a_catastrophic_topic_pattern_neither_stalls_its_request_nor_anyone_else(
    client: TestClient, tenant: Any, other_tenant: Any, sandbox_kafka: Any, kafka_topic: Any
) -> None:
    long_topic = kafka_topic(partitions=1, prefix=LONG_RUN_OF_A)
    plain = kafka_topic(partitions=1, prefix="orders")
    pipe = create_sandbox_pipeline(client, tenant, sandbox_kafka.bootstrap_servers, [plain],
                                   source={"topics": None, "topic_pattern": CATASTROPHIC})
    answered: list[Any] = []
    hostile = threading.Thread(target=lambda: answered.append(
        client.get(f"/pipelines/{pipe['id']}/offsets", headers=tenant.viewer)))
    hostile.start()
    others = []
    while hostile.is_alive() or len(others) < 5:
        started = time.perf_counter()
        me = client.get("/me", headers=other_tenant.viewer)
        others.append(time.perf_counter() - started)
        assert me.status_code == 200, me.text
    hostile.join()

    offsets = answered[0]
    assert offsets.status_code == 200, offsets.text
    # Nothing matches the pattern (the long topic has no 'c'), so the pipeline reads no partition.
    assert offsets.json()["partitions"] == []
    assert long_topic.startswith(LONG_RUN_OF_A)
    # The other tenant's requests answer as on an idle API (~0.05 s; 2.2 s with backtracking); the
    # bound is generous for 2 busy cores, and far below what a stalled API takes.
    assert max(others) < 1.5, others


@pytest.mark.parametrize(("pattern", "reason"), [
    (r"(a)\1", "invalid escape sequence"),  # a backreference
    (r"orders(?=-eu)", "invalid perl operator"),  # lookahead
    (r"(?<!x)orders", "invalid perl operator"),  # lookbehind
    (r"a{1001}", "invalid repetition size"),
])
def test_a_pattern_that_cannot_be_matched_in_linear_time_is_refused_at_definition(
    client: TestClient, tenant: Any, pattern: str, reason: str
) -> None:
    connection = create_connection(client, tenant)
    body = pipeline_body(connection["id"], source={"connection_id": connection["id"], "topic_pattern": pattern})
    problem = assert_problem(client.post("/pipelines", json=body, headers=tenant.editor), 422,
                             fields={"source.topic_pattern"})
    [error] = [e for e in problem["errors"] if e["field"] == "source.topic_pattern"]
    assert error["message"].startswith("Value error, topic_pattern is not a regex that can be matched in linear time")
    assert reason in error["message"]


def test_patterns_keep_their_meaning_and_match_whole_names(client: TestClient, tenant: Any) -> None:
    """RE2 takes the patterns people write (classes, alternation, anchors, named groups)."""
    from api.pipelines.topic_patterns import matches_topic

    assert matches_topic(r"orders\.(eu|us)", "orders.eu")
    assert not matches_topic(r"orders\.(eu|us)", "orders.eu.dlq")  # whole names only
    assert matches_topic(r"^(?P<domain>[a-z]+)-events$", "billing-events")
    assert not matches_topic(CATASTROPHIC, LONG_RUN_OF_A)


def _nested_struct(depth: int) -> str:
    return "a " + "struct<b: " * depth + "int" + ">" * depth


@pytest.mark.parametrize("depth", [65, 4000])
def test_a_schema_nested_too_deep_is_a_422_naming_the_limit(client: TestClient, tenant: Any, depth: int) -> None:
    connection = create_connection(client, tenant)
    body = pipeline_body(connection["id"], source={"connection_id": connection["id"], "topics": ["orders"],
                                                   "value_format": "json", "schema": _nested_struct(depth)})
    problem = assert_problem(client.post("/pipelines", json=body, headers=tenant.editor), 422, fields={"source.schema"})
    assert [e["message"] for e in problem["errors"]] == [
        f"Value error, schema: types nest more than 64 deep (at character {3 + 10 * 64})"]


def test_a_schema_nested_as_deep_as_allowed_is_taken(client: TestClient, tenant: Any) -> None:
    connection = create_connection(client, tenant)
    body = pipeline_body(connection["id"], source={"connection_id": connection["id"], "topics": ["orders"],
                                                   "value_format": "json", "schema": _nested_struct(64)})
    created = client.post("/pipelines", json=body, headers=tenant.editor)
    assert created.status_code == 201, created.text
    assert created.json()["source"]["schema"] == _nested_struct(64)


@pytest.mark.parametrize("depth", [33, 500, 900, 100_000])
@pytest.mark.parametrize(("method", "path"), [("POST", "/pipelines"), ("PATCH", "/pipelines/{id}"),
                                              ("POST", "/connections")])
def test_a_body_nested_too_deep_is_a_422_before_anything_walks_it(
    client: TestClient, tenant: Any, depth: int, method: str, path: str
) -> None:
    """Validation, merge patch and the idempotency fingerprint each recurse once per level: 500 and
    900 levels were a 500 (RecursionError) before the body's depth was bounded."""
    connection = create_connection(client, tenant)
    created = client.post("/pipelines", json=pipeline_body(connection["id"]), headers=tenant.editor)
    assert created.status_code == 201, created.text
    body = '{"name": "x", "source": ' + '{"a": ' * (depth - 1) + "1" + "}" * (depth - 1) + "}"
    content_type = "application/merge-patch+json" if method == "PATCH" else "application/json"
    response = client.request(method, path.format(id=created.json()["id"]), content=body,
                              headers={**tenant.editor, "content-type": content_type, "Idempotency-Key": "deep"})
    problem = assert_problem(response, 422, fields={"body"})
    assert problem == {
        "type": "https://inlet.dev/problems/validation-failed", "title": "Invalid request", "status": 422,
        "detail": "The JSON body nests arrays and objects more than 32 deep",
        "instance": response.request.url.path,
        "errors": [{"field": "body", "message": "The JSON body nests arrays and objects more than 32 deep",
                    "type": "too_deep"}],
    }


@pytest.mark.parametrize(("name", "encoding", "content_type", "why"), [
    ("é", "utf-16", "application/json", "this one is not (at byte 0)"),  # its byte order mark
    ("x", "utf-16-le", "application/json", "holds NUL bytes"),  # ASCII in UTF-16: valid UTF-8, NULs between
    ("x", "utf-32-be", "application/merge-patch+json", "holds NUL bytes"),
    ("é", "latin-1", "application/json", "this one is not (at byte 10)"),
    ("é", "utf-8", "application/json; charset=iso-8859-1", "the charset 'iso-8859-1' is not taken"),
])
def test_a_json_body_not_in_utf8_is_a_415_before_anything_reads_it(
    client: TestClient, tenant: Any, name: str, encoding: str, content_type: str, why: str,
) -> None:
    """RFC 8259 §8.1: a 900-deep body in UTF-16 with an Idempotency-Key was a 500 (the fingerprint's
    recursion) with a 337 KB traceback logged; now no route, fingerprint or logger sees it."""
    body = f'{{"name": "{name}", "source": ' + '{"a": ' * 899 + "1" + "}" * 899 + "}"
    response = client.post("/pipelines", content=body.encode(encoding),
                           headers={**tenant.editor, "content-type": content_type, "Idempotency-Key": "utf16"})
    problem = assert_problem(response, 415)
    assert problem["detail"].startswith("A JSON body is UTF-8 (RFC 8259 §8.1)") and why in problem["detail"]
    taken = client.post("/pipelines", content='{"name": "é"}'.encode(),
                        headers={**tenant.editor, "content-type": "application/json; charset=UTF-8"})
    assert_problem(taken, 422, fields={"source", "target"})  # UTF-8, declared or not, reaches validation


def test_a_body_as_deep_as_allowed_reaches_validation(client: TestClient, tenant: Any) -> None:
    body = '{"name": "x", "source": ' + '{"a": ' * 31 + "1" + "}" * 31 + "}"
    response = client.post("/pipelines", content=body, headers={**tenant.editor, "content-type": "application/json"})
    assert_problem(response, 422, fields={"source.connection_id", "target"})


@pytest.mark.parametrize("path", ["bronze/orders\n", "bronze\n/orders", "bronze/orders\r"])
def test_a_delta_path_check_is_anchored_at_the_end_of_the_string(client: TestClient, tenant: Any, path: str) -> None:
    """Python's ``$`` also matches before a final newline: a segment ``orders\\n`` passed the check."""
    connection = create_connection(client, tenant)
    body = pipeline_body(connection["id"], target={"type": "delta", "path": path})
    problem = assert_problem(client.post("/pipelines", json=body, headers=tenant.editor), 422,
                             fields={"target.path"})
    assert problem["errors"][0]["message"].startswith("Path segment ")
