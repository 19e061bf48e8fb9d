"""The fixed cost of a run through the whole stack (API, Redis, Celery worker, Spark, Delta commit,
offsets commit) on each run engine, measured in the same process: spark-submit per run (the
reference) and the warm engine. Per engine it prints a one-record run's trigger → succeeded (the
warm engine's first run, which starts it, is reported apart) and the small runs per minute of
``--pipelines`` pipelines triggered at once on one worker; then warm beside submit.

    .venv/bin/python bench/run_fixed_cost.py [--runs 5] [--pipelines 20] [--engines submit,warm] [--concurrency 1]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
from confluent_kafka import Producer

from cli.local_stack import LocalStack, free_port, wait_until

BENCH_OPERATOR = "bench-operator-token-0123456789abcdef"

TERMINAL = {"succeeded", "failed", "cancelled", "skipped"}


@dataclass
class Figures:
    first_s: float
    one_record_s: list[float]
    runs_per_minute: float


def produce(bootstrap: str, topic: str, n: int, partition: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(n):
        producer.produce(topic, key=f"k{i}".encode(), value=b'{"n": 1}', partition=partition)
    producer.flush(10)


def wait_for(api: httpx.Client, run_id: str) -> dict:
    run = wait_until(lambda: (b := api.get(f"/runs/{run_id}").json())["state"] in TERMINAL and b, 900, "a run", 0.05)
    assert run["state"] == "succeeded", run
    return run


def run_once(api: httpx.Client, pipeline_id: str) -> float:
    started = time.perf_counter()
    wait_for(api, api.post(f"/pipelines/{pipeline_id}/runs").json()["id"])
    return time.perf_counter() - started


def measure(engine: str, runs: int, pipelines: int, concurrency: int) -> Figures:
    stack = LocalStack(Path(tempfile.mkdtemp(prefix="inlet-bench-")))
    try:
        bootstrap = stack.start_sandbox("bench:1", "many:1")
        stack.start_redis()
        stack.env |= {"INLET_ADMIN_TOKEN": BENCH_OPERATOR, "INLET_RUN_ENGINE": engine, "INLET_SPARK_MASTER": "local[2]"}
        api = stack.start_inlet(api_port=free_port(), scheduler=False, worker_concurrency=concurrency)
        operator = {"Authorization": f"Bearer {BENCH_OPERATOR}"}
        tenant = api.post("/tenants", json={"name": "bench"}, headers=operator).json()
        key = api.post(f"/tenants/{tenant['id']}/api-keys", json={"name": "b", "role": "editor"}, headers=operator).json()
        api.headers["Authorization"] = f"Bearer {key['key']}"
        conn = api.post("/connections", json={"name": "sandbox", "bootstrap_servers": bootstrap}).json()

        def pipeline(name: str, topic: str) -> str:
            return str(api.post("/pipelines", json={
                "name": name, "source": {"connection_id": conn["id"], "topics": [topic]},
                "target": {"type": "delta", "path": f"bench/{name}"}, "state": "paused"}).json()["id"])

        single = pipeline("single", "bench")
        produce(bootstrap, "bench", 1)
        first = run_once(api, single)  # the warm engine starts here
        timings = []
        for _ in range(runs):
            produce(bootstrap, "bench", 1)
            timings.append(run_once(api, single))

        # Small runs of many pipelines at once: a few records each, all triggered, one worker.
        many = [pipeline(f"many-{i}", "many") for i in range(pipelines)]
        produce(bootstrap, "many", 20)
        started = time.perf_counter()
        run_ids = [api.post(f"/pipelines/{p}/runs").json()["id"] for p in many]
        for run_id in run_ids:
            wait_for(api, run_id)
        elapsed = time.perf_counter() - started
        return Figures(first, timings, 60 * pipelines / elapsed)
    finally:
        stack.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="one-record runs to time after the first")
    parser.add_argument("--pipelines", type=int, default=20, help="pipelines triggered at once for runs/minute")
    parser.add_argument("--engines", default="submit,warm", help="run engines to measure, the reference first")
    parser.add_argument("--concurrency", type=int, default=1, help="the worker's processes (each with its engine)")
    args = parser.parse_args()

    figures = {engine: measure(engine, args.runs, args.pipelines, args.concurrency) for engine in args.engines.split(",")}
    for engine, f in figures.items():
        print(f"{engine:>6}: one-record run, trigger → succeeded: median {statistics.median(f.one_record_s):.2f}s "
              f"(min {min(f.one_record_s):.2f}s, max {max(f.one_record_s):.2f}s, n={len(f.one_record_s)}; "
              f"the first {f.first_s:.2f}s); {args.pipelines} pipelines at once: {f.runs_per_minute:.1f} runs/minute "
              f"(one worker, --concurrency {args.concurrency})")
    if {"submit", "warm"} <= figures.keys():
        submit, warm = figures["submit"], figures["warm"]
        print(f"warm vs submit: one-record run {statistics.median(warm.one_record_s) / statistics.median(submit.one_record_s):.2f}×"
              f" the time; {warm.runs_per_minute / submit.runs_per_minute:.1f}× the runs per minute")


if __name__ == "__main__":
    main()
