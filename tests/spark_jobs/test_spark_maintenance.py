"""A table delta-rs cannot maintain, maintained by delta-spark in a job of its own (the maintenance
worker's ``worker.launch.compaction`` on a local master; ``spark_jobs.spark_maintenance``): a
clustered table with deletion vectors, as a Databricks user's, and one only with deletion vectors.
Its properties set, OPTIMIZE clusters its small files and purges its deletion vectors, VACUUM deletes
the files and vectors no version uses, a checkpoint is written; every row once, deleted rows gone,
by delta-spark's reading and DuckDB's. Tables delta-rs maintains stay with delta-rs."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from spark_jobs.maintenance import MaintenanceSteps, Offload, TablePolicy, maintain, wants_delta_spark
from spark_jobs.storage import Store
from spark_jobs.table_features import TableFeatures, has_deletion_vectors
from tests.spark_jobs.helpers import duckdb_connection
from worker.launch import SparkSubmitSettings
from worker.launch.compaction import SparkCompaction

pytestmark = pytest.mark.slow

APPENDS = 3  # each a statement of delta-spark's, seconds apiece here
POLICY = TablePolicy(target_file_bytes=1 << 20, small_file_bytes=1 << 18, vacuum_retention_hours=0)
# A small table: few shuffle partitions and state tasks (the defaults, 200 and 50, are for large ones).
SPARK = SparkCompaction(SparkSubmitSettings(master="local[2]", conf={"spark.sql.shuffle.partitions": "2",
                                                                   "spark.databricks.delta.snapshotPartitions": "2"}),
                        timeout_s=300)


def _no_compaction(*_: object) -> None:
    raise AssertionError("Inlet's compaction ran on a table delta-spark maintains")


OFFLOAD = Offload(min_bytes=1 << 40, compact=_no_compaction, delta_spark=SPARK.delta_spark)  # type: ignore[arg-type]


def _table(delta_spark, uri: str) -> Counter[tuple[int, int]]:
    """A clustered table with deletion vectors (as Inlet creates one: ``delta_tables.create``), small
    appends by delta-spark, then a DELETE of some of partition 0's offsets (a deletion vector);
    the (partition, offset) pairs it then holds."""
    delta_spark.spark.sql(f"CREATE TABLE delta.`{uri}` (`partition` INT, `offset` BIGINT, value STRING) USING delta "
                          "CLUSTER BY (`partition`) TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    for n in range(APPENDS):
        rows = ", ".join(f"({p}, {n * 10 + i}, 'v{p}-{n * 10 + i}')" for p in (0, 1) for i in range(10))
        delta_spark.spark.sql(f"INSERT INTO delta.`{uri}` VALUES {rows}")
    delta_spark.spark.sql(f"DELETE FROM delta.`{uri}` WHERE `partition` = 0 AND `offset` % 10 < 3")
    return Counter({(p, o): 1 for p in (0, 1) for o in range(APPENDS * 10) if not (p == 0 and o % 10 < 3)})


def _rows(delta_spark, uri: str) -> Counter[tuple[int, int]]:
    read = delta_spark.read(uri)
    return Counter(zip(read["partition"].to_pylist(), read["offset"].to_pylist(), strict=True))


def test_delta_spark_maintains_a_clustered_table_with_deletion_vectors(delta_spark, tmp_path: Path) -> None:
    """One spark-submit (a minute and a half here, beside the test's own Spark): a table without clustering takes the same steps, its
    OPTIMIZE bin-packing instead (``spark_maintenance._compact``)."""
    uri = str(tmp_path / "events")
    expected = _table(delta_spark, uri)
    store = Store({})
    before = store.delta_table(uri)
    assert has_deletion_vectors(before) and wants_delta_spark(before, uri)
    on_disk_before = set(os.listdir(uri))

    report = maintain(store, uri, POLICY, MaintenanceSteps(), notes={"inlet.pipeline": "p"}, offload=OFFLOAD)

    assert report.properties_error is None and report.properties_set == POLICY.properties()
    assert report.compaction is not None and report.compaction.outcome == "done", report.compaction
    assert (report.compaction.files_removed, report.compaction.files_added) == (APPENDS, 1)  # the appends' files, purged
    assert report.vacuum is not None and report.vacuum.outcome == "done", report.vacuum
    assert report.checkpoint is not None and report.checkpoint.outcome == "done", report.checkpoint
    after = store.delta_table(uri)
    assert not has_deletion_vectors(after)
    assert _rows(delta_spark, uri) == expected
    found = duckdb_connection().execute(f"select partition, \"offset\" from delta_scan('{uri}')").fetchall()
    assert Counter(found) == expected
    # VACUUM deleted every file and deletion vector no version uses; the live files stayed.
    live = {a.split("/")[-1] for a in after.get_add_actions(flatten=True).column("path").to_pylist()}
    data = {n for n in os.listdir(uri) if n.endswith(".parquet")}
    assert data == live and not any(n.startswith("deletion_vector_") for n in os.listdir(uri))
    assert report.vacuum.files_deleted >= len({n for n in on_disk_before if not n.startswith((".", "_"))}) - len(live)
    assert "clustering" in TableFeatures.of(after).features
    history = delta_spark.spark.sql(f"DESCRIBE HISTORY delta.`{uri}`").collect()
    ours = [r.operation for r in history if r.userMetadata and json.loads(r.userMetadata).get("inlet.maintenance")]
    assert {"SET TBLPROPERTIES", "OPTIMIZE", "VACUUM END"} <= set(ours), ours
    assert any((tmp_path / "events" / "_delta_log").glob(f"{report.checkpoint.version:020d}.checkpoint*.parquet"))


def test_a_table_delta_rs_maintains_stays_with_it(delta_spark, tmp_path: Path) -> None:
    """Without clustering, features only delta-spark writes, or deletion vectors in its files, a table's
    maintenance is Inlet's own (the offload's delta_spark is never called)."""
    plain, vectors = str(tmp_path / "plain"), str(tmp_path / "vectors")
    for n in range(3):
        write_deltalake(plain, pa.table({"partition": [0, 1], "offset": [n, n]}), mode="append")
    delta_spark.spark.sql(f"CREATE TABLE delta.`{vectors}` (`offset` BIGINT) USING delta "
                          "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    delta_spark.spark.sql(f"INSERT INTO delta.`{vectors}` SELECT /*+ COALESCE(1) */ id FROM range(10)")  # one file
    store = Store({})
    assert not wants_delta_spark(store.delta_table(plain), plain)
    assert not wants_delta_spark(store.delta_table(vectors), vectors)  # vectors on, none in its files yet
    assert not wants_delta_spark(store.delta_table(plain), "s3://bucket/plain")
    offload = Offload(min_bytes=1 << 40, compact=_no_compaction, delta_spark=_no_compaction)  # type: ignore[arg-type]

    report = maintain(store, plain, POLICY, MaintenanceSteps(), offload=offload)
    assert report.compaction is not None and report.compaction.outcome == "done", report.compaction

    # Once a file carries a vector the table goes to delta-spark; a job that cannot start is reported.
    delta_spark.spark.sql(f"DELETE FROM delta.`{vectors}` WHERE `offset` = 1")
    assert wants_delta_spark(store.delta_table(vectors), vectors)

    def no_jvm(*_: object) -> None:
        raise OSError("spark-submit: No such file or directory")

    report = maintain(store, vectors, POLICY, MaintenanceSteps(), offload=Offload(1 << 40, _no_compaction, no_jvm))  # type: ignore[arg-type]
    assert report.compaction is not None and report.compaction.outcome == "failed"
    assert "No such file or directory" in (report.compaction.error or "") and report.health is not None
