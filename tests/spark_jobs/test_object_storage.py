"""Tables in object storage, without Spark: a task's Parquet files and the driver's commit on S3,
two commits of one run racing there, and storage failures a user can act on.

S3 here is moto's emulator (tests/fixtures/object_storage.py), which honours ``If-None-Match: *``
as AWS S3 does; the race test is what shows a store that does not would lose the guarantee.
"""

from __future__ import annotations

import os
import socket
import threading

import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import to_arrow_schema

from api.core.config import Settings
from spark_jobs.decode import decoded_struct
from spark_jobs.delta_tables import Table
from spark_jobs.delta_tables.commit import already_committed, commit_files
from spark_jobs.delta_tables.direct_write import DirectWritePlan, WriteUnit, write_unit
from spark_jobs.errors import JobError, classify, storage_failure
from spark_jobs.kafka_source import Chunk, consumer_config, kafka_struct
from spark_jobs.plans import TaskReport
from spark_jobs.read_budget import ReadBudget
from spark_jobs.spec import SourceSpec, Txn
from spark_jobs.storage import Store
from tests.factories import LOOPBACK_ALLOWED
from tests.fixtures.object_storage import Bucket


def _plan(bootstrap: str, uri: str, store: Store, token: str) -> DirectWritePlan:
    source = SourceSpec(kafka_config={"bootstrap.servers": bootstrap}, ranges={}, value_format="string")
    return DirectWritePlan(
        uri=uri, partition_by=["partition"], token=token, schema=to_arrow_schema(decoded_struct(source), timezone="UTC"),
        read_schema=to_arrow_schema(kafka_struct(False), timezone="UTC"),
        consumer_config=consumer_config(source.kafka_config, "g", LOOPBACK_ALLOWED), budget=ReadBudget(stall_timeout_s=10.0),
        value_format="string", run_id=f"run-{token}", replace_ranges={}, store=store,
    )


def _coordinates(store: Store, uri: str) -> list[tuple[int, int]]:
    table = store.delta_table(uri).to_pyarrow_table(columns=["partition", "offset"])
    return sorted(zip(table["partition"].to_pylist(), table["offset"].to_pylist(), strict=True))


def test_a_task_writes_its_files_to_s3_and_the_driver_commits_them_there(
    sandbox_kafka, kafka_topic, produce_keyed, s3_bucket: Bucket
) -> None:
    topic = kafka_topic(partitions=2)
    placed = produce_keyed(sandbox_kafka.bootstrap_servers, topic, 80)
    store, uri = Store(s3_bucket.environment), f"{s3_bucket.root}/tenants/t1/orders"
    plan = _plan(sandbox_kafka.bootstrap_servers, uri, store, "tok1")

    report = write_unit(plan, WriteUnit(chunks=tuple(Chunk(topic, p, 0, len(placed[p])) for p in (0, 1))))
    version = commit_files(Table(store, uri, ("partition",)), Txn(app_id="a", version=1), report.files, plan.schema)

    assert version == 1  # version 0 created the table
    assert _coordinates(store, uri) == sorted((p, o) for p in (0, 1) for o in placed[p])
    data_keys = [k for k in s3_bucket.keys("inlet/tenants/t1/orders/") if "/_delta_log/" not in k]
    assert sorted(k.rsplit("/", 1)[1] for k in data_keys) == sorted(f.path.rsplit("/", 1)[1] for f in report.files)
    assert all(k.split("/")[-1].startswith("part-tok1-") for k in data_keys)
    assert already_committed(Table(store, uri), Txn(app_id="a", version=1))


