"""Freshness: produce → visible in the Delta table, for a continuous pipeline and, in the same run on the
same stack, an ``interval_seconds: 10`` one reading the same topic.

A producer writes timestamped records at a steady ``--rate`` into ``--partitions`` partitions of a real
Kafka broker (``--kafka-home``, ../shared/kafka) for ``--seconds``; both pipelines run on one worker
(concurrency 1, the warm engine, ``local[2]``) with the scheduler and a maintenance worker (compaction
on, the policy's defaults). A reader that is not Inlet's, delta-rs (``deltalake``) in a process of its
own, polls each table every ``--poll-ms`` and notes when each (partition, offset) first became visible.
Printed per pipeline: produce → visible P50, P95, P99 and max; at the end every record exactly once
(by partition and offset), the live files, and the table's load time beside a compacted copy's.

    .venv/bin/python bench/freshness.py --kafka-home ../shared/kafka [--rate 1000] [--seconds 300]
        [--database-url postgresql+psycopg://…/an_empty_database]   (SQLite by default)
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from cli.local_stack import LocalStack, free_port, wait_until  # noqa: E402

BENCH_OPERATOR = "bench-operator-token-0123456789abcdef"
OPERATOR = {"Authorization": f"Bearer {BENCH_OPERATOR}"}


def producer(bootstrap: str) -> Producer:
    """An idempotent producer that has its producer id already (one record sent and flushed): its first
    timed records do not wait in its buffer for the broker's coordinator."""
    made = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "enable.idempotence": True})
    made.produce("events", value=json.dumps({"t": time.time()}).encode(), partition=0)
    assert made.flush(60) == 0
    return made


def produce(producer: Producer, topic: str, rate: int, seconds: float, stop: threading.Event) -> int:
    """``rate`` records a second, each value the time it was produced; returns how many."""
    began, sent = time.time(), 0
    while not stop.is_set() and (now := time.time()) < began + seconds:
        due = int((now - began) * rate)
        while sent < due:
            try:
                producer.produce(topic, key=str(sent).encode(), value=json.dumps({"t": time.time()}).encode())
                sent += 1
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
        time.sleep(0.002)
    producer.flush(60)
    return sent


def watch(uri: str, poll_s: float, since: float, until: float, out: str) -> None:
    """In its own process: poll the table through delta-rs, note when each new file's rows were seen
    (those produced from ``since`` on: the warm-up record is not timed)."""
    import pyarrow.parquet as pq
    from deltalake import DeltaTable

    seen_files: set[str] = set()
    first_seen: dict[tuple[int, int], float] = {}
    latency: list[float] = []
    table = None
    while time.time() < until:
        try:
            if table is None:
                table = DeltaTable(uri)
            else:
                table.update_incremental()
        except Exception:  # noqa: BLE001 (no table yet)
            time.sleep(poll_s)
            continue
        now = time.time()
        for name in set(table.file_uris()) - seen_files:
            seen_files.add(name)
            rows = pq.read_table(name.removeprefix("file://"), columns=["partition", "offset", "value"]).to_pydict()
            for partition, offset, value in zip(rows["partition"], rows["offset"], rows["value"], strict=True):
                if (partition, offset) not in first_seen:
                    first_seen[(partition, offset)] = now
                    if (produced_at := json.loads(value)["t"]) >= since:
                        latency.append(now - produced_at)
        time.sleep(poll_s)
    Path(out).write_text(json.dumps(latency))


def percentiles(values: list[float]) -> str:
    if not values:
        return "nothing seen"
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return (f"P50 {cuts[49]:.2f} s, P95 {cuts[94]:.2f} s, P99 {cuts[98]:.2f} s, max {max(values):.2f} s "
            f"({len(values)} records)")


def exactly_once(uri: str, produced: int, partitions: int) -> str:
    from deltalake import DeltaTable

    rows = DeltaTable(uri).to_pyarrow_table(columns=["partition", "offset"]).to_pydict()
    counts = Counter(zip(rows["partition"], rows["offset"], strict=True))
    duplicated = sum(1 for c in counts.values() if c > 1)
    return f"{len(counts)} distinct of {produced} produced, {duplicated} duplicated"


def load_ratio(uri: str, scratch: Path) -> tuple[int, float, float]:
    """Live files, and the table's load time (P50 of 5) beside a one-file compacted copy's."""
    from deltalake import DeltaTable, write_deltalake

    table = DeltaTable(uri)
    copy = scratch / "compacted"
    write_deltalake(str(copy), table.to_pyarrow_table())

    def load(path: str) -> float:
        times = []
        for _ in range(5):
            began = time.perf_counter()
            DeltaTable(path).to_pyarrow_table()
            times.append(time.perf_counter() - began)
        return statistics.median(times)
    return len(table.file_uris()), load(uri), load(str(copy))


