"""A large table's compaction on the Spark cluster (``INLET_SPARK_COMPACT_MIN_MB``): the maintenance
worker's route to a spark-submit of ``spark_jobs/compact.py`` (``worker.launch.compaction``), which
plans and commits as the worker does and rewrites each bin in a Spark task. On a local master beside
the worker's own compaction of a copy of the same table; on the standalone cluster into S3, whose
processes have no AWS settings; and the ways a job fails: a task that cannot read its bin, a job
killed at its timeout. Whatever happens, the table holds every record once and no stray file."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import write_deltalake

from spark_jobs.delta_log import REWRITE_FENCE
from spark_jobs.maintenance import MaintenanceSteps, Offload, TablePolicy, compact_table, maintain
from spark_jobs.storage import Store
from tests.fixtures.object_storage import Bucket
from worker.launch import SparkSubmitSettings
from worker.launch.compaction import SparkCompaction

pytestmark = pytest.mark.slow

POLICY = TablePolicy(target_file_bytes=1 << 20, small_file_bytes=1 << 18)
COMPACT_ONLY = MaintenanceSteps(vacuum=False, checkpoint=False)
LOCAL = SparkSubmitSettings(master="local[2]")
APPENDS = 6


def fill(store: Store, uri: str) -> Counter[tuple[str, int, int]]:
    """A table of small appends over two table partitions (``day``): each append, two Kafka partitions'
    ten records a day. What it holds, as (day, partition, offset)."""
    held: Counter[tuple[str, int, int]] = Counter()
    for n in range(APPENDS):
        rows = [(day, p, n * 10 + i) for day in ("2026-11-28", "2026-11-29") for p in (0, 1) for i in range(10)]
        held.update(rows)
        write_deltalake(uri, pa.table({
            "day": [d for d, _, _ in rows], "topic": ["orders"] * len(rows),
            "partition": pa.array([p for _, p, _ in rows], pa.int32()), "offset": pa.array([o for _, _, o in rows], pa.int64()),
            "value": [f"{d}/{p}/{o}" for d, p, o in rows]}), mode="append", partition_by=["day"],
            storage_options=store.delta_options)
    return held


def held_rows(store: Store, uri: str) -> Counter[tuple[str, int, int]]:
    rows = store.delta_table(uri).to_pyarrow_table(columns=["day", "partition", "offset"]).to_pylist()
    return Counter((r["day"], r["partition"], r["offset"]) for r in rows)


def _compacted_rows(store: Store, uri: str) -> dict[str, list[dict]]:
    """Each table partition's compacted file's rows, in file order."""
    delta = store.delta_table(uri)
    filesystem, root = store.filesystem(uri)
    found: dict[str, list[dict]] = {}
    for path in delta.file_uris():
        relative = path.removeprefix(uri.rstrip("/") + "/")
        if relative.rsplit("/", 1)[-1].startswith("compacted-"):
            with filesystem.open_input_file(f"{root}/{relative}") as handle:
                found[relative.split("/", 1)[0]] = pq.read_table(handle).to_pylist()
    return found


def _stray(store: Store, uri: str) -> list[str]:
    """Files named by a compaction that the table does not hold."""
    from pyarrow import fs as pafs

    filesystem, root = store.filesystem(uri)
    live = {u.removeprefix(uri.rstrip("/") + "/") for u in store.delta_table(uri).file_uris()}
    found = filesystem.get_file_info(pafs.FileSelector(root, recursive=True))
    return [f.path for f in found if f.type == pafs.FileType.File and f.base_name.startswith("compacted-")
            and f.path.removeprefix(root.rstrip("/") + "/") not in live]


def test_a_compaction_on_spark_writes_what_the_worker_would_and_commits_as_it_does(delta_spark, tmp_path: Path) -> None:
    store = Store({})
    held = fill(store, str(tmp_path / "worker"))
    shutil.copytree(tmp_path / "worker", tmp_path / "spark")
    by_worker = compact_table(store, str(tmp_path / "worker"), POLICY, {})

    report = maintain(store, str(tmp_path / "spark"), POLICY, COMPACT_ONLY, notes={"inlet.pipeline": "p1"},
                      offload=Offload(0, SparkCompaction(LOCAL, timeout_s=600)))

    on_spark = report.compaction
    assert on_spark is not None and on_spark.outcome == "done", on_spark
    assert (on_spark.files_removed, on_spark.files_added, on_spark.bytes_removed) == (
        by_worker.files_removed, by_worker.files_added, by_worker.bytes_removed) == (2 * APPENDS, 2, on_spark.bytes_removed)
    assert held_rows(store, str(tmp_path / "spark")) == held
    # Row for row, file for file, what the worker's own compaction wrote: the same bins, the same order.
    assert _compacted_rows(store, str(tmp_path / "spark")) == _compacted_rows(store, str(tmp_path / "worker"))
    delta = store.delta_table(str(tmp_path / "spark"))
    assert delta.transaction_version(REWRITE_FENCE) == delta.version() - 1  # fenced as the worker's: on its snapshot
    last = delta.history(1)[0]
    assert (last["inlet.maintenance"], last["inlet.pipeline"]) == ("compact", "p1")
    assert _stray(store, str(tmp_path / "spark")) == []
    delta_spark.assert_reads_alike(str(tmp_path / "spark"), delta.to_pyarrow_table())
    assert not list(Path(tempfile.gettempdir()).glob(f"inlet-compaction-{os.getpid()}-*"))  # the job file went with it


def test_a_task_that_cannot_read_its_bin_fails_the_compaction_and_leaves_no_file(tmp_path: Path) -> None:
    store, uri = Store({}), str(tmp_path / "t")
    fill(store, uri)
    gone = min((tmp_path / "t" / "day=2026-11-29").iterdir())
    gone.unlink()  # the other table partition's bin is rewritten, then deleted with the failed job

    result = SparkCompaction(LOCAL, timeout_s=600)(store, uri, POLICY, {})

    assert result.outcome == "failed" and result.error is not None and gone.name in result.error, result
    assert store.delta_table(uri).version() == APPENDS - 1
    assert not list(tmp_path.rglob("compacted-*"))


def test_a_job_killed_at_its_timeout_fails_and_leaves_the_table_as_it_was(tmp_path: Path) -> None:
    """Killed while it starts (1 s): the timeout's path. A job killed after its tasks wrote, or after
    it committed, is settled alike: tests/spark_jobs/test_compaction_offload.py."""
    store, uri = Store({}), str(tmp_path / "t")
    held = fill(store, uri)

    result = SparkCompaction(LOCAL, timeout_s=1)(store, uri, POLICY, {})

    assert result.outcome == "failed" and "ran longer than 1s and was killed" in (result.error or ""), result
    assert held_rows(store, uri) == held and store.delta_table(uri).version() == APPENDS - 1
    assert not list(tmp_path.rglob("compacted-*"))


def test_on_the_cluster_into_s3_the_store_reaches_the_executors_through_the_job_and_shows_nowhere(
    spark_cluster: SparkSubmitSettings, s3_bucket: Bucket, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    store, uri = Store(s3_bucket.environment), f"{s3_bucket.root}/tenants/t1/orders"
    held = fill(store, uri)
    events = tmp_path / "events"
    events.mkdir()
    settings = replace(spark_cluster, conf={**spark_cluster.conf, "spark.eventLog.enabled": "true",
                                            "spark.eventLog.dir": str(events), "spark.eventLog.compress": "false"})

    with caplog.at_level(logging.INFO, logger="worker.launch.compaction"):
        report = maintain(store, uri, POLICY, COMPACT_ONLY, offload=Offload(0, SparkCompaction(settings, timeout_s=600)))

    assert report.compaction is not None and report.compaction.outcome == "done", report.compaction
    assert (report.compaction.files_removed, report.compaction.files_added) == (2 * APPENDS, 2)
    assert held_rows(store, uri) == held and _stray(store, uri) == []
    job_lines = [r.getMessage() for r in caplog.records if r.name == "worker.launch.compaction"]
    assert any("compaction of" in line and ": done" in line for line in job_lines), job_lines[-5:]
    event_log = "".join(path.read_text(errors="replace") for path in events.rglob("*") if path.is_file())
    assert "SparkListenerTaskEnd" in event_log and "inlet compaction of 2 bins" in event_log
    secret = s3_bucket.environment["AWS_SECRET_ACCESS_KEY"]
    assert secret not in caplog.text, "the secret is in the job's output"
    assert secret not in event_log, "the secret is in the Spark event log"
