"""Benchmark: one run through a Spark standalone cluster into S3, beside the same run on ``local[*]``
into a local folder, measured one after the other on this machine.

Produces ~1M 200-byte random messages into a sandbox topic of 64 partitions, then launches the same
spec twice through the worker's launcher:
  (a) the reference: ``local[*]``, the table in a local folder;
  (b) the production path: a standalone cluster (one master, one worker with the machine's cores,
      started here from pyspark's ``spark-class``) and the table in S3 (moto's emulator on loopback,
      started here; an emulator, so its figures say what Inlet costs, not what a real store does).

    .venv/bin/python bench/production_path.py [--messages 1000000] [--partitions 64]
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import boto3
import pyspark
from confluent_kafka import Consumer, Producer, TopicPartition

from sandbox.cluster import SandboxCluster
from spark_jobs.spec import RunResult, RunSpec
from spark_jobs.storage import Store
from worker.launch.submit import SparkSubmitSettings, launch

BIN = Path(sys.executable).parent
S3_OPTIONS = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench-secret", "AWS_REGION": "us-east-1",
              "AWS_ALLOW_HTTP": "true"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(check: Callable[[], object], what: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise RuntimeError(f"{what} did not start within {timeout_s:.0f}s")


def listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


@contextmanager
def s3_server(workdir: Path) -> Iterator[str]:
    port = free_port()
    with open(workdir / "moto.log", "wb") as log:
        process = subprocess.Popen([str(BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=log)
    try:
        wait_for(lambda: listening(port), "moto_server")
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(10)


@contextmanager
def spark_cluster(workdir: Path, cores: int) -> Iterator[str]:
    """A master and one worker from pyspark's own launcher, without any AWS_* environment."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env |= {"SPARK_HOME": os.path.dirname(pyspark.__file__), "PATH": f"{BIN}:{env.get('PATH', '')}",
            "SPARK_WORKER_DIR": str(workdir / "work"), "SPARK_LOCAL_DIRS": str(workdir / "work")}
    port, processes = free_port(), []
    try:
        for args, name in (
            (["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
              "--webui-port", str(free_port())], "master"),
            (["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--cores", str(cores), "--memory", "3g",
              "--webui-port", str(free_port()), f"spark://127.0.0.1:{port}"], "worker"),
        ):
            log = workdir / f"{name}.log"
            with open(log, "wb") as out:
                processes.append(subprocess.Popen([str(BIN / "spark-class"), *args], stdout=out, stderr=out, env=env))
            if name == "master":
                wait_for(lambda: listening(port), "the Spark master")
            else:
                wait_for(lambda: "Successfully registered with master" in log.read_text(errors="replace"), "the Spark worker")  # noqa: B023 - waited for here
        yield f"spark://127.0.0.1:{port}"
    finally:
        for process in reversed(processes):
            process.terminate()
            process.wait(30)


def produce(bootstrap: str, topic: str, messages: int, partitions: int) -> dict[str, tuple[int, int]]:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 10000, "acks": "1"})
    values = os.urandom(200 * messages)  # incompressible: the Parquet files weigh what S3 moves
    for i in range(messages):
        value = values[i * 200:(i + 1) * 200]
        while True:
            try:
                producer.produce(topic, key=str(i).encode(), value=value, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(120)
    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench"})
    ranges = {str(p): probe.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in range(partitions)}
    probe.close()
    return ranges


def spec_for(bootstrap: str, topic: str, ranges: dict[str, tuple[int, int]], uri: str, options: dict[str, str]) -> RunSpec:
    pipeline = uuid.uuid4().hex[:8]
    return RunSpec.model_validate({
        "run_id": f"bench-{uuid.uuid4().hex[:6]}", "pipeline_id": pipeline,
        "txn": {"app_id": f"inlet-pipeline-{pipeline}", "version": 1},
        "source": {"kafka_config": {"bootstrap.servers": bootstrap}, "ranges": {topic: ranges}, "value_format": "string"},
        "target": {"type": "delta", "uri": uri, "partition_by": ["partition"], "storage_options": options},
    })


def timed(spec: RunSpec, workdir: Path, settings: SparkSubmitSettings) -> tuple[RunResult, float]:
    began = time.monotonic()
    result = launch(spec, workdir=workdir, settings=settings, timeout_s=1800)
    wall_s = time.monotonic() - began
    assert result.status == "succeeded", result.error
    return result, wall_s


def report(label: str, result: RunResult, wall_s: float, total: int) -> None:
    t = result.timings
    print(f"{label}: {total / wall_s:,.0f} records/s end to end ({wall_s:.1f}s; session {t.session_start_s:.1f}s, "
          f"process {t.process_s:.1f}s, commit {t.commit_s:.2f}s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=64)
    args = parser.parse_args()
    cores = os.cpu_count() or 2

    with SandboxCluster(brokers=1) as kafka, tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        bootstrap, topic = kafka.bootstrap_servers, "bench"
        kafka.create_topic(topic, args.partitions)
        ranges = produce(bootstrap, topic, args.messages, args.partitions)
        total = sum(end - start for start, end in ranges.values())
        print(f"produced {total:,} messages of 200 random bytes into {args.partitions} partitions")

        local, local_s = timed(spec_for(bootstrap, topic, ranges, str(work / "local-table"), {}), work / "w-local",
                               SparkSubmitSettings(master="local[*]"))
        report("(a) local[*], local folder       ", local, local_s, total)
        local_bytes = sum(f.stat().st_size for f in (work / "local-table").rglob("*.parquet"))
        shutil.rmtree(work / "local-table")

        (work / "spark").mkdir()
        with s3_server(work) as endpoint, spark_cluster(work / "spark", cores) as master:
            options = {**S3_OPTIONS, "AWS_ENDPOINT_URL": endpoint}
            boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="bench", aws_secret_access_key="bench-secret",
                         region_name="us-east-1").create_bucket(Bucket="bench")
            uri = "s3://bench/inlet/table"
            remote, remote_s = timed(spec_for(bootstrap, topic, ranges, uri, options), work / "w-cluster",
                                     SparkSubmitSettings(master=master))
            report(f"(b) {master}, S3 (moto)", remote, remote_s, total)
            table = Store(options).delta_table(uri)
            assert table.to_pyarrow_table(columns=["offset"]).num_rows == total
            print(f"    {len(table.file_uris())} Parquet files in S3; {local_bytes / 1e6:,.0f} MB of Parquet locally")
        print(f"ratio (b) cluster+S3 / (a) local[*]+folder, end to end: {local_s / remote_s:.2f} "
              f"(process only: {local.timings.process_s / remote.timings.process_s:.2f})")


if __name__ == "__main__":
    main()
