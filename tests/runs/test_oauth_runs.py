"""Runs over OAUTHBEARER on a real broker that validates tokens from a real OIDC token server
(tests/fixtures/oidc.py): HTTP API → Redis → Celery worker → Spark job → Delta, and a Kafka target.

Tokens live 6 s and the broker makes every session re-authenticate every 3 s with no clock-skew
grace, so a run that outlasts a token only succeeds if every client in it (the planner's, the
driver's, the executors') refreshes its token. The run is held past several token lifetimes the way
an outage would hold it: the broker is paused (SIGSTOP) once the job has started, and resumed later.
A broker quota on the run's principal paces its reads and writes (Kafka throttles a client over its
byte rate), so the pause finds the job's clients mid-transfer on any machine, never after them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.factories import create_pipeline, make_tenant
from tests.fixtures.kafka import produce_keyed, read_range
from tests.fixtures.kafka_broker import RealKafka
from tests.fixtures.oidc import CLIENT_ID, TOKEN_TTL_S, RealIdp, TokenRequest, oauth_connection_body
from tests.runs.helpers import committed_offsets, delta_coordinates, wait_for_run

pytestmark = pytest.mark.slow

_HELD_S = 3 * TOKEN_TTL_S  # the pause outlasts three tokens
# A broker's quota measures a rate over its whole window (11 samples of 1 s), so a client's first burst of
# up to ~10 s worth of bytes passes unthrottled: at 1 MB/s the job once moved all ~10 MB before the test
# could pause the broker mid-transfer. At half that, at least half of it is paced.
_PACE_BYTES_PER_S = 500_000
_RECORDS, _VALUE_BYTES = 2_400, 4_000  # ~10 MB: 10-20 s at the paced rate, each way


def _value(i: int) -> bytes:
    return f"v{i}".encode().ljust(_VALUE_BYTES, b".")


@contextmanager
def _paced(broker: RealKafka, principal: str) -> Iterator[None]:
    """A fetch and produce quota of ``_PACE_BYTES_PER_S`` on ``principal`` while the block runs."""
    rates = f"consumer_byte_rate={_PACE_BYTES_PER_S},producer_byte_rate={_PACE_BYTES_PER_S}"
    entity = ("--entity-type", "users", "--entity-name", principal)
    broker.tool("kafka-configs.sh", "--alter", *entity, "--add-config", rates)
    try:
        yield
    finally:
        broker.tool("kafka-configs.sh", "--alter", *entity, "--delete-config", "consumer_byte_rate,producer_byte_rate")


def _why(stack: Any, tenant: Any, run: dict[str, Any]) -> str:
    """A run that was not held whole, in full: pytest shortens a message that is not a string."""
    log = stack.client.get(f"/runs/{run['id']}/log", headers=tenant.viewer).text
    return f"run: {run}\nits log:\n{log[-8000:]}\nthe worker's:\n{stack.log_text()[-4000:]}"


def _run_held_past_its_tokens(stack: Any, tenant: Any, pipeline: dict[str, Any], broker: RealKafka, idp: RealIdp,
                              writing: Callable[[], bool] = lambda: True) -> tuple[dict[str, Any], list[TokenRequest]]:
    """Trigger a paced run, pause the broker once the job's clients run, resume it after ``_HELD_S``;
    the finished run and the token requests made while the broker was paused."""
    client = stack.client
    with _paced(broker, CLIENT_ID):
        run_id = client.post(f"/pipelines/{pipeline['id']}/runs", headers=tenant.editor).json()["id"]

        def planned_and_running() -> bool:
            run = client.get(f"/runs/{run_id}", headers=tenant.viewer).json()
            return run["state"] == "running" and run["partitions"] is not None

        stack.wait_for(planned_and_running, timeout_s=60, every_s=0.1, what="the run to be planned and launched")
        # Launched is not yet reading: a cold engine may still be starting. The job's driver fetches a
        # token as its first step (its clients' first, then one every 80 % of a token's life while they
        # run), so a token request after the plan means the job's clients are there.
        planned = len(idp.requests())
        stack.wait_for(lambda: len(idp.requests()) > planned, timeout_s=180, every_s=0.1,
                       what="the job to fetch its first token")
        stack.wait_for(writing, timeout_s=120, every_s=0.1, what="the job to write")
        broker.pause()
        before = len(idp.requests())
        try:
            time.sleep(_HELD_S)
        finally:
            broker.resume()
        during = idp.requests()[before:]
        return wait_for_run(stack, run_id, tenant.viewer), during


def test_a_run_longer_than_its_tokens_lands_every_record_once_in_delta(
    stack: Any, oauth_kafka: RealKafka, real_idp: RealIdp, oauth_topic: Any
) -> None:
    topic = oauth_topic(partitions=3)
    placed = produce_keyed(oauth_kafka.bootstrap_servers, topic, _RECORDS, value=_value)
    client = stack.client
    tenant = make_tenant(client)
    conn = client.post("/connections", json=oauth_connection_body(oauth_kafka, real_idp), headers=tenant.editor)
    assert conn.status_code == 201, conn.text
    pipeline = create_pipeline(client, tenant, conn.json()["id"], schedule=None, state="paused",
                               source={"connection_id": conn.json()["id"], "topics": [topic], "value_format": "string"},
                               target={"type": "delta", "path": "bronze/oauth"})
    stack.start_worker()
    began = time.monotonic()

    run, during = _run_held_past_its_tokens(stack, tenant, pipeline, oauth_kafka, real_idp)

    assert (run["state"], run["attempt"], run["records_read"]) == ("succeeded", 1, _RECORDS), _why(stack, tenant, run)  # held, not retried
    assert time.monotonic() - began > _HELD_S > 2 * TOKEN_TTL_S
    once = sorted((topic, p, o) for p, offsets in placed.items() for o in offsets)
    assert delta_coordinates(pipeline["status"]["target_uri"]) == once
    assert committed_offsets(stack.settings.resolved_database_url, pipeline["id"]) == {
        (topic, p): len(offsets) for p, offsets in placed.items()}
    # The run's clients refreshed their tokens while the broker was paused (librdkafka asks at 80 % of
    # a token's life, and Inlet's oauth_cb fetched a new one), and none was refused.
    assert during and set(during) == {TokenRequest(CLIENT_ID, 200)}, during


def test_a_kafka_target_over_oauthbearer_lands_every_record_once(
    stack: Any, oauth_kafka: RealKafka, real_idp: RealIdp, oauth_topic: Any
) -> None:
    source, target = oauth_topic(partitions=2), oauth_topic(partitions=2)
    n = _RECORDS
    produce_keyed(oauth_kafka.bootstrap_servers, source, n, value=_value)
    client = stack.client
    tenant = make_tenant(client)
    conn = client.post("/connections", json=oauth_connection_body(oauth_kafka, real_idp), headers=tenant.editor)
    assert conn.status_code == 201, conn.text
    pipeline = create_pipeline(client, tenant, conn.json()["id"], schedule=None, state="paused",
                               source={"connection_id": conn.json()["id"], "topics": [source], "value_format": "raw"},
                               target={"type": "kafka", "connection_id": conn.json()["id"], "topic": target})
    stack.start_worker()

    probe = Consumer({"bootstrap.servers": oauth_kafka.bootstrap_servers, "group.id": "inlet-tests-oauth"})

    def ends() -> dict[int, tuple[int, int]]:
        return {p: probe.get_watermark_offsets(TopicPartition(target, p), timeout=10, cached=False) for p in (0, 1)}

    # Paused once records reach the target: the job's producers are mid-transfer, past their first token.
    writing = lambda: any(high > 0 for _, high in ends().values())  # noqa: E731
    run, during = _run_held_past_its_tokens(stack, tenant, pipeline, oauth_kafka, real_idp, writing)

    assert (run["state"], run["attempt"], run["records_read"]) == ("succeeded", 1, n), _why(stack, tenant, run)
    written_ends = ends()
    probe.close()
    written = [(m.key(), m.value()) for p, (low, high) in written_ends.items()
               for m in read_range(oauth_kafka.bootstrap_servers, target, p, low, high)]
    assert sorted(written) == sorted((f"key-{i % 97}".encode(), _value(i)) for i in range(n))
    assert during and set(during) == {TokenRequest(CLIENT_ID, 200)}, during
