"""The engine's side of the protocol without Spark: a run its JVM refuses still ends in a result
(failed, nothing read or written), after the line that ends its output, and the engine is free for
the next run."""

from __future__ import annotations

import time
from typing import Any

import pytest

from spark_jobs.engine import Engine
from spark_jobs.spec import RunResult, RunSpec, end_of_output
from tests.spark_jobs.test_spec import spec_dict


class _RefusingContext:
    def setJobGroup(self, *args: object, **kwargs: object) -> None:
        raise RuntimeError("Py4JNetworkError: An error occurred while trying to connect to the Java server")


class _Session:
    sparkContext = _RefusingContext()


class _Channel:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)


def test_a_run_the_jvm_refuses_ends_in_a_failed_result_and_frees_the_engine(capsys: pytest.CaptureFixture[str]) -> None:
    channel = _Channel()
    engine = Engine(_Session(), channel)  # type: ignore[arg-type]
    spec = RunSpec.model_validate(spec_dict())

    engine._start(spec.to_json().encode(), "launch-1")
    deadline = time.monotonic() + 10
    while not channel.sent and time.monotonic() < deadline:
        time.sleep(0.01)

    result = RunResult.from_json(channel.sent[0]["result"])
    assert (result.run_id, result.status, result.rows_written) == (spec.run_id, "failed", 0)
    assert result.error is not None and result.error.kind == "internal" and "Py4JNetworkError" in result.error.message
    assert engine.running is None, "the engine takes the next run"
    assert end_of_output("launch-1") in capsys.readouterr().err.splitlines(), "the run's output ends before its result"
