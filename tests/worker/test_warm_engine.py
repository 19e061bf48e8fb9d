"""The warm engine with real Spark (``local[2]``) and the sandbox Kafka: run after run on one
resident driver, a cancel and a timeout while a Spark job runs, an engine killed or hung (stopped)
mid-run or between runs, and the engine replaced after N runs, above its memory bound, when the code
changes and when idle; a run whose processes pass the run's memory bound while it runs is killed.

A run is held inside its Spark job by the sandbox refusing every fetch (the watermarks still
answer), so that a cancel, timeout or kill lands while Spark executes the run's tasks. The same
faults end to end (worker, Redis, API) are in tests/faults and tests/runs, in both engine modes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from spark_jobs.spec import RunResult, RunSpec
from tests.fixtures.kafka import produce_gzip
from tests.runs.helpers import spark_job_pgids
from tests.spark_jobs.helpers import RUN_TIMEOUT_S, SETTINGS, coordinates, make_spec, read_table
from worker.launch import EngineLimits, WarmLauncher
from worker.launch import warm as warm_module
from worker.launch.processes import TERM_GRACE_S

pytestmark = pytest.mark.slow



@pytest.fixture
def warm() -> Iterator[WarmLauncher]:
    launcher = WarmLauncher(SETTINGS)
    yield launcher
    launcher.close()


def _launch(launcher: WarmLauncher, spec: RunSpec, workdir: Path, *, timeout_s: float = RUN_TIMEOUT_S,
            cancel: threading.Event | None = None, log: list[str] | None = None) -> RunResult:
    lines = log if log is not None else []
    return launcher.launch(spec, workdir=workdir, timeout_s=timeout_s, on_log_line=lines.append, cancel=cancel)


def _gone(pid: int, within_s: float = 15) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def _wait_until_running(run_id: str, within_s: float = 60) -> set[int]:
    deadline = time.monotonic() + within_s
    while not (groups := spark_job_pgids(run_id)):
        assert time.monotonic() < deadline, f"run {run_id} never started on the engine"
        time.sleep(0.05)
    return groups


def _spec(bootstrap: str, topic: str, placed: dict[int, list[int]], uri: str, *, version: int = 1,
          pipeline_id: str = "warm", halves: slice = slice(None), **source: object) -> RunSpec:
    ranges = {topic: {str(p): (offsets[halves][0], offsets[halves][-1] + 1) for p, offsets in placed.items()}}
    target = {"type": "delta", "uri": uri} | ({"quarantine_uri": f"{uri}__quarantine"} if source.get("value_format") == "json" else {})
    return make_spec(bootstrap, ranges, target, version=version, pipeline_id=pipeline_id, **source)


def test_runs_after_the_first_reuse_the_engine_and_land_exactly_once(sandbox_kafka, kafka_topic, produce_keyed, warm,
                                                                     tmp_path: Path) -> None:
    topic = kafka_topic(partitions=3)
    placed = produce_keyed(sandbox_kafka.bootstrap_servers, topic, 90, value=lambda i: f'{{"n": {i}}}'.encode())
    uri = str(tmp_path / "events")
    log: list[str] = []
    gone = subprocess.Popen(["true"])
    gone.wait()
    left = Path(tempfile.gettempdir()) / f"inlet-engine-{gone.pid}-left"  # a killed worker's engine folder
    left.mkdir()
    # A string run, then a json run (both plain tasks that decode their records): one engine.
    first = _launch(warm, _spec(sandbox_kafka.bootstrap_servers, topic, placed, uri, halves=slice(0, 15),
                                value_format="string"), tmp_path, log=log)
    engine = warm.engine_pid
    second = _launch(warm, _spec(sandbox_kafka.bootstrap_servers, topic, placed, uri, version=2, halves=slice(15, None),
                                 value_format="json", schema="n INT"), tmp_path, log=log)

    assert (first.status, second.status) == ("succeeded", "succeeded"), (first.error, second.error)
    assert engine is not None and warm.engine_pid == engine
    assert (first.rows_written, second.rows_written) == (45, 45)
    assert first.delta_version is not None and second.delta_version is not None and second.delta_version > first.delta_version
    assert coordinates(read_table(uri)) == sorted((p, o) for p, offsets in placed.items() for o in offsets)
    assert any("run " in line and second.run_id in line for line in log), "the run's own log lines reach its sink"
    assert not any("inlet-engine: the output of run" in line for line in log), "the end of a run's output is no log line"
    assert not left.exists(), "the folder of an engine whose worker is gone is swept when an engine starts"


def test_a_cancel_stops_the_runs_spark_job_and_the_engine_serves_the_next_run(sandbox_kafka, kafka_topic, produce_keyed,
                                                                              kafka_faults, warm, tmp_path: Path) -> None:
    topic = kafka_topic(partitions=2)
    placed = produce_keyed(sandbox_kafka.bootstrap_servers, topic, 40)
    uri = str(tmp_path / "events")
    spec = _spec(sandbox_kafka.bootstrap_servers, topic, placed, uri, value_format="string", stall_timeout_s=600)
    kafka_faults.hold_fetches()
    cancel = threading.Event()
    timing: dict[str, float] = {}

    def cancel_once_running() -> None:
        _wait_until_running(spec.run_id, within_s=120)
        time.sleep(1.0)  # inside the read job's tasks by now
        timing["cancelled_at"] = time.monotonic()
        cancel.set()

    threading.Thread(target=cancel_once_running, daemon=True).start()
    log: list[str] = []
    cancelled = _launch(warm, spec, tmp_path, cancel=cancel, log=log)
    stopped_in = time.monotonic() - timing["cancelled_at"]
    engine = warm.engine_pid

    assert cancelled.error is not None and cancelled.error.kind == "cancelled", cancelled.error
    # The engine is kept only if its run stopped within the launcher's grace after the cancel was seen
    # (else it is killed): that is the claim; the wall bound beside it allows the launcher's polling.
    assert engine is not None, f"the engine did not stop its run within {TERM_GRACE_S:.0f}s and was killed"
    assert stopped_in < TERM_GRACE_S + 2, f"the run took {stopped_in:.1f}s to stop"
    assert not spark_job_pgids(spec.run_id) and not (Path(uri) / "_delta_log").exists()
    # The run's last line (written just before its result, which reaches the worker first) is in its log.
    assert any(f"run {spec.run_id} failed: cancelled" in line for line in log), "\n".join(x[:200] for x in log if "inlet" in x)

    kafka_faults.reset()
    again = _launch(warm, spec, tmp_path)
    assert again.status == "succeeded" and warm.engine_pid == engine, again.error
    assert coordinates(read_table(uri)) == sorted((p, o) for p, offsets in placed.items() for o in offsets)


def test_a_timeout_stops_the_run_and_a_killed_engine_fails_its_run_as_crashed(sandbox_kafka, kafka_topic, produce_keyed,
                                                                              kafka_faults, warm, tmp_path: Path) -> None:
    topic = kafka_topic(partitions=2)
    placed = produce_keyed(sandbox_kafka.bootstrap_servers, topic, 40)
    uri = str(tmp_path / "events")
    spec = _spec(sandbox_kafka.bootstrap_servers, topic, placed, uri, value_format="string", stall_timeout_s=600)
    warmed = _launch(warm, _spec(sandbox_kafka.bootstrap_servers, topic, placed, str(tmp_path / "other"),
                                 pipeline_id="other", value_format="string"), tmp_path)
    assert warmed.status == "succeeded", warmed.error
    kafka_faults.hold_fetches()

    began = time.monotonic()
    timed_out = _launch(warm, spec, tmp_path, timeout_s=5)
    assert timed_out.error is not None and timed_out.error.kind == "timeout", timed_out.error
    assert time.monotonic() - began < 15 and not spark_job_pgids(spec.run_id)

    engine = warm.engine_pid
    assert engine is not None
    folder = Path(os.readlink(f"/proc/{engine}/cwd"))  # the engine's own: its code, its socket, Spark's scratch
    assert list(folder.glob("spark-*")) and list(folder.glob("blockmgr-*")), sorted(p.name for p in folder.iterdir())
    killer = threading.Thread(target=lambda: os.killpg(min(_wait_until_running(spec.run_id)), signal.SIGKILL), daemon=True)
    killer.start()
    crashed = _launch(warm, spec, tmp_path)
    assert crashed.error is not None and crashed.error.kind == "crashed", crashed.error
    assert _gone(engine) and warm.engine_pid is None
    assert not folder.exists()  # a killed JVM removes nothing itself: its jars' copies (23 MB) went with the folder

    kafka_faults.reset()
    again = _launch(warm, spec, tmp_path)
    assert again.status == "succeeded", again.error
    assert warm.engine_pid not in (None, engine)
    assert coordinates(read_table(uri)) == sorted((p, o) for p, offsets in placed.items() for o in offsets)


def test_an_engine_is_replaced_after_its_runs_above_its_memory_on_new_code_past_its_run_bound_and_when_idle(
    sandbox_kafka, kafka_topic, produce_keyed, warm, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    topic = kafka_topic(partitions=1)
    placed = produce_keyed(sandbox_kafka.bootstrap_servers, topic, 10)
    versions = iter(range(1, 100))

    def run() -> int | None:
        """A run (each a new version of one table); the engine left afterwards."""
        spec = _spec(sandbox_kafka.bootstrap_servers, topic, placed, str(tmp_path / "t"), version=next(versions),
                     value_format="string")
        result = _launch(warm, spec, tmp_path)
        assert result.status == "succeeded", result.error
        return warm.engine_pid

    first = run()
    assert first is not None
    warm.limits = replace(warm.limits, max_runs=1)
    assert run() == first  # the engine's second run: its replacement starts beside it, and it serves on
    warm.limits = EngineLimits()
    assert warm.replacement_started(timeout_s=180)
    second = run()  # the replacement took over before this run, without a pause
    assert second not in (None, first) and _gone(first)

    warm.limits = replace(warm.limits, max_runs=500, max_memory_mb=256)  # any engine holds more
    assert run() == second
    warm.limits = EngineLimits()
    assert warm.replacement_started(timeout_s=180)
    kept = run()
    assert kept not in (None, second) and _gone(second)
    monkeypatch.setattr(warm_module, "code_digest", lambda: "new code")
    replaced = run()
    assert kept and replaced and replaced != kept and _gone(kept)

    # While a run runs (issue 52): 12 records of 48 MiB of zeros (48 KB each in Kafka), its batches allowed to
    # hold them all, past a bound 300 MiB above what the engine holds: killed mid-run, resource_exhausted.
    heavy = kafka_topic(partitions=1)
    produce_gzip(sandbox_kafka.bootstrap_servers, heavy, [bytes(48 << 20)] * 12)
    held = warm.engine_memory_bytes()
    assert held is not None
    warm.settings = replace(SETTINGS, run_memory_mb=(held >> 20) + 300)
    spec = make_spec(sandbox_kafka.bootstrap_servers, {heavy: {"0": (0, 12)}}, {"type": "delta", "uri": str(tmp_path / "heavy")},
                     max_record_bytes=64 << 20, max_batch_bytes=4 << 30)
    result = _launch(warm, spec, tmp_path)
    assert result.status == "failed" and result.error is not None and result.error.kind == "resource_exhausted", result.error
    assert f"past the bound of {(held >> 20) + 300:,} MiB" in result.error.message
    assert _gone(replaced) and warm.engine_pid is None
    warm.settings = SETTINGS

    warm.limits = replace(warm.limits, idle_s=1.0)
    run()  # arms the idle timer with the new limit
    idle = warm.engine_pid
    assert idle is not None and _gone(idle, within_s=15) and warm.engine_pid is None


def test_a_hung_engine_is_replaced_before_a_run_and_fails_the_run_it_hangs_in(sandbox_kafka, kafka_topic, produce_keyed,
                                                                                kafka_faults, tmp_path: Path) -> None:
    topic = kafka_topic(partitions=2)
    placed = produce_keyed(sandbox_kafka.bootstrap_servers, topic, 40)
    uri = str(tmp_path / "events")
    # 10 s: a fresh engine on 2 busy cores (xdist runs Spark beside it) has been silent for over 5 s mid-run.
    warm = WarmLauncher(SETTINGS, EngineLimits(hung_after_s=10))
    try:
        warmed = _launch(warm, _spec(sandbox_kafka.bootstrap_servers, topic, placed, str(tmp_path / "other"),
                                     pipeline_id="other", value_format="string"), tmp_path)
        hung = warm.engine_pid
        assert warmed.status == "succeeded" and hung is not None, warmed.error
        os.killpg(hung, signal.SIGSTOP)  # a JVM and driver that answer nothing, as in a deadlock

        first = _launch(warm, _spec(sandbox_kafka.bootstrap_servers, topic, placed, uri, halves=slice(0, 10),
                                    value_format="string"), tmp_path)
        assert first.status == "succeeded", first.error
        assert _gone(hung) and warm.engine_pid not in (None, hung), "the hung engine was pinged, killed and replaced"

        engine = warm.engine_pid
        spec = _spec(sandbox_kafka.bootstrap_servers, topic, placed, uri, version=2, halves=slice(10, None),
                     value_format="string")
        kafka_faults.hold_fetches()
        threading.Thread(target=lambda: os.killpg(min(_wait_until_running(spec.run_id)), signal.SIGSTOP), daemon=True).start()
        began = time.monotonic()
        crashed = _launch(warm, spec, tmp_path)
        assert crashed.error is not None and crashed.error.kind == "crashed" and "hung" in crashed.error.message
        assert time.monotonic() - began < 30 and engine is not None and _gone(engine)

        kafka_faults.reset()
        again = _launch(warm, spec, tmp_path)
        assert again.status == "succeeded", again.error
        assert coordinates(read_table(uri)) == sorted((p, o) for p, offsets in placed.items() for o in offsets)
    finally:
        warm.close()
