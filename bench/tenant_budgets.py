"""A hostile tenant beside a quiet one, on one worker (issue 52): the bomb and the stall.

The bomb: tenant A produces ``--bombs`` gzip'd records of ``--bomb-mib`` MiB of zeros (as the issue
found: 6 of 256 MiB, 1.5 MB in Kafka, took a worker's tree to 7.6 GB) and triggers a raw run into
Delta; B triggers a one-record run at once. Printed: the worker's process tree's peak (the worker and
its engine, sampled every 0.1 s) against its bound and 3 GiB, A's run's outcome, and B's trigger →
succeeded beside B's run on the idle stack. Targets: the tree under its bound and 3 GiB; B within
30 s of its trigger.

The stall: A sends ``--stalls`` connection tests at once whose schema registry (a stand-in on
loopback) sends one byte every 2 s; meanwhile B's ``GET /me`` is timed. Printed: B's p50, p99 and
worst against the idle stack's, and how A's tests were answered. Target: B's worst ≤ 2 s.

    .venv/bin/python bench/tenant_budgets.py [--bombs 6] [--bomb-mib 256] [--stalls 20]
"""

from __future__ import annotations

import argparse
import gzip
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Self

import httpx
from confluent_kafka import Producer
from noisy_neighbour import BENCH_OPERATOR, pipeline, tenant_client, trigger  # bench/, beside this script

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.fixtures, as bench/fuzz_api.py

from cli.local_stack import LocalStack, free_port, wait_until
from tests.fixtures.loopback_http import serve
from worker.launch.processes import tree_memory_bytes

TERMINAL = {"succeeded", "failed", "cancelled", "skipped"}
MIB = 1 << 20


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": "gzip", "message.max.bytes": 1_000_000_000})
    for value in values:
        producer.produce(topic, value=value, partition=0)
        producer.flush(120)


def finished(client: httpx.Client, run_id: str, timeout_s: float = 900) -> dict:
    return wait_until(lambda: (b := client.get(f"/runs/{run_id}").json())["state"] in TERMINAL and b, timeout_s, "a run", 0.05)


class TreePeak:
    """The peak of a process tree's memory, sampled every 0.1 s by a thread of its own."""

    def __init__(self, root: int) -> None:
        self.root, self.peak, self._stop = root, 0, threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(0.1):
            self.peak = max(self.peak, tree_memory_bytes(self.root))

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


def trickle(handler: BaseHTTPRequestHandler) -> None:
    """A status line, then a byte every 2 s: never a registry's answer."""
    try:
        handler.wfile.write(b"HTTP/1.1 200 OK\r\n")
        for byte in b"Content-Type: application/json\r\n\r\n[]":
            time.sleep(2)
            handler.wfile.write(bytes([byte]))
            handler.wfile.flush()
    except OSError:  # the caller gave up
        pass


def me_latencies(client: httpx.Client, n: int) -> list[float]:
    took = []
    for _ in range(n):
        began = time.perf_counter()
        assert client.get("/me").status_code == 200
        took.append(time.perf_counter() - began)
        time.sleep(0.02)
    return took


def p(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1] if len(values) > 1 else values[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bombs", type=int, default=6, help="A's gzip'd records of zeros")
    parser.add_argument("--bomb-mib", type=int, default=256, help="MiB of zeros a record")
    parser.add_argument("--stalls", type=int, default=20, help="A's connection tests at once against a trickling registry")
    args = parser.parse_args()

    stack = LocalStack(Path(tempfile.mkdtemp(prefix="inlet-budgets-")))
    try:
        bootstrap = stack.start_sandbox("bomb:1", "quiet:1", brokers=1)
        stack.start_redis()
        stack.env |= {"INLET_ADMIN_TOKEN": BENCH_OPERATOR, "INLET_SPARK_MASTER": "local[2]"}
        api = stack.start_inlet(api_port=free_port(), scheduler=False, worker_concurrency=1)
        worker = next(process for name, process in stack.children if name == "worker")
        a, b = tenant_client(api, "tenant-a"), tenant_client(api, "tenant-b")
        connection = {"name": "sandbox", "bootstrap_servers": bootstrap}
        a_pipe = pipeline(a, a.post("/connections", json=connection).json()["id"], "a-bomb", "bomb")
        b_pipe = pipeline(b, b.post("/connections", json=connection).json()["id"], "b-one", "quiet")

        # The idle stack: B's first run starts the engine (not counted), then B's one-record runs.
        idle_runs = []
        for i in range(4):
            produce(bootstrap, "quiet", [b"%d" % i])
            began = time.perf_counter()
            assert finished(b, trigger(b, b_pipe))["state"] == "succeeded"
            idle_runs.append(time.perf_counter() - began)
        idle_me = me_latencies(b, 200)

        # The bomb.
        bomb = bytes(args.bomb_mib * MIB)
        produce(bootstrap, "bomb", [bomb] * args.bombs)
        in_kafka = len(gzip.compress(bomb, 6)) * args.bombs
        produce(bootstrap, "quiet", [b"after"])
        with TreePeak(worker.pid) as tree:
            a_run = trigger(a, a_pipe)
            b_began = time.perf_counter()
            b_run = trigger(b, b_pipe)
            b_done = finished(b, b_run)
            b_after_bomb = time.perf_counter() - b_began
            a_done = finished(a, a_run)
        bound = int(stack.env.get("INLET_RUN_MEMORY_MB", "2560"))

        # The stall.
        with contextmanager(serve)(trickle) as registry, ThreadPoolExecutor(args.stalls) as pool:
            body = {"name": "slow-registry", "bootstrap_servers": bootstrap, "schema_registry": {"url": registry}}
            tests = [pool.submit(a.post, "/connections:test", json=body, timeout=120) for _ in range(args.stalls)]
            time.sleep(1)
            stalled_me = me_latencies(b, 200)
            answers = Counter(f.result().status_code for f in tests)

        idle_b = statistics.median(idle_runs[1:])
        print(f"bomb: {args.bombs} records of {args.bomb_mib} MiB of zeros ({in_kafka / MIB:.1f} MiB gzip'd): "
              f"A's run {a_done['state']} ({(a_done.get('error') or {}).get('kind')}); the worker's tree peaked at "
              f"{tree.peak / MIB:,.0f} MiB (bound {bound:,} MiB + the worker; target < 3,072: "
              f"{'met' if tree.peak < 3 * 1024 * MIB else 'MISSED'}); B's one-record run {b_done['state']} "
              f"{b_after_bomb:.2f}s after its trigger, {b_after_bomb / idle_b:.2f}x its idle {idle_b:.2f}s "
              f"(target ≤ 30 s: {'met' if b_after_bomb <= 30 and b_done['state'] == 'succeeded' else 'MISSED'})")
        print(f"stall: {args.stalls} connection tests at once against a registry sending a byte every 2 s, answered "
              f"{dict(sorted(answers.items()))}; B's GET /me p50 {p(stalled_me, 50) * 1000:.1f} ms, p99 "
              f"{p(stalled_me, 99) * 1000:.1f} ms, worst {max(stalled_me) * 1000:.1f} ms; idle p50 "
              f"{p(idle_me, 50) * 1000:.1f} ms, p99 {p(idle_me, 99) * 1000:.1f} ms: p99 "
              f"{p(stalled_me, 99) / p(idle_me, 99):.2f}x idle (target worst ≤ 2 s: "
              f"{'met' if max(stalled_me) <= 2 else 'MISSED'})")
    finally:
        stack.stop()


if __name__ == "__main__":
    main()
