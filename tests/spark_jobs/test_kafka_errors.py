"""When a job's Kafka client gives up on the errors librdkafka reports (``kafka_errors.Refusals``):
a fatal error at once, an auth error only once it has gone on for the grace with no progress."""

from __future__ import annotations

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
