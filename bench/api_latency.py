"""API latency and throughput under load, with a bare FastAPI endpoint measured alongside as the
floor this machine sets.

Runs Inlet's API under uvicorn (one worker) on PostgreSQL (--database-url) or SQLite, the sandbox
Kafka with a 64-partition topic, and a trivial FastAPI app (``/bare``) on another port. A concurrent
httpx client (loopback only, a bounded number of requests and seconds per phase) measures:

- ``GET /bare``                           the reference
- ``GET /pipelines/{id}/offsets``         64 partitions: committed offsets + watermarks from Kafka
- ``POST /pipelines``                     create (validation, connection check, audit, commit)
- ``GET /pipelines?limit=50&sort=…``      one tenant's page with 10,000 pipelines across 100 tenants present

    .venv/bin/python bench/api_latency.py [--database-url postgresql+psycopg://…] [--requests 2000]
        [--concurrency 16] [--max-seconds 60] [--pipelines 10000] [--tenants 100]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI

ROOT = Path(__file__).resolve().parents[1]
OPERATOR_TOKEN = "bench-operator-token-0123456789abcdef"
TOPIC, PARTITIONS = "bench-offsets", 64

bare = FastAPI()


@bare.get("/bare")
def bare_endpoint() -> dict[str, str]:
    return {"status": "ok"}


async def load(base_url: str, method: str, path: Any, *, requests: int, concurrency: int, max_seconds: float,
               headers: dict[str, str] | None = None, body: Any = None, expect: int = 200) -> dict[str, float]:
    """``requests`` calls by ``concurrency`` clients (or fewer if ``max_seconds`` run out); latency
    percentiles in ms and throughput in requests/s. ``path``/``body`` may be callables of the index."""
    latencies: list[float] = []
    errors = 0
    counter = iter(range(requests))
    deadline = time.perf_counter() + max_seconds
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=base_url, headers=headers, limits=limits, timeout=60) as client:
        async def worker() -> None:
            nonlocal errors
            for i in counter:
                if time.perf_counter() > deadline:
                    return
                url = path(i) if callable(path) else path
                payload = body(i) if callable(body) else body
                started = time.perf_counter()
                response = await client.request(method, url, json=payload)
                latencies.append((time.perf_counter() - started) * 1000)
                if response.status_code != expect:
                    errors += 1
                    if errors <= 3:
                        print(f"  ! {method} {url}: {response.status_code} {response.text[:200]}", file=sys.stderr)

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        wall = time.perf_counter() - started
    latencies.sort()
    return {"n": len(latencies), "errors": errors, "p50": statistics.median(latencies),
            "p99": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))], "rps": len(latencies) / wall}


def seed_pipelines(database_url: str, pipelines: int, tenants: int, bootstrap: str) -> str:
    """Bulk-insert ``pipelines`` across ``tenants``; returns an admin key of the first tenant."""
    from sqlalchemy import insert

    from api.core.db import make_engine, unit_of_work, utcnow
    from api.core.security import new_api_key
    from api.models import ApiKey, Connection, Pipeline, Tenant

    now = utcnow()
    tenant_ids = [uuid.uuid4() for _ in range(tenants)]
    conn_ids = {t: uuid.uuid4() for t in tenant_ids}
    key, prefix, digest = new_api_key()
    engine = make_engine(database_url)
    with unit_of_work(engine) as session:
        session.execute(insert(Tenant), [{"id": t, "name": f"list-{t.hex[:8]}", "created_at": now} for t in tenant_ids])
        session.execute(insert(ApiKey), [{"id": uuid.uuid4(), "tenant_id": tenant_ids[0], "name": "bench", "role": "admin",
                                          "prefix": prefix, "key_hash": digest, "created_at": now}])
        session.execute(insert(Connection), [
            {"id": conn_ids[t], "tenant_id": t, "name": "kafka", "bootstrap_servers": bootstrap,
             "security_protocol": "PLAINTEXT", "options": {}, "revision": 1, "created_at": now, "updated_at": now}
            for t in tenant_ids])
        rows = []
        for i in range(pipelines):
            t = tenant_ids[i % tenants]
            rows.append({
                "id": uuid.uuid4(), "tenant_id": t, "name": f"p-{i:06d}", "connection_id": conn_ids[t],
                "source_as_written": {"connection_id": str(conn_ids[t]), "topics": ["orders"]},
                "target_as_written": {"type": "delta", "path": f"p{i}"},
                "schedule_as_written": None, "state": ("paused", "active")[i % 2],
                "next_run_at": None, "last_run_seq": 0, "revision": 1, "created_at": now, "updated_at": now,
            })
        session.execute(insert(Pipeline), rows)
    engine.dispose()
    return key


def produce(bootstrap: str, per_partition: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for p in range(PARTITIONS):
        for i in range(per_partition):
            producer.produce(TOPIC, value=b'{"n": %d}' % i, partition=p)
        producer.poll(0)
    producer.flush(30)


def line(name: str, m: dict[str, float], ref: dict[str, float] | None = None) -> str:
    ratio = f"{ref['rps'] / m['rps']:7.1f}x" if ref else "      -"
    return (f"{name:<44} {m['n']:>6.0f} {m['errors']:>4.0f} {m['p50']:>8.1f} {m['p99']:>8.1f} {m['rps']:>8.0f} {ratio}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url")
    parser.add_argument("--requests", type=int, default=2000, help="per phase")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--max-seconds", type=float, default=60, help="per phase")
    parser.add_argument("--pipelines", type=int, default=10_000)
    parser.add_argument("--tenants", type=int, default=100)
    args = parser.parse_args()

    sys.path.insert(0, str(ROOT))
    from api.core.migrate import upgrade_to_head
    from cli.local_stack import LocalStack, free_port, wait_until

    tmp = Path(tempfile.mkdtemp(prefix="inlet-latency-"))
    stack = LocalStack(tmp)
    stack.env["INLET_ADMIN_TOKEN"] = OPERATOR_TOKEN
    database_url = args.database_url or f"sqlite:///{tmp / 'inlet.db'}"
    stack.env["INLET_DATABASE_URL"] = database_url
    results: dict[str, dict[str, float]] = {}
    try:
        bootstrap = stack.start_sandbox(f"{TOPIC}:{PARTITIONS}")
        produce(bootstrap, 50)
        upgrade_to_head(database_url)
        api_port, bare_port = free_port(), free_port()
        stack.start("bare", [sys.executable, "-m", "uvicorn", "--app-dir", str(ROOT / "bench"), "api_latency:bare",
                             "--host", "127.0.0.1", "--port", str(bare_port), "--log-level", "warning",
                             "--no-access-log", "--workers", "1"])
        api = stack.start_inlet(api_port=api_port, worker=False, scheduler=False)
        bare_url, api_url = f"http://127.0.0.1:{bare_port}", f"http://127.0.0.1:{api_port}"
        wait_until(lambda: _ok(f"{bare_url}/bare"), 30, "the bare app", every_s=0.2)

        operator = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
        tenant = api.post("/tenants", json={"name": f"bench-{uuid.uuid4().hex[:6]}"}, headers=operator).json()
        key = api.post(f"/tenants/{tenant['id']}/api-keys", json={"name": "bench", "role": "admin"},
                       headers=operator).json()["key"]
        auth = {"Authorization": f"Bearer {key}"}
        conn = api.post("/connections", headers=auth, json={"name": "sandbox", "bootstrap_servers": bootstrap,
                                                            "security_protocol": "PLAINTEXT"}).json()

        def pipeline_body(i: int) -> dict[str, Any]:
            return {"name": f"bench-{i}-{uuid.uuid4().hex[:6]}",  # unique: names are unique per tenant
                    "source": {"connection_id": conn["id"], "topics": [TOPIC], "value_format": "string"},
                    "target": {"type": "delta", "path": f"bench/{i}-{uuid.uuid4().hex[:6]}"},
                    "schedule": None, "state": "paused"}

        created = api.post("/pipelines", headers=auth, json=pipeline_body(0))
        assert created.status_code == 201, created.text
        pipeline = created.json()
        offsets = api.get(f"/pipelines/{pipeline['id']}/offsets", headers=auth)
        assert offsets.status_code == 200, offsets.text
        assert len(offsets.json()["partitions"]) == PARTITIONS, offsets.text[:300]
        assert offsets.json()["total_lag"] is not None, "the offsets read did not reach the sandbox Kafka"

        common = {"requests": args.requests, "concurrency": args.concurrency, "max_seconds": args.max_seconds}
        run = asyncio.run
        run(load(bare_url, "GET", "/bare", requests=200, concurrency=4, max_seconds=10))  # warm-up
        run(load(api_url, "GET", f"/pipelines/{pipeline['id']}/offsets", requests=50, concurrency=4,
                 max_seconds=10, headers=auth))
        results["GET /bare (reference)"] = run(load(bare_url, "GET", "/bare", **common))
        results[f"GET /pipelines/{{id}}/offsets ({PARTITIONS} partitions)"] = run(load(
            api_url, "GET", f"/pipelines/{pipeline['id']}/offsets", headers=auth, **common))
        results["POST /pipelines"] = run(load(api_url, "POST", "/pipelines", headers=auth, body=pipeline_body,
                                              expect=201, **common))

        started = time.perf_counter()
        list_key = seed_pipelines(database_url, args.pipelines, args.tenants, bootstrap)
        seeded = time.perf_counter() - started
        list_auth = {"Authorization": f"Bearer {list_key}"}
        for sort in ("-created_at", "name", "-name", "state", "-updated_at"):
            run(load(api_url, "GET", f"/pipelines?limit=50&sort={sort}", headers=list_auth, requests=20,
                     concurrency=2, max_seconds=10))
            results[f"GET /pipelines?limit=50&sort={sort}"] = run(load(
                api_url, "GET", f"/pipelines?limit=50&sort={sort}", headers=list_auth,
                requests=min(args.requests, 1000), concurrency=args.concurrency, max_seconds=args.max_seconds))
        total = api.get("/pipelines?limit=1", headers=list_auth).json()["total"]
    finally:
        stack.stop()

    ref = results["GET /bare (reference)"]
    print(f"database {database_url.split(':', 1)[0]}; uvicorn 1 worker each; concurrency {args.concurrency}; "
          f"loopback; {args.pipelines} pipelines across {args.tenants} tenants seeded in {seeded:.1f}s "
          f"(the listed tenant has {total})")
    print(f"{'endpoint':<44} {'n':>6} {'err':>4} {'p50 ms':>8} {'p99 ms':>8} {'req/s':>8} {'bare/x':>8}")
    for name, m in results.items():
        print(line(name, m, None if m is ref else ref))
    return 0


def _ok(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


if __name__ == "__main__":
    raise SystemExit(main())
