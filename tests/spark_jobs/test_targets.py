"""The Delta target's lifecycle without Spark or Kafka: files a task wrote are handed to ``commit`` and
``discard`` as the run hands them (tests/spark_jobs/test_ingest_delta.py runs the whole job)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from spark_jobs.delta_tables.files import FileSet
from spark_jobs.errors import JobError
from spark_jobs.plans import TaskReport
from spark_jobs.spec import RunSpec
from spark_jobs.storage import Store
from spark_jobs.targets import target_for
from spark_jobs.targets.delta_append import DeltaAppend


def _never_cancelled(before: str) -> None:
    pass


def _row(schema: pa.Schema, **values: object) -> pa.Table:
    return pa.Table.from_pylist([{f.name: values.get(f.name) for f in schema}], schema=schema)


def test_a_failed_main_commit_discards_only_what_was_not_committed(tmp_path: Path) -> None:
    uri, quarantine_uri = str(tmp_path / "events"), str(tmp_path / "events__quarantine")
    # The table exists unpartitioned; the spec says partitioned: the main commit fails after the quarantine's.
    write_deltalake(uri, pa.table({"partition": pa.array([7], pa.int32())}))
    spec = RunSpec.model_validate({
        "run_id": "run-1", "pipeline_id": "p1", "txn": {"app_id": "inlet-pipeline-p1", "version": 1},
        # A key format apart from the value's: decoded per record on Arrow, so records can go to quarantine.
        "source": {"kafka_config": {"bootstrap.servers": "127.0.0.1:9"}, "ranges": {"t": {"0": [0, 2]}}, "key_format": "string"},
        "target": {"type": "delta", "uri": uri, "partition_by": ["partition"], "quarantine_uri": quarantine_uri},
    })
    target = target_for(spec, _never_cancelled)
    assert isinstance(target, DeltaAppend) and not target.uses_dataframes
    assert target.prepare() is None

    # What a task would have written and reported: one row into each table.
    main = FileSet("main", Store(), uri, target.schemas["main"], ["partition"])
    main.write(_row(target.schemas["main"], topic="t", partition=0, offset=0, _inlet_run_id="run-1"))
    quarantine = FileSet("quarantine", Store(), quarantine_uri, target.schemas["quarantine"], [])
    quarantine.write(_row(target.schemas["quarantine"], topic="t", partition=0, offset=1, _inlet_run_id="run-1",
                          _inlet_quarantine_reason="key is not UTF-8"))
    reports = [TaskReport(files=main.close() + quarantine.close(), quarantined=1)]

    with pytest.raises(JobError, match="is partitioned by") as failed:
        target.commit(reports)
    target.discard(reports)

    assert failed.value.kind == "invalid_spec"
    # The quarantine commit stands (a retry skips it by its txn): its file is a row of the table now.
    assert DeltaTable(quarantine_uri).to_pyarrow_table()["offset"].to_pylist() == [1]
    assert DeltaTable(quarantine_uri).transaction_version("inlet-pipeline-p1") == 1
    # The main table's file was never committed: it is gone, and the table holds what it held.
    main_file = next(f for f in reports[0].files if f.table == "main")
    assert not (Path(uri) / main_file.path).exists()
    assert DeltaTable(uri).to_pyarrow_table().to_pylist() == [{"partition": 7}]
