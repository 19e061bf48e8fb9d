"""When a job's Kafka client gives up on the errors librdkafka reports (``kafka_errors.Refusals``):
a fatal error at once, an auth error only once it has gone on for the grace with no progress."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import KafkaError

from spark_jobs import kafka_errors
from spark_jobs.kafka_errors import Refusals

AUTH = KafkaError(KafkaError.SASL_AUTHENTICATION_FAILED, "token expired")


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [100.0]
    monkeypatch.setattr(kafka_errors.time, "monotonic", lambda: now[0])
    return now


def test_an_auth_error_is_final_only_after_the_grace_without_progress(clock: list[float]) -> None:
    refusals = Refusals(grace_s=10)
    refusals.on_error(AUTH)
    clock[0] += 9.9
    assert refusals.final() is None
    refusals.on_error(AUTH)  # a later one does not restart the grace
    clock[0] += 0.1
    assert refusals.final() is AUTH


def test_progress_forgives_the_auth_errors_before_it(clock: list[float]) -> None:
    refusals = Refusals(grace_s=10)
    refusals.on_error(AUTH)
    clock[0] += 8
    refusals.progressed()  # the client reconnected with a refreshed token and read or delivered
    clock[0] += 8
    assert refusals.final() is None
    assert refusals.last_auth is AUTH  # still named if the work fails otherwise (unacknowledged records)
    refusals.on_error(AUTH)
    clock[0] += 10
    assert refusals.final() is AUTH


def test_a_fatal_error_is_final_at_once_and_other_errors_never(clock: list[float]) -> None:
    refusals = Refusals(grace_s=10)
    refusals.on_error(KafkaError(KafkaError._TRANSPORT, "broker down"))
    clock[0] += 60
    assert refusals.final() is None
    fatal = KafkaError(KafkaError._FENCED, "fenced", fatal=True)
    refusals.on_error(fatal)
    assert refusals.final() is fatal


def _stats(**states: str | tuple[str, float]) -> str:
    """librdkafka's statistics JSON, reduced to what ``Refusals.on_stats`` reads: each broker's state,
    and how long it has been in it (``stateage``, microseconds; 0.1 s unless given)."""
    def broker(name: str, state: str | tuple[str, float]) -> dict[str, object]:
        state, age_s = state if isinstance(state, tuple) else (state, 0.1)
        return {"name": name, "state": state, "stateage": int(age_s * 1e6)}

    return json.dumps({"name": "rdkafka#producer-1", "brokers": {
        f"sasl_plaintext://127.0.0.1:9092/{name}": broker(name, state) for name, state in states.items()}})


def test_a_broker_authenticated_since_forgives_the_auth_errors_before_it(clock: list[float]) -> None:
    refusals = Refusals(grace_s=10)
    refusals.on_error(AUTH)  # a re-authentication with a stale token, refused
    refusals.on_stats(_stats(bootstrap="INIT", **{"1": "AUTH_REQ"}))  # reconnecting: not yet
    clock[0] += 5
    refusals.on_stats(_stats(**{"1": "UP"}))  # reconnected with a fresh token: accepted
    clock[0] += 30  # then the broker stalls, and nothing is read or acknowledged
    assert refusals.final() is None


def test_no_refusal_is_judged_while_the_cluster_does_not_answer(clock: list[float]) -> None:
    refusals = Refusals(grace_s=10)
    refusals.on_error(AUTH)  # a stale token refused, and the broker stalls before the client reconnects
    for waited in range(1, 19):  # 18 s with the new connection waiting for the broker's answer
        clock[0] += 1
        refusals.on_stats(_stats(**{"1": ("APIVERSION_QUERY", waited)}))
    assert refusals.final() is None
    clock[0] += 9.9  # the broker is back and, still, nothing but refusals
    assert refusals.final() is None
    clock[0] += 0.1
    assert refusals.final() is AUTH


def test_no_broker_up_leaves_refused_credentials_final(clock: list[float]) -> None:
    refusals = Refusals(grace_s=10)
    for _ in range(10):  # a wrong password: every connection fails in its authentication, answered at once
        refusals.on_error(AUTH)
        refusals.on_stats(_stats(bootstrap=("AUTH_REQ", 0.01), **{"1": ("TRY_CONNECT", 3)}))
        clock[0] += 1
    assert refusals.final() is AUTH


def test_clients_report_their_statistics_to_the_refusals() -> None:
    refusals = Refusals()
    config = refusals.client_config()
    assert (config["error_cb"], config["stats_cb"]) == (refusals.on_error, refusals.on_stats)
    assert config["statistics.interval.ms"] > 0
