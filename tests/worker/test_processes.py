"""The process plumbing of a launch (``worker.launch.processes``): a run's lines reach its log up to
the line that ends them, even when they arrive after the run's result did; an engine's memory and
its stop reach the Python daemon, which leaves the engine's process group as Spark's does."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

from spark_jobs.spec import end_of_output
from worker.launch.processes import MemoryWatch, Output, kill_group, tree_memory_bytes
from worker.launch.submit import wait_for_exit

_WRITER = """
import sys, time
sys.stdin.readline()  # the test listens first
print("first", flush=True)
time.sleep(float(sys.argv[1]))  # the lines still on their way when the result is already in
print("last: token s3cret", flush=True)
print(sys.argv[2], flush=True)
print("between runs", flush=True)
"""


def _writer(delay_s: float, marker: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", _WRITER, str(delay_s), marker], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _go(child: subprocess.Popen[str]) -> None:
    assert child.stdin is not None
    child.stdin.write("go\n")
    child.stdin.close()


def test_lines_up_to_the_end_of_a_runs_output_reach_its_listener_and_none_after() -> None:
    marker = end_of_output("run-1")
    child = _writer(0.5, marker)
    output = Output(child, name="test-output")
    lines: list[str] = []
    output.listen(lines.append, ["s3cret"], until=marker)
    _go(child)

    started = time.monotonic()
    output.stop_listening(wait_s=30)  # called at once, as when the result comes before the output
    waited = time.monotonic() - started
    child.wait()
    output.join(5)

    assert lines == ["first", "last: token ***"]
    assert 0.4 < waited < 30, waited
    assert "between runs" in output.last_lines() and marker not in output.last_lines()


def test_a_child_that_never_ends_its_output_is_waited_for_no_longer_than_asked() -> None:
    child = _writer(0.0, "some other line")
    output = Output(child, name="test-output")
    lines: list[str] = []
    output.listen(lines.append, [], until=end_of_output("run-2"))
    _go(child)
    child.wait()
    output.join(5)

    started = time.monotonic()
    output.stop_listening(wait_s=0.3)
    waited = time.monotonic() - started

    assert lines == ["first", "last: token s3cret", "some other line", "between runs"]
    assert 0.25 < waited < 5, waited


_TWO_RUNS = """
import sys
sys.stdin.readline()
print("a's first", flush=True)
sys.stdin.readline()  # a's end comes after a stopped waiting for it, while b listens
print("a's late line: s3cret", flush=True)
print(sys.argv[1], flush=True)
print("b's line", flush=True)
print(sys.argv[2], flush=True)
"""


def test_a_runs_end_that_comes_too_late_ends_no_other_run_and_its_late_lines_stay_redacted() -> None:
    a_end, b_end = end_of_output("launch-a"), end_of_output("launch-b")
    child = subprocess.Popen([sys.executable, "-c", _TWO_RUNS, a_end, b_end], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert child.stdin is not None
    output = Output(child, name="test-output")
    a: list[str] = []
    b: list[str] = []
    output.listen(a.append, ["s3cret"], until=a_end)
    child.stdin.write("go\n")
    child.stdin.flush()
    deadline = time.monotonic() + 10
    while not a and time.monotonic() < deadline:
        time.sleep(0.01)
    output.stop_listening(wait_s=0.1)  # a's end has not come
    output.listen(b.append, ["other"], until=b_end)
    _go(child)
    output.stop_listening(wait_s=30)
    child.wait()

    assert a == ["a's first"]
    assert b == ["a's late line: ***", "b's line"]  # a's end did not end b's lines


_PARENT = """
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", sys.argv[1]], stdout=subprocess.PIPE)
assert child.stdout.readline() == b"ready\\n"
print(child.pid, flush=True)
child.wait()
"""
# As Spark's Python daemon does: a process group of its own, then memory it holds.
_DAEMON = "import os, time; os.setpgid(0, 0); held = b'x' * (200 * 2**20); print('ready', flush=True); time.sleep(120)"


@contextmanager
def _engine_with_daemon() -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """A process in a group of its own (as an engine is), whose child moved to another group."""
    parent = subprocess.Popen([sys.executable, "-c", _PARENT, _DAEMON], stdout=subprocess.PIPE, start_new_session=True)
    child = None
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert os.getpgid(child) == child != parent.pid
        yield parent, child
    finally:
        for kill, pid in ((os.killpg, parent.pid), (os.kill, child)):
            if pid is not None:
                try:
                    kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        parent.wait(10)


def _gone(pid: int, within_s: float = 5.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                if stat.read().rsplit(")", 1)[1].split()[0] == "Z":  # dead, not yet reaped by init
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


def test_an_engine_s_memory_counts_the_python_daemon_that_left_its_process_group() -> None:
    with _engine_with_daemon() as (parent, _):
        assert tree_memory_bytes(parent.pid) > 200 * 2**20  # the child's 200 MiB, and the interpreters


def test_killing_an_engine_kills_the_python_daemon_that_left_its_process_group() -> None:
    with _engine_with_daemon() as (parent, child):
        kill_group(parent)  # type: ignore[arg-type]  # a bytes Popen: kill_group reads only its pid

        assert parent.returncode == -signal.SIGKILL
        assert _gone(child), "the daemon outlived its engine"


def test_a_child_past_its_memory_bound_is_killed_while_it_runs() -> None:
    """The watch a spark-submit per run is waited with (``submit.wait_for_exit``): the child's tree, a
    grandchild holding 400 MiB included, is past a 200 MiB bound and killed at once; under the bound it
    runs to its end."""
    holder = "import time; held = bytearray(400 << 20); time.sleep(60)"
    child = subprocess.Popen([sys.executable, "-c", f"import subprocess, sys; subprocess.run([sys.executable, '-c', {holder!r}])"],
                             start_new_session=True)
    began = time.monotonic()
    watch = MemoryWatch(child.pid, 200 << 20, every_s=0.1)
    assert wait_for_exit(child, deadline=began + 60, cancel=None, watch=watch) == "resource_exhausted"
    assert child.poll() is not None and time.monotonic() - began < 30
    assert watch.peak_bytes > 200 << 20 and "past the bound of 200 MiB" in watch.message(watch.peak_bytes)

    quiet = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    assert wait_for_exit(quiet, deadline=time.monotonic() + 60, cancel=None, watch=MemoryWatch(quiet.pid, 200 << 20)) is None
    assert quiet.returncode == 0