@pytest.mark.parametrize("table_exists", [False, True], ids=["new table", "existing table"])
def test_two_commits_of_one_run_race_on_s3_and_exactly_one_wins(
    sandbox_kafka, kafka_topic, produce_keyed, s3_bucket: Bucket, table_exists: bool
) -> None:
    topic = kafka_topic(partitions=1)
    produce_keyed(sandbox_kafka.bootstrap_servers, topic, 40)
    store, uri = Store(s3_bucket.environment), f"{s3_bucket.root}/tenants/t1/race"
    chunks = (Chunk(topic, 0, 10, 40),)
    if table_exists:  # the run before: offsets [0, 10)
        before = _plan(sandbox_kafka.bootstrap_servers, uri, store, "before")
        earlier = write_unit(before, WriteUnit(chunks=(Chunk(topic, 0, 0, 10),)))
        assert commit_files(Table(store, uri, ("partition",)), Txn(app_id="a", version=1), earlier.files, before.schema) == 1
    # Two attempts of run 2 (a worker taken over while its job still ran): each wrote its own files.
    attempts = [_plan(sandbox_kafka.bootstrap_servers, uri, store, token) for token in ("first", "second")]
    reports = [write_unit(plan, WriteUnit(chunks=chunks)) for plan in attempts]
    barrier, outcomes = threading.Barrier(2), {}

    def commit(plan: DirectWritePlan, report: TaskReport) -> None:
        barrier.wait()
        try:
            outcomes[plan.token] = commit_files(Table(store, uri, ("partition",)), Txn(app_id="a", version=2), report.files,
                                                plan.schema)
        except JobError as exc:
            outcomes[plan.token] = exc

    threads = [threading.Thread(target=commit, args=pair) for pair in zip(attempts, reports, strict=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    assert sorted(outcomes) == ["first", "second"]
    won = [v for v in outcomes.values() if v is not None]
    assert None in outcomes.values() and len(won) == 1 and isinstance(won[0], int), outcomes
    assert store.delta_table(uri).version() == won[0]  # two concurrent creates may both land; the data once
    assert _coordinates(store, uri) == [(0, o) for o in range(0 if table_exists else 10, 40)]
    assert store.delta_table(uri).transaction_version("a") == 2


def test_storage_failures_name_a_kind_a_user_can_act_on(s3_bucket: Bucket) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    unreachable = Store({**s3_bucket.environment, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}"})
    missing = Store(s3_bucket.environment)
    rows = pa.table({"x": [1]})

    for store, bucket, kind in ((unreachable, s3_bucket.name, "storage_unreachable"),
                                (missing, "no-such-bucket-inlet", "storage_not_found")):
        filesystem, path = store.filesystem(f"s3://{bucket}/t")
        with pytest.raises(OSError) as raised, filesystem.open_output_stream(f"{path}/x.parquet") as out:
            out.write(b"x" * rows.nbytes)
        error = storage_failure(raised.value)
        assert error is not None and error.kind == kind, raised.value
        assert error.message.startswith("OSError: ")


@pytest.mark.parametrize(("failure", "kind"), [
    # As a task's failure reaches the driver: Spark's text around the Python worker's traceback.
    (RuntimeError("org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n"
     '  File "/w/direct_write.py", line 80, in write_unit\n    files.write(rows)\n'
     "OSError: When creating key 'x.parquet' in bucket 'b': AWS Error ACCESS_DENIED during PutObject operation: "
     "Access Denied\n\n\tat org.apache.spark.api.python.BasePythonRunner"), "storage_denied"),
    (RuntimeError("PythonException: An exception was thrown from the Python worker. Please see the stack trace below.\n"
     "Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\n"
     "OSError: When resolving region for bucket 'b': AWS Error NETWORK_CONNECTION during HeadBucket operation: "
     "curlCode: 6, Could not resolve host: b.s3.us-east-1.amazonaws.com\n"), "storage_unreachable"),
    # delta-rs on the driver raises its own OSError.
    (OSError("Generic S3 error: Error performing PUT http://s3/b/_delta_log/0.json in 1.2s - Server returned non-2xx status "
     "code: 403 Forbidden: InvalidAccessKeyId"), "storage_denied"),
    # A table folder the job's user may not write (a shared volume mounted read-only, say).
    (PermissionError(13, "Permission denied"), "storage_denied"),
])
def test_a_task_failure_is_classified_by_its_root_cause(failure: Exception, kind: str) -> None:
    error = classify(failure)
    assert error.kind == kind
    assert "PythonException" not in error.message and error.message.startswith(("OSError: ", "PermissionError: "))


def test_an_unknown_task_failure_keeps_its_python_exception_not_sparks_wrapper() -> None:
    text = ("py4j.protocol.Py4JJavaError: An error occurred while calling o81.collect.\n"
            ": org.apache.spark.SparkException: Job aborted due to stage failure: "
            "org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n"
            '  File "/w/worker.py", line 3, in main\n    1 / 0\nZeroDivisionError: division by zero\n\n\tat org...')
    error = classify(RuntimeError(text))
    assert (error.kind, error.message) == ("internal", "ZeroDivisionError: division by zero")


def test_object_storage_options_come_from_the_aws_environment_and_inlet_storage_options(monkeypatch) -> None:
    for name in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "from-env")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://env:9000")
    monkeypatch.setenv("INLET_STORAGE_OPTIONS", '{"AWS_ENDPOINT_URL": "http://explicit:9000", "AWS_ALLOW_HTTP": "true"}')

    on_s3 = Settings(storage_root="s3://bucket/inlet")
    assert on_s3.resolved_storage_options == {"AWS_ACCESS_KEY_ID": "from-env", "AWS_ENDPOINT_URL": "http://explicit:9000",
                                              "AWS_ALLOW_HTTP": "true"}
    assert Settings(storage_root="/srv/inlet").resolved_storage_options == {}  # no credentials where none are needed
    with pytest.raises(ValueError, match="hdfs:// is not supported"):
        Settings(storage_root="hdfs://namenode/inlet")
