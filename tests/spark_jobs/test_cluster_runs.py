"""What only the production path shows: runs on the standalone cluster's executors into S3 that race,
and that fail for a reason only the executors saw. The cluster's processes have no AWS settings:
the store reaches them through the job (tests/fixtures/spark_cluster.py)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from spark_jobs.spec import RunResult
from spark_jobs.storage import Store
from tests.fixtures.object_storage import Bucket
from tests.spark_jobs.helpers import coordinates, make_spec, run_job
from worker.launch import SparkSubmitSettings

pytestmark = pytest.mark.slow


def test_two_attempts_of_one_run_at_once_commit_once_and_leave_no_stray_file(
    sandbox_kafka, kafka_topic, produce_keyed, spark_cluster: SparkSubmitSettings, s3_bucket: Bucket, tmp_path: Path
) -> None:
    topic = kafka_topic(partitions=3)
    placed = produce_keyed(sandbox_kafka.bootstrap_servers, topic, 300)
    store = Store(s3_bucket.environment)
    uri = f"{s3_bucket.root}/tenants/t1/raced"
    spec = make_spec(sandbox_kafka.bootstrap_servers, {topic: {str(p): (0, len(o)) for p, o in placed.items()}},
                     {"type": "delta", "uri": uri, "storage_options": dict(store.options)}, value_format="string")
    results: dict[int, RunResult] = {}

    def attempt(n: int) -> None:  # a worker taken over while its job still ran, say: one warm, one not
        results[n] = run_job(spec, tmp_path / f"work-{n}", settings=spark_cluster, engine=("warm", "submit")[n - 1])

    threads = [threading.Thread(target=attempt, args=(n,)) for n in (1, 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)

    assert [r.status for r in results.values()] == ["succeeded", "succeeded"], [r.error for r in results.values()]
    winners = [r for r in results.values() if not r.already_committed]
    assert len(winners) == 1 and winners[0].rows_written == 300 and winners[0].delta_version == 1
    table = store.delta_table(uri)
    assert coordinates(table.to_pyarrow_table()) == sorted((p, o) for p, offsets in placed.items() for o in offsets)
    assert table.version() == 1 and table.transaction_version(spec.txn.app_id) == spec.txn.version
    data_files = {k.removeprefix("inlet/tenants/t1/raced/") for k in s3_bucket.keys("inlet/tenants/t1/raced/")
                  if "/_delta_log/" not in k and not k.endswith("/")}  # pyarrow marks a folder it emptied
    assert data_files == {u.removeprefix(f"{uri}/") for u in table.file_uris()}, "the losing attempt's files are left"


def test_a_store_the_job_cannot_use_fails_the_run_with_a_kind_and_the_root_cause(
    sandbox_kafka, kafka_topic, produce_keyed, spark_cluster: SparkSubmitSettings, s3_bucket: Bucket, tmp_path: Path
) -> None:
    topic = kafka_topic(partitions=1)
    produce_keyed(sandbox_kafka.bootstrap_servers, topic, 20)
    uri = "s3://no-such-bucket-for-inlet/tenants/t1/orders"
    spec = make_spec(sandbox_kafka.bootstrap_servers, {topic: {"0": (0, 20)}},
                     {"type": "delta", "uri": uri, "storage_options": s3_bucket.environment}, value_format="string")

    result = run_job(spec, tmp_path / "work", settings=spark_cluster)

    assert result.status == "failed" and result.error is not None
    assert result.error.kind == "storage_not_found", result.error
    assert "NoSuchBucket" in result.error.message or "does not exist" in result.error.message
    assert s3_bucket.environment["AWS_SECRET_ACCESS_KEY"] not in result.error.message
