"""The warm engine: a resident Spark driver that runs run after run for the worker that started it.

    spark-submit spark_jobs/engine.py --socket /tmp/inlet-engine-XXXX/engine.sock

One SparkSession lives as long as the process, so a run pays for no JVM, session or Python worker
start-up. The worker listens on the socket (in a folder only its user can enter) and the engine
connects to it. Specs, secrets included, come over it and stay in memory; results go back over
it. Messages are JSON lines:

    worker -> engine   {"op": "run", "spec": "<RunSpec JSON>", "launch": "<id>"}   {"op": "cancel"}   {"op": "ping"}
                       {"op": "stop"}
    engine -> worker   {"event": "ready", "pid": 123}   {"event": "result", "result": "<RunResult JSON>"}
                       {"event": "pong", "stopped": false}

A run's log lines go to the engine's output, which reaches the worker through Spark's JVM, often
after the result: the engine ends them with ``spec.end_of_output(<launch id>)`` before the result.

One run at a time, in a thread named after it (``ps -L`` shows ``run-<id>``). Its Spark jobs are
one job group, so a cancel stops them (interruptOnCancel) and the steps between jobs stop at the
run's next check, before its Delta commit at the latest. The engine exits at once when its worker
goes (the socket closes) or its JVM dies: nothing commits for a run nobody watches any more.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from pyspark.sql import SparkSession

from spark_jobs.job import configure_logging, execute, failed_before_start, parse_spec
from spark_jobs.spec import RunResult, end_of_output

if TYPE_CHECKING:
    from pyspark import SparkContext

log = logging.getLogger("inlet.engine")

_PR_SET_PDEATHSIG, _PR_SET_NAME = 1, 15


class Resident:
    """The engine's driver for ``job.execute``: the one session, never stopped by a run."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark

    @contextmanager
    def context(self, name: str) -> Iterator[SparkContext]:
        yield self.spark.sparkContext

    @contextmanager
    def session(self, name: str) -> Iterator[SparkSession]:
        yield self.spark


class Channel:
    """JSON lines over the worker's socket; sends from any thread."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._reader = sock.makefile("rb")
        self._lock = threading.Lock()

    def send(self, message: dict[str, Any]) -> None:
        with self._lock:
            self._sock.sendall(json.dumps(message).encode() + b"\n")

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for line in self._reader:
            yield json.loads(line)


class Engine:
    def __init__(self, spark: SparkSession, channel: Channel) -> None:
        self.driver = Resident(spark)
        self.channel = channel
        self.running: str | None = None  # the id of the run in progress
        self.cancelled = threading.Event()

    def serve(self) -> None:
        """Until the worker says stop; returns at once if the worker is gone."""
        self.channel.send({"event": "ready", "pid": os.getpid()})
        for message in self.channel:
            if message["op"] == "run":
                self._start(message["spec"].encode(), str(message.get("launch", "")))
            elif message["op"] == "cancel":
                self._cancel()
            elif message["op"] == "ping":  # answered through the JVM: a stopped or hung one answers nothing
                self.channel.send({"event": "pong", "stopped": self.driver.spark.sparkContext._jsc.sc().isStopped()})
            elif message["op"] == "stop":
                return
        # The socket closed without a stop: the worker died. A run may be between its last job and
        # its commit; leave now, before it gets there.
        log.error("the worker is gone: exiting without finishing the current run")
        os._exit(75)

    def _start(self, raw: bytes, launch: str) -> None:
        spec = parse_spec(raw)
        if isinstance(spec, RunResult):
            self._send_result(spec, launch)
            return
        if self.running is not None:  # the worker sends one run at a time
            raise RuntimeError(f"run {spec.run_id} sent while run {self.running} is in progress")
        self.running, self.cancelled = spec.run_id, threading.Event()

        def work() -> None:
            _name_thread(f"run-{spec.run_id}")
            spark = self.driver.spark
            try:
                # A new thread starts without a job group (nothing of an earlier run's carries over) and
                # without an active session in the JVM, through which a Python data source's writer is found.
                spark.sparkContext.setJobGroup(spec.run_id, f"inlet run {spec.run_id}", interruptOnCancel=True)
                SparkSession._get_j_spark_session_class(spark._jvm).setActiveSession(spark._jsparkSession)
            except Exception as exc:  # a JVM that cannot take a job: the run fails, the worker is told
                log.exception("run %s could not start on this engine", spec.run_id)
                result = failed_before_start(spec, exc)
            else:
                result = execute(spec, self.driver, self.cancelled)
            _name_thread("run-over")  # ps no longer shows a run that is over, even while the thread ends
            self.running = None  # before the result: the worker may send the next run at once
            self._send_result(result, launch)

        threading.Thread(target=work, name=f"run-{spec.run_id}", daemon=True).start()

    def _cancel(self) -> None:
        self.cancelled.set()
        if (run_id := self.running) is not None:
            self.driver.spark.sparkContext.cancelJobGroup(run_id)

    def _send_result(self, result: RunResult, launch: str) -> None:
        for handler in logging.getLogger().handlers:
            handler.flush()
        sys.stdout.flush()
        print(end_of_output(launch), file=sys.stderr, flush=True)  # after the run's lines, in the same stream
        self.channel.send({"event": "result", "result": result.to_json()})


def _prctl(option: int, value: int | bytes) -> None:
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None).prctl(option, value, 0, 0, 0)


def _name_thread(name: str) -> None:
    """The OS name of this thread (15 bytes at most), as ps -L and /proc/*/task/*/comm show it."""
    _prctl(_PR_SET_NAME, name.encode()[:15])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--socket", required=True)
    args = parser.parse_args(argv)
    configure_logging()
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)  # the JVM that started this driver is gone: so is the engine
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(args.socket)
    spark = SparkSession.builder.appName("inlet-engine").getOrCreate()
    Engine(spark, Channel(sock)).serve()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