def where_the_time_goes(database_url: str, pipeline_id: str) -> str:
    """The medians of a continuous pipeline's runs, step by step: from the look being due (its slot) to
    the run recorded with a plan, to its claim, the job's own steps (Spark session, read and write,
    Delta commit; the job's timings), and from the job's end to the offsets committed."""
    import uuid
    from datetime import datetime

    from sqlmodel import Session, create_engine, select

    import api.models  # noqa: F401  (every table registered)
    from api.runs.models import Run

    engine = create_engine(database_url)
    with Session(engine) as session:
        runs = session.exec(select(Run).where(Run.pipeline_id == uuid.UUID(pipeline_id),
                                              Run.state == "succeeded")).all()
    steps: dict[str, list[float]] = {k: [] for k in ("look → planned run", "→ claimed", "job: session",
                                                    "job: read + write", "job: Delta commit", "job → offsets committed",
                                                    "total")}
    for run in runs:
        timings = (run.result or {}).get("timings")
        if not timings or run.scheduled_for is None or run.started_at is None or run.finished_at is None:
            continue
        job_end = datetime.fromisoformat(timings["finished_at"])
        steps["look → planned run"].append((run.created_at - run.scheduled_for).total_seconds())
        steps["→ claimed"].append((run.started_at - run.created_at).total_seconds())
        steps["job: session"].append(timings["session_start_s"])
        steps["job: read + write"].append(timings["process_s"])
        steps["job: Delta commit"].append(timings["commit_s"])
        steps["job → offsets committed"].append((run.finished_at - job_end).total_seconds())
        steps["total"].append((run.finished_at - run.scheduled_for).total_seconds())
    engine.dispose()
    return f"{len(steps['total'])} runs, medians: " + ", ".join(
        f"{name} {statistics.median(values) * 1000:.0f} ms" for name, values in steps.items() if values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kafka-home", required=True, help="an Apache Kafka distribution (../shared/kafka)")
    parser.add_argument("--rate", type=int, default=1000, help="records a second")
    parser.add_argument("--seconds", type=float, default=300)
    parser.add_argument("--partitions", type=int, default=16)
    parser.add_argument("--poll-ms", type=int, default=100, help="how often the outside reader looks")
    parser.add_argument("--database-url", help="Inlet's database (an empty one); default SQLite")
    args = parser.parse_args()

    os.environ["INLET_TEST_KAFKA_HOME"] = args.kafka_home
    from tests.fixtures.kafka_broker import RealKafka
    from tests.fixtures.kafka_broker import kafka_home as find_kafka_home

    scratch = Path(tempfile.mkdtemp(prefix="inlet-freshness-"))
    home = find_kafka_home()
    assert home is not None, "no Kafka distribution at --kafka-home"
    broker = RealKafka(home, scratch / "kafka").start()
    stack = LocalStack(scratch / "stack")
    database_url = args.database_url or f"sqlite:///{stack.data_dir / 'inlet.db'}"
    stack.env["INLET_DATABASE_URL"] = database_url  # migrated by start_inlet
    try:
        bootstrap = broker.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("events", args.partitions, 1)])["events"].result(30)
        stack.start_redis()
        stack.env |= {"INLET_ADMIN_TOKEN": BENCH_OPERATOR, "INLET_SPARK_MASTER": "local[2]"}
        api = stack.start_inlet(api_port=free_port(), worker_concurrency=1)
        stack.inlet("maintenance-worker", "maintenance-worker")
        tenant = api.post("/tenants", json={"name": "bench"}, headers=OPERATOR).json()
        key = api.post(f"/tenants/{tenant['id']}/api-keys", json={"name": "k", "role": "editor"}, headers=OPERATOR)
        client = httpx.Client(base_url=api.base_url, timeout=30, headers={"Authorization": f"Bearer {key.json()['key']}"})
        conn = client.post("/connections", json={"name": "broker", "bootstrap_servers": bootstrap}).json()["id"]
        uris, ids = {}, {}
        for name, schedule in (("continuous", {"continuous": True}), ("interval-10s", {"interval_seconds": 10})):
            created = client.post("/pipelines", json={
                "name": name, "source": {"connection_id": conn, "topics": ["events"], "value_format": "string",
                                         "starting_offsets": "earliest"},
                "target": {"type": "delta", "path": f"bench/{name}"}, "schedule": schedule})
            assert created.status_code == 201, created.text
            uris[name] = created.json()["status"]["target_uri"].removeprefix("file://")
            ids[name] = created.json()["id"]

        # The engine's first run starts it: a warm-up record (counted among the records, not timed).
        timed = producer(bootstrap)
        wait_until(lambda: os.path.isdir(os.path.join(uris["continuous"], "_delta_log")), 180, "the first commit", 0.2)
        time.sleep(2)

        since = time.time()
        until = since + args.seconds + 20  # the interval pipeline's last slot lands within 10 s + a run
        ctx = multiprocessing.get_context("spawn")
        outs = {name: str(scratch / f"{name}.json") for name in uris}
        watchers = [ctx.Process(target=watch, args=(uris[n], args.poll_ms / 1000, since, until, outs[n])) for n in uris]
        for w in watchers:
            w.start()
        stop = threading.Event()
        produced = 1 + produce(timed, "events", args.rate, args.seconds, stop)
        for w in watchers:
            w.join()
        print(f"{args.rate} records/s into {args.partitions} partitions for {args.seconds:.0f} s "
              f"(the reader polls every {args.poll_ms} ms):")
        for name, uri in uris.items():
            latency = json.loads(Path(outs[name]).read_text())
            files, loaded, compacted = load_ratio(uri, scratch / name)
            print(f"  {name:>13}: produce → visible {percentiles(latency)}")
            print(f"  {'':>13}  {exactly_once(uri, produced, args.partitions)}; {files} live files; "
                  f"load {loaded:.3f} s vs {compacted:.3f} s compacted ({loaded / compacted:.2f}x)")
        print(f"  where a continuous run's time goes: {where_the_time_goes(database_url, ids['continuous'])}")
        worker_log = (stack.data_dir / "worker.log").read_text(errors="replace")
        print(f"  the worker's engine was recycled {worker_log.count('takes over')} time(s) (a replacement "
              f"started beside it each time)")
    finally:
        stack.stop()
        broker.stop()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
