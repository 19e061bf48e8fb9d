"""Table maintenance racing runs, on local disk and on S3 (moto's emulator: tests/fixtures/object_storage.py),
with delta-rs as the job commits (no Spark): a run's
append committed during a compaction; a compaction committed during a replace-mode replay's rewrite,
and the other way round; two compactions at once. Whichever commits first, every record is in the
table exactly once afterwards, and the loser is refused (``target_conflict`` for a replay, which is
retried and plans again; ``conflict`` for a compaction, tried again by a later task)."""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from spark_jobs.delta_tables import Table
from spark_jobs.delta_tables.commit import commit_files
from spark_jobs.delta_tables.replace import ReplacePlan, carried_rows, plan_replace
from spark_jobs.errors import JobError
from spark_jobs.maintenance import MaintenanceSteps, TablePolicy, compaction, maintain, preview
from spark_jobs.plans import DataFile
from spark_jobs.spec import Txn
from spark_jobs.storage import Store

SCHEMA = pa.schema([("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()),
                    ("value", pa.string())])
POLICY = TablePolicy(target_file_bytes=1 << 20, small_file_bytes=1 << 18, vacuum_retention_hours=0)
APP = "inlet-pipeline-test"


def _rows(partition: int, start: int, end: int, tag: str = "v1") -> pa.Table:
    return pa.table({"topic": ["t"] * (end - start), "partition": pa.array([partition] * (end - start), pa.int32()),
                     "offset": pa.array(range(start, end), pa.int64()),
                     "value": [f"{tag}-{partition}-{o}" for o in range(start, end)]}, schema=SCHEMA)


@dataclass(frozen=True)
class Where:
    """A table's folder: on local disk, or in a bucket of the S3 emulator."""

    store: Store
    uri: str

    def __str__(self) -> str:
        return self.uri

    def parquet_files(self) -> list[str]:
        from pyarrow import fs as pafs

        filesystem, root = self.store.filesystem(self.uri)
        found = filesystem.get_file_info(pafs.FileSelector(root, recursive=False))
        return [f.base_name for f in found if f.base_name.endswith(".parquet")]


@pytest.fixture(params=["local", "s3"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> Where:
    if request.param == "local":
        (tmp_path / "table").mkdir()
        return Where(Store({}), str(tmp_path / "table"))
    bucket = request.getfixturevalue("s3_bucket")
    return Where(Store(bucket.environment), f"{bucket.root}/table")


def _file(root: Where, rows: pa.Table) -> DataFile:
    name = f"part-{uuid.uuid4().hex}.parquet"
    filesystem, base = root.store.filesystem(root.uri)
    pq.write_table(rows, f"{base}/{name}", filesystem=filesystem)
    size = filesystem.get_file_info(f"{base}/{name}").size
    return DataFile("main", name, size, {}, rows.num_rows, compaction._stats(rows))


def _run(table: Table, root: Where, seq: int, pieces: list[pa.Table]) -> int | None:
    """A run as the job commits it: one file per Kafka partition read, one append, its txn."""
    return commit_files(table, Txn(app_id=APP, version=seq), [_file(root, p) for p in pieces], SCHEMA)


def _records(root: Where) -> Counter[tuple[int, int]]:
    rows = root.store.delta_table(root.uri).to_pyarrow_table(columns=["partition", "offset"]).to_pylist()
    return Counter((r["partition"], r["offset"]) for r in rows)


def _values(root: Where) -> dict[tuple[int, int], str]:
    rows = root.store.delta_table(root.uri).to_pyarrow_table(columns=["partition", "offset", "value"]).to_pylist()
    return {(r["partition"], r["offset"]): r["value"] for r in rows}


def _table(root: Where, runs: int = 6) -> tuple[Table, Where]:
    """A table of ``runs`` small runs over two Kafka partitions, 10 records each per partition."""
    table = Table(root.store, root.uri)
    for seq in range(1, runs + 1):
        _run(table, root, seq, [_rows(p, (seq - 1) * 10, seq * 10) for p in (0, 1)])
    return table, root


def _expected(runs: int) -> Counter[tuple[int, int]]:
    return Counter((p, o) for p in (0, 1) for o in range(runs * 10))


def _replay(table: Table, root: Where, seq: int, ranges: dict[str, dict[str, tuple[int, int]]]) -> ReplacePlan:
    """Replace mode's plan, as the job makes it before writing: the files holding the ranges."""
    plan = ReplacePlan()
    plan_replace(table, "main", ranges, plan)
    return plan


def _commit_replay(table: Table, root: Where, seq: int, plan: ReplacePlan,
                   ranges: dict[str, dict[str, tuple[int, int]]]) -> int | None:
    """The replay's write and commit: the rewritten files' other rows, plus the ranges read again."""
    carried = [carried_rows(table.store, f, ranges, SCHEMA) for f in plan.rewrite]
    fresh = [_rows(int(p), s, e, tag="v2") for ps in ranges.values() for p, (s, e) in ps.items()]
    files = [_file(root, rows) for rows in carried + fresh if rows.num_rows]
    return commit_files(table, Txn(app_id=APP, version=seq), files, SCHEMA, removes=plan.remove["main"])


def _started(table: Table, root: Where, token: str, delta: DeltaTable | None = None) -> tuple[
        DeltaTable, compaction.CompactionPlan, list[compaction.Rewritten]]:
    """A compaction planned on the table as it is now and its files written, not yet committed."""
    delta = delta or table.delta()
    plan = compaction.plan_compaction(delta, target_bytes=POLICY.target_file_bytes, small_bytes=POLICY.small_file_bytes)
    writer = compaction.BinWriter.of(table.store, str(root), delta, target_bytes=POLICY.target_file_bytes, token=token)
    return delta, plan, compaction.rewrite(writer, plan)


def _compact(table: Table, root: Where) -> int:
    return compaction.commit(*_started(table, root, "now"), {})


def test_a_compaction_merges_small_files_and_keeps_every_record(where: Where, request: pytest.FixtureRequest) -> None:
    table, root = _table(where)
    before = preview(table.store, str(root), POLICY, MaintenanceSteps())
    assert (before.files_to_compact, before.bins) == (12, 1)
    assert before.health is not None and before.health.files == before.health.small_files == 12

    report = maintain(table.store, str(root), POLICY, MaintenanceSteps(vacuum=False))

    assert report.compaction is not None and report.compaction.outcome == "done"
    assert (report.compaction.files_removed, report.compaction.files_added) == (12, 1)
    assert report.health is not None and report.health.files == 1
    assert _records(root) == _expected(6)
    filesystem, base = root.store.filesystem(root.uri)
    (written,) = [name for name in root.parquet_files() if name.startswith("compacted-")]
    with filesystem.open_input_file(f"{base}/{written}") as handle:
        meta = pq.ParquetFile(handle).metadata
    columns = {meta.row_group(0).column(i).path_in_schema: meta.row_group(0).column(i) for i in range(meta.num_columns)}
    assert {c.compression for c in columns.values()} == {"ZSTD"}  # as delta-rs writes: half snappy's size
    assert "DELTA_BINARY_PACKED" in columns["offset"].encodings  # ascending offsets: a few bits a row
    assert "RLE_DICTIONARY" in columns["value"].encodings
    if "://" not in root.uri:  # on local disk, delta-spark reads the compacted table as delta-rs does
        request.getfixturevalue("delta_spark").assert_reads_alike(root.uri, root.store.delta_table(root.uri).to_pyarrow_table())
    assert report.properties_set["delta.checkpointInterval"] == "10"
    assert root.store.delta_table(root.uri).metadata().configuration["delta.logRetentionDuration"] == "interval 30 days"
    assert report.checkpoint is not None and report.checkpoint.outcome == "done"
    assert report.health.checkpoint_version == report.health.version


def test_a_run_appending_during_a_compaction_lands_once_and_the_compaction_too(where: Where) -> None:
    table, root = _table(where)
    delta, plan, written = _started(table, root, "race")

    assert _run(table, root, 7, [_rows(p, 60, 70) for p in (0, 1)]) is not None  # the run commits meanwhile
    compaction.commit(delta, plan, written, {})  # then the compaction, from its older snapshot

    assert _records(root) == _expected(7)
    assert len(root.store.delta_table(root.uri).file_uris()) == 1 + 2  # the compacted file and the run's two
    assert _run(table, root, 7, [_rows(p, 60, 70) for p in (0, 1)]) is None  # a retried run still commits nothing


def test_a_compaction_during_a_replays_rewrite_makes_the_replay_plan_again(where: Where) -> None:
    table, root = _table(where)
    ranges = {"t": {"0": (15, 25)}}
    plan = _replay(table, root, 7, ranges)  # the replay planned on the small files…
    assert plan.remove["main"]

    report = maintain(table.store, str(root), POLICY, MaintenanceSteps(vacuum=False, checkpoint=False))
    assert report.compaction is not None and report.compaction.outcome == "done"  # …that a compaction then rewrote

    with pytest.raises(JobError) as refused:
        _commit_replay(table, root, 7, plan, ranges)
    assert refused.value.kind == "target_conflict"
    assert _records(root) == _expected(6)  # nothing of the refused attempt is in the table

    retried = _replay(table, root, 7, ranges)  # the retry plans again, on the compacted file
    assert _commit_replay(table, root, 7, retried, ranges) is not None
    assert _records(root) == _expected(6)
    values = _values(root)
    assert {k for k, v in values.items() if v.startswith("v2")} == {(0, o) for o in range(15, 25)}


def test_a_replay_committing_during_a_compaction_makes_the_compaction_give_up(where: Where) -> None:
    table, root = _table(where)
    delta, plan, written = _started(table, root, "race")
    ranges = {"t": {"1": (0, 30)}}
    assert _commit_replay(table, root, 7, _replay(table, root, 7, ranges), ranges) is not None

    from deltalake.exceptions import CommitFailedError
    with pytest.raises(CommitFailedError):
        compaction.commit(delta, plan, written, {})
    compaction.discard(table.store, str(root), written)

    assert _records(root) == _expected(6)
    assert sum(v.startswith("v2") for v in _values(root).values()) == 30
    again = maintain(table.store, str(root), POLICY, MaintenanceSteps(vacuum=False, checkpoint=False))
    assert again.compaction is not None and again.compaction.outcome == "done"  # the next task compacts
    assert _records(root) == _expected(6)
    assert sum(v.startswith("v2") for v in _values(root).values()) == 30


def test_two_compactions_at_once_commit_once(where: Where) -> None:
    table, root = _table(where)
    first = _started(table, root, "one")
    second = _started(table, root, "two", delta=table.delta())  # planned on the same snapshot, before either commits

    compaction.commit(*first, {})
    from deltalake.exceptions import CommitFailedError
    with pytest.raises(CommitFailedError):
        compaction.commit(*second, {})

    assert _records(root) == _expected(6)
    assert len(root.store.delta_table(root.uri).file_uris()) == 1


def test_vacuum_reclaims_compacted_files_and_a_checkpoint_keeps_runs_recognised(where: Where) -> None:
    table, root = _table(where)
    maintain(table.store, str(root), POLICY, MaintenanceSteps(vacuum=False, checkpoint=False))
    dry = preview(table.store, str(root), POLICY, MaintenanceSteps())
    assert len(dry.files_to_vacuum) == 12 and dry.files_to_compact == 0

    report = maintain(table.store, str(root), POLICY, MaintenanceSteps())

    assert report.vacuum is not None and (report.vacuum.outcome, report.vacuum.files_deleted) == ("done", 12)
    assert len(root.parquet_files()) == 1
    assert _records(root) == _expected(6)
    assert _run(table, root, 6, [_rows(0, 50, 60)]) is None  # the txn survives in the checkpoint


def test_a_compaction_committing_between_a_replays_check_and_its_commit_is_caught_by_the_fence(
    where: Where, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The narrowest window: the replay loaded the table and found its files live, then a compaction of
    those files committed. delta-rs alone lets the replay commit (a compaction's removes change no data);
    the rewrite fence refuses it."""
    from spark_jobs.delta_tables import commit as commit_module

    table, root = _table(where)
    ranges = {"t": {"0": (15, 25)}}
    plan = _replay(table, root, 7, ranges)
    still_live = commit_module.check_still_live

    def then_compact(delta: DeltaTable, removed: list[str]) -> None:
        still_live(delta, removed)
        _compact(table, root)  # a compaction alone (no property change, which would make the replay reload)

    monkeypatch.setattr(commit_module, "check_still_live", then_compact)
    with pytest.raises(JobError) as refused:
        _commit_replay(table, root, 7, plan, ranges)
    assert refused.value.kind == "target_conflict"
    assert _records(root) == _expected(6)
    assert not any(v.startswith("v2") for v in _values(root).values())


def test_vacuum_keeps_a_file_a_run_is_still_writing_and_takes_one_a_checkpoint_forgot(where: Where) -> None:
    """A full vacuum lists the folder: a file no log names that is younger than the retention (a run's,
    not committed yet) stays; files whose tombstones a checkpoint already dropped are still deleted."""
    table, root = _table(where)
    maintain(table.store, str(root), POLICY, MaintenanceSteps(vacuum=False))  # compaction, then a checkpoint
    pending = _file(root, _rows(0, 60, 70))  # a run's file, written and not committed yet
    week = TablePolicy(target_file_bytes=POLICY.target_file_bytes, small_file_bytes=POLICY.small_file_bytes)

    kept = maintain(table.store, str(root), week, MaintenanceSteps(compact=False, checkpoint=False))
    assert kept.vacuum is not None and kept.vacuum.files_deleted == 0  # nothing is a week old
    assert pending.path in root.parquet_files()
    assert commit_files(table, Txn(app_id=APP, version=7), [pending], SCHEMA) is not None  # the run commits it

    reclaimed = maintain(table.store, str(root), POLICY, MaintenanceSteps(compact=False, checkpoint=False))
    assert reclaimed.vacuum is not None and reclaimed.vacuum.files_deleted == 12
    assert _records(root) == _expected(6) + Counter((0, o) for o in range(60, 70))


def test_compacted_files_delta_encode_offsets_and_timestamps_and_keep_every_other_leafs_dictionary() -> None:
    schema = pa.schema([("topic", pa.string()), ("offset", pa.int64()), ("timestamp", pa.timestamp("us", tz="UTC")),
                        ("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
                        ("amount", pa.float64())])
    assert compaction._write_options(schema) == {
        "compression": "zstd",
        "use_dictionary": ["topic", "headers.list.element.key", "headers.list.element.value", "amount"],
        "column_encoding": {"offset": "DELTA_BINARY_PACKED", "timestamp": "DELTA_BINARY_PACKED"},
    }
