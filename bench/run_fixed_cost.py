"""The fixed cost of one run: trigger → succeeded for a one-record batch, through the whole stack
(API, Redis, Celery worker, spark-submit, Delta commit, offsets commit), and runs per minute when
many pipelines run one after another on this machine. Prints figures.

    .venv/bin/python bench/run_fixed_cost.py [--runs 3] [--pipelines 4]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer

from cli.local_stack import LocalStack, free_port, wait_until

TERMINAL = {"succeeded", "failed", "cancelled", "skipped"}


def produce(bootstrap: str, topic: str, n: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(n):
        producer.produce(topic, key=f"k{i}".encode(), value=b'{"n": 1}')
    producer.flush(10)


def run_once(api, pipeline_id: str) -> tuple[float, dict]:  # type: ignore[no-untyped-def]
    started = time.perf_counter()
    run_id = api.post(f"/pipelines/{pipeline_id}/runs").json()["id"]
    run = wait_until(lambda: (b := api.get(f"/runs/{run_id}").json())["state"] in TERMINAL and b, 600, "a run", 0.1)
    return time.perf_counter() - started, run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="one-record runs to time")
    parser.add_argument("--pipelines", type=int, default=4, help="pipelines run back to back for runs/minute")
    args = parser.parse_args()

    stack = LocalStack(Path(tempfile.mkdtemp(prefix="inlet-bench-")))
    try:
        bootstrap = stack.start_sandbox("bench:1")
        stack.start_redis()
        stack.env["INLET_ADMIN_TOKEN"] = "bench"
        api = stack.start_inlet(api_port=free_port(), scheduler=False)
        operator = {"Authorization": "Bearer bench"}
        tenant = api.post("/tenants", json={"name": "bench"}, headers=operator).json()
        key = api.post(f"/tenants/{tenant['id']}/api-keys", json={"name": "b", "role": "editor"}, headers=operator).json()
        api.headers["Authorization"] = f"Bearer {key['key']}"
        conn = api.post("/connections", json={"name": "sandbox", "bootstrap_servers": bootstrap}).json()
        pipelines = [api.post("/pipelines", json={
            "name": f"bench-{i}", "source": {"connection_id": conn["id"], "topics": ["bench"]},
            "target": {"type": "delta", "path": f"bench/{i}"}, "state": "paused"}).json()["id"]
            for i in range(max(args.pipelines, 1))]

        timings = []
        for _ in range(args.runs):
            produce(bootstrap, "bench", 1)
            seconds, run = run_once(api, pipelines[0])
            assert run["state"] == "succeeded", run
            timings.append(seconds)
        print(f"one-record run, trigger → succeeded: median {statistics.median(timings):.1f}s "
              f"(min {min(timings):.1f}s, max {max(timings):.1f}s, n={len(timings)})")

        produce(bootstrap, "bench", 100)
        started = time.perf_counter()
        for pipeline_id in pipelines:
            seconds, run = run_once(api, pipeline_id)
            assert run["state"] == "succeeded", run
        elapsed = time.perf_counter() - started
        print(f"{len(pipelines)} pipelines' runs in a row: {elapsed:.1f}s → {60 * len(pipelines) / elapsed:.1f} runs/minute "
              "on this machine (one worker, one spark-submit at a time)")
    finally:
        stack.stop()


if __name__ == "__main__":
    main()
