"""The keyed Delta target's lifecycle without Spark or Kafka (``targets.delta_upsert``): a run whose
MERGE fails after its quarantine commit is tried again and lands once; a retry of a merged run does
nothing (tests/spark_jobs/test_keyed_tables.py runs the whole job)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from spark_jobs.delta_tables.changes import ChangeReader
from spark_jobs.delta_tables.files import FileSet
from spark_jobs.errors import JobError
from spark_jobs.plans import PartitionStats, TaskReport
from spark_jobs.spec import RunSpec
from spark_jobs.storage import Store
from spark_jobs.targets import delta_upsert as upsert
from spark_jobs.targets import target_for
from tests.fixtures.debezium import QUARANTINE, ROWS, envelope, record_batch


def _never_cancelled(before: str) -> None:
    pass


def _attempt(uri: str) -> upsert.DeltaUpsert:
    spec = RunSpec.model_validate({
        "run_id": "run-1", "pipeline_id": "p1", "txn": {"app_id": "inlet-pipeline-p1", "version": 1},
        "source": {"kafka_config": {"bootstrap.servers": "127.0.0.1:9"}, "ranges": {"t": {"0": [0, 3]}},
                   "value_format": "json", "schema": "id BIGINT, name STRING, at TIMESTAMP"},
        "target": {"type": "delta", "uri": uri, "quarantine_uri": f"{uri}__quarantine", "mode": "upsert", "key": ["id"],
                   "sequence_by": "source.lsn", "changes": "debezium"},
    })
    target = target_for(spec, _never_cancelled)
    assert isinstance(target, upsert.DeltaUpsert)
    return target


def _reports(target: upsert.DeltaUpsert) -> list[TaskReport]:
    """What the tasks would report: two changes (and a tombstone skipped), one record in quarantine."""
    assert target.prepare() is None
    target.reader = reader = ChangeReader(ROWS, ["id"], "source.lsn", True, "UTC")
    target.schemas["main"] = reader.schema
    batch = record_batch([envelope("c", None, {"id": 1, "name": "a"}, 10), envelope("c", None, {"id": 2, "name": "b"}, 11),
                    None, b"{not json"])
    changes, bad, skipped = reader.read(batch, "run-1", QUARANTINE)
    quarantine = FileSet("quarantine", Store(), f"{target.main.uri}__quarantine", QUARANTINE, [])
    quarantine.write(bad)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, changes.schema) as stream:
        stream.write_table(changes)
    return [TaskReport(files=quarantine.close(), partitions={("t", 0): PartitionStats(4, 0, 3)}, quarantined=bad.num_rows, skipped=skipped,
                       changes=sink.getvalue().to_pybytes())]


def test_a_run_whose_merge_failed_is_tried_again_and_lands_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    uri = str(tmp_path / "customers")
    first = _attempt(uri)
    reports = _reports(first)

    def unreachable(*args: object, **kwargs: object) -> None:
        raise JobError("target_commit", "the store went away")

    with monkeypatch.context() as patch:
        patch.setattr(upsert, "merge_changes", unreachable)
        with pytest.raises(JobError, match="went away"):
            first.commit(reports)
    first.discard(reports)
    assert DeltaTable(f"{uri}__quarantine").to_pyarrow_table().num_rows == 1  # committed before the MERGE
    assert not Path(uri).exists()

    again = _attempt(uri)
    done = again.commit(_reports(again))
    assert (done.rows, done.quarantined, done.already_committed) == (2, 1, False)
    assert sorted(DeltaTable(uri).to_pyarrow_table().select(["id", "name"]).to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "name": "a"}, {"id": 2, "name": "b"}]
    assert DeltaTable(f"{uri}__quarantine").to_pyarrow_table().num_rows == 1  # once, though written twice

    retried = _attempt(uri).prepare()  # a retry of the merged run: nothing to do
    assert retried is not None and retried.already_committed


def _debezium_target(uri: str, partitions: int, **keyed: object) -> tuple[RunSpec, upsert.DeltaUpsert]:
    """A keyed target of Debezium changes (``keyed``: more of its settings), prepared as a run's first step."""
    spec = RunSpec.model_validate({
        "run_id": "run-1", "pipeline_id": "p1", "txn": {"app_id": "inlet-pipeline-p1", "version": 1},
        "source": {"kafka_config": {"bootstrap.servers": "127.0.0.1:9"},
                   "ranges": {"t": {str(p): [0, 3] for p in range(partitions)}},
                   "value_format": "json", "schema": "id BIGINT, name STRING, at TIMESTAMP"},
        "target": {"type": "delta", "uri": uri, "quarantine_uri": f"{uri}__quarantine", "mode": "upsert", "key": ["id"],
                   "sequence_by": "source.lsn", "changes": "debezium", **keyed},
    })
    target = target_for(spec, _never_cancelled)
    assert isinstance(target, upsert.DeltaUpsert) and target.prepare() is None
    return spec, target


