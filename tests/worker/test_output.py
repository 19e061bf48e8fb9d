"""A child's output as the worker reads it (``worker.launch.processes.Output``): a run's lines reach
its log up to the line that ends them, even when they arrive after the run's result did."""

from __future__ import annotations

import subprocess
import sys
import time

from spark_jobs.spec import end_of_output
from worker.launch.processes import Output

_CHILD = """
import sys, time
print("first", flush=True)
time.sleep(float(sys.argv[1]))  # the lines still on their way when the result is already in
print("last: token s3cret", flush=True)
print(sys.argv[2], flush=True)
print("between runs", flush=True)
"""


def _child(delay_s: float, marker: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", _CHILD, str(delay_s), marker], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def test_lines_up_to_the_end_of_a_runs_output_reach_its_listener_and_none_after() -> None:
    marker = end_of_output("run-1")
    child = _child(0.5, marker)
    output = Output(child, name="test-output")
    lines: list[str] = []
    output.listen(lines.append, ["s3cret"], until=marker)

    started = time.monotonic()
    output.stop_listening(wait_s=30)  # called at once, as when the result comes before the output
    waited = time.monotonic() - started
    child.wait()
    output.join(5)

    assert lines == ["first", "last: token ***"]
    assert 0.4 < waited < 30, waited
    assert "between runs" in output.last_lines() and marker not in output.last_lines()


def test_a_child_that_never_ends_its_output_is_waited_for_no_longer_than_asked() -> None:
    child = _child(0.0, "some other line")
    output = Output(child, name="test-output")
    lines: list[str] = []
    output.listen(lines.append, [], until=end_of_output("run-2"))
    child.wait()
    output.join(5)

    started = time.monotonic()
    output.stop_listening(wait_s=0.3)
    waited = time.monotonic() - started

    assert lines == ["first", "last: token s3cret", "some other line", "between runs"]
    assert 0.25 < waited < 5, waited
