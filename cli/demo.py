"""``inlet demo``: the whole product doing its main job on this machine.

Starts the local stack on loopback (sandbox Kafka with a trickle of order events, Redis, the API,
a worker and the scheduler; SQLite and the local secret store under ``.inlet/demo``), then walks
through it over HTTP like a tenant would: tenant → key → connection → pipeline → runs on a
schedule → offsets with lag falling to zero → a dry-run replay applied in replace mode → no
duplicates. Everything it started is stopped on exit (Ctrl-C or ``--duration``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import time
from pathlib import Path
from typing import Any

import httpx

from cli.local_stack import ROOT, LocalStack, free_port, wait_until

ORDER_SCHEMA = ("event_id STRING, event_type STRING, occurred_at TIMESTAMP, order_id STRING, customer_id STRING, "
                "country STRING, currency STRING, total DECIMAL(12,2), status STRING")
TERMINAL = {"succeeded", "failed", "cancelled", "skipped"}


def say(text: str = "") -> None:
    print(text, flush=True)


def show_offsets(api: httpx.Client, pipeline_id: str) -> int:
    response = api.get(f"/pipelines/{pipeline_id}/offsets")
    if response.status_code != 200:
        say(f"  offsets: {response.status_code} {response.text[:200]}")
        return -1
    body = response.json()
    say("  topic[partition]   committed   latest   lag")
    for row in body["partitions"]:
        say(f"  {row['topic']}[{row['partition']}]".ljust(20) + f"{row['committed']!s:>10}{row['latest']!s:>9}{row['lag']!s:>6}")
    say(f"  total lag: {body['total_lag']}")
    return int(body["total_lag"] or 0)


def show_table(uri: str, limit: int = 3) -> int:
    from deltalake import DeltaTable

    table = DeltaTable(uri)
    data = table.to_pyarrow_table(columns=["partition", "offset", "order_id", "event_type", "total"])
    say(f"  Delta table {uri} (version {table.version()}): {data.num_rows} rows" + ("; a few:" if limit else ""))
    for row in data.slice(0, limit).to_pylist():
        say(f"    {json.dumps(row, default=str)}")
    return data.num_rows


def wait_run(api: httpx.Client, run_id: str) -> dict[str, Any]:
    run = wait_until(lambda: (b := api.get(f"/runs/{run_id}").json())["state"] in TERMINAL and b, 300, f"run {run_id}")
    say(f"  run #{run['seq']} {run['state']}: {run['records_read'] or 0} records in {run['duration_s'] or 0:.1f}s"
        + (f" (error: {run['error']['message'][:200]})" if run["error"] and run["state"] == "failed" else ""))
    return run


def walkthrough(api: httpx.Client, admin_token: str, bootstrap: str, storage_root: Path) -> tuple[str, str]:
    say("\n== 1. A tenant and its API key (operator token) ==")
    operator = {"Authorization": f"Bearer {admin_token}"}
    tenant = api.post("/tenants", json={"name": "acme"}, headers=operator).json()
    key = api.post(f"/tenants/{tenant['id']}/api-keys", json={"name": "demo", "role": "admin"}, headers=operator).json()
    say(f"  POST /tenants → {tenant['id']}; POST /tenants/{{id}}/api-keys → {key['prefix']}… (shown once)")
    api.headers["Authorization"] = f"Bearer {key['key']}"

    say("\n== 2. A Kafka connection (the sandbox cluster) ==")
    conn = api.post("/connections", json={"name": "sandbox", "bootstrap_servers": bootstrap}).json()
    test = api.post(f"/connections/{conn['id']}/test").json()
    say(f"  POST /connections → {conn['id']}; test: ok={test.get('ok')} brokers={len(test.get('brokers', []))} "
        f"topics={test.get('topics_visible')}")

    say("\n== 3. A pipeline: orders (json) → Delta, every 15 s ==")
    pipeline = api.post("/pipelines", json={
        "name": "orders-bronze",
        "source": {"connection_id": conn["id"], "topics": ["orders"], "value_format": "json", "schema": ORDER_SCHEMA,
                   "starting_offsets": "earliest", "max_offsets_per_run": 50000},
        "target": {"type": "delta", "path": "bronze/orders"},
        "schedule": {"interval_seconds": 15},
    }).json()
    say(f"  POST /pipelines → {pipeline['id']}; table at {pipeline['status']['target_uri']}")
    return pipeline["id"], pipeline["status"]["target_uri"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="inlet demo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=None, help="stop after this many seconds (default: Ctrl-C)")
    parser.add_argument("--port", type=int, default=8000, help="API port (a free one if taken)")
    parser.add_argument("--rate", type=float, default=50, help="sample events per second")
    args = parser.parse_args(argv)

    data_dir = ROOT / ".inlet" / "demo"
    shutil.rmtree(data_dir, ignore_errors=True)
    stack = LocalStack(data_dir)
    started = time.monotonic()
    stop_at = started + args.duration if args.duration else None
    admin_token = os.urandom(16).hex()
    try:
        signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
        say("== Starting the local stack ==")
        bootstrap = stack.start_sandbox("orders:6")
        say(f"  sandbox Kafka bootstrap servers: {bootstrap}")
        redis_url = stack.start_redis()
        say(f"  Redis at {redis_url}")
        api_port = args.port
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", api_port)) == 0:
                api_port = free_port()
        stack.env.update({"INLET_ADMIN_TOKEN": admin_token, "INLET_SCHEDULER_INTERVAL_S": "2", "INLET_RUN_LEASE_S": "30"})
        api = stack.start_inlet(api_port=api_port)
        trickle = stack.inlet("trickle", "sandbox-kafka", "trickle", "--topic", "orders", "--rate", str(args.rate),
                              "--state-file", str(stack.sandbox_state_file))
        base = str(api.base_url).rstrip("/")
        say(f"  API on {base}  (docs: {base}/docs, portal: {base}/portal; operator token: {admin_token})")
        say(f"  logs of every process: {data_dir}/*.log")

        pipeline_id, table_uri = walkthrough(api, admin_token, bootstrap, data_dir / "storage")

        say("\n== 4. Runs: one now, then on the schedule, while events keep arriving ==")
        seen: set[str] = set()
        seen.add(run_now(api, pipeline_id)["id"])
        show_table(table_uri)
        say("  … letting the schedule fire twice more")
        _follow_runs(api, pipeline_id, seen, count=2)
        say("  stopping the event trickle; one more run catches up to the end of every partition")
        os.killpg(trickle.pid, signal.SIGTERM)
        trickle.wait(20)
        run_now(api, pipeline_id)
        lag = show_offsets(api, pipeline_id)
        say(f"  lag is {'zero: the pipeline is caught up' if lag == 0 else lag}")

        say("\n== 5. A replay without duplicates: pause, dry run, apply in replace mode, resume ==")
        api.post(f"/pipelines/{pipeline_id}/pause")
        wait_until(lambda: not api.get(f"/pipelines/{pipeline_id}/runs?state=running").json()["total"]
                   and not api.get(f"/pipelines/{pipeline_id}/runs?state=queued").json()["total"], 300, "idle pipeline")
        rows_before = show_table(table_uri, limit=0)
        etag = api.get(f"/pipelines/{pipeline_id}/offsets").headers.get("etag", "*")
        body = {"shift_by": -100, "topics": ["orders"], "clamp": True, "replay_mode": "replace"}
        dry = api.patch(f"/pipelines/{pipeline_id}/offsets", json={**body, "dry_run": True}, headers={"If-Match": etag})
        say("  PATCH /pipelines/{id}/offsets (dry run) → before/after:")
        for row in dry.json().get("rows", []):
            say(f"    {row['topic']}[{row['partition']}]: {row['before']} → {row['after']}")
        applied = api.patch(f"/pipelines/{pipeline_id}/offsets", json=body, headers={"If-Match": etag})
        say(f"  applied: {applied.status_code}; resuming and running now")
        api.post(f"/pipelines/{pipeline_id}/resume")
        run_now(api, pipeline_id)
        rows_after = show_table(table_uri, limit=0)
        duplicates = _duplicates(table_uri)
        say(f"  rows before the replay: {rows_before}, after: {rows_after}, duplicate (partition, offset) pairs: {duplicates}")

        say("\n== The stack keeps running. Try: ==")
        say(f"  curl -H 'Authorization: Bearer {api.headers['Authorization'].split()[1]}' {base}/pipelines/{pipeline_id}/offsets")
        say("  Ctrl-C stops everything." if stop_at is None else f"  stopping in {max(stop_at - time.monotonic(), 0):.0f}s")
        while stop_at is None or time.monotonic() < stop_at:
            time.sleep(1)
    except KeyboardInterrupt:
        say("\nstopping …")
    finally:
        stack.stop()
        say("everything the demo started has stopped")
    return 0


def run_now(api: httpx.Client, pipeline_id: str) -> dict[str, Any]:
    """Trigger a run and wait for it; if the schedule got there first, wait for that one and retry."""
    while True:
        response = api.post(f"/pipelines/{pipeline_id}/runs")
        if response.status_code == 202:
            return wait_run(api, response.json()["id"])
        if response.status_code != 409:
            raise RuntimeError(f"run now: {response.status_code} {response.text[:300]}")
        wait_until(lambda: api.get(f"/runs/{response.json()['run_id']}").json()["state"] in TERMINAL, 300, "the active run")  # noqa: B023 - waited for here


def _follow_runs(api: httpx.Client, pipeline_id: str, seen: set[str], *, count: int) -> None:
    for _ in range(count):
        def next_finished() -> dict[str, Any] | None:
            runs = api.get(f"/pipelines/{pipeline_id}/runs?limit=20").json()["items"]
            return next((r for r in runs if r["id"] not in seen and r["state"] in TERMINAL), None)

        run = wait_until(next_finished, 300, "the next scheduled run")
        seen.add(run["id"])
        wait_run(api, run["id"])


def _duplicates(uri: str) -> int:
    from deltalake import DeltaTable

    data = DeltaTable(uri).to_pyarrow_table(columns=["topic", "partition", "offset"]).to_pydict()
    pairs = list(zip(data["topic"], data["partition"], data["offset"], strict=True))
    return len(pairs) - len(set(pairs))