def _task_reports(target: upsert.DeltaUpsert, reader: ChangeReader, tasks: list[list[bytes]],
                  at: dt.datetime | None = None) -> list[TaskReport]:
    """What ``target``'s tasks would report, a task per partition of ``tasks``' values (timed ``at``)."""
    target.reader = reader
    target.schemas["main"] = reader.schema
    reports = []
    for partition, values in enumerate(tasks):
        batch = record_batch(list(values), partition=partition, timestamps=[at] * len(values) if at else None)
        changes, _, _ = reader.read(batch, "run-1", QUARANTINE)
        kept = upsert.latest(changes, target._kept_per())
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, kept.schema) as stream:
            stream.write_table(kept)
        reports.append(TaskReport(partitions={("t", partition): PartitionStats(len(values), 0, len(values))},
                                  changes=sink.getvalue().to_pybytes()))
    return reports


def test_an_scd_type_2_run_keeps_every_version_its_tasks_report(tmp_path: Path) -> None:
    uri = str(tmp_path / "customers")
    spec, target = _debezium_target(uri, 2, scd_type=2)
    # Two tasks' changes of key 1, one sequence (20) read twice (a key in two partitions): kept once.
    reports = _task_reports(target, ChangeReader(ROWS, ["id"], "source.lsn", True, "UTC"),
                            [[envelope("c", None, {"id": 1, "name": "a"}, 10), envelope("u", None, {"id": 1, "name": "b"}, 20),
                              envelope("d", {"id": 1}, None, 40)],
                             [envelope("u", None, {"id": 1, "name": "b"}, 20), envelope("u", None, {"id": 1, "name": "c"}, 30)]])
    done = target.commit(reports)
    assert (done.rows, done.already_committed) == (4, False)  # the versions inserted: 20 read twice, kept once
    rows = DeltaTable(uri).to_pyarrow_table().select(["id", "name", "_inlet_valid_from", "_inlet_valid_to",
                                                      "_inlet_current", "_inlet_deleted"]).to_pylist()
    assert sorted((tuple(r.values()) for r in rows), key=lambda r: r[2]) == [
        (1, "a", 10, 20, False, False), (1, "b", 20, 30, False, False), (1, "c", 30, 40, False, False),
        (1, None, 40, None, False, True)]
    with pytest.raises(ValueError, match="scd_type and deletes go with mode upsert"):
        RunSpec.model_validate({**spec.model_dump(), "target": {"type": "delta", "uri": uri, "quarantine_uri": f"{uri}_q",
                                                                "scd_type": 2}})


def test_a_soft_deleting_run_keeps_the_values_of_the_change_a_delete_follows_in_another_task(tmp_path: Path) -> None:
    uri = str(tmp_path / "customers")
    spec, target = _debezium_target(uri, 2, deletes="soft")
    deleted_at = dt.datetime(2026, 11, 29, 5, 40, tzinfo=dt.UTC)
    reader = ChangeReader(ROWS, ["id"], "source.lsn", True, "UTC", soft_deletes=spec.target.deletes == "soft")
    reports = _task_reports(target, reader, [[envelope("c", None, {"id": 1, "name": "a"}, 10),
                                              envelope("u", None, {"id": 1, "name": "b"}, 20)],
                                             [envelope("d", {"id": 1}, None, 30)]], at=deleted_at)
    assert target.commit(reports).rows == 1
    assert DeltaTable(uri).to_pyarrow_table().select(["id", "name", "_inlet_sequence", "_inlet_deleted", "_inlet_deleted_at"]
                                                     ).to_pylist() == [
        {"id": 1, "name": "b", "_inlet_sequence": 30, "_inlet_deleted": True, "_inlet_deleted_at": deleted_at}]
    with pytest.raises(ValueError, match="soft deletes go with scd_type 1"):
        RunSpec.model_validate({**spec.model_dump(), "target": {**spec.target.model_dump(), "scd_type": 2}})
