"""Delta tables Inlet shares with another engine: delta-spark (the jars ``make setup`` caches, as a
Databricks or delta-spark team runs it) changes a table between Inlet's writes, and Inlet's runs,
replace-mode replays, MERGEs and maintenance (compaction, vacuum with files aged past the retention,
checkpoint) then end exact by delta-spark's reading and DuckDB's (every record once, deleted rows stay
deleted, updated rows keep their new values), or are refused with the feature named and the table
unchanged (``spark_jobs.table_features``).

Commits as the job makes them (``commit_files``, ``plan_replace``, ``overwrite_ranges``,
``merge_changes``, ``maintain``), without a Kafka run, except the last test: a real run's replay
through the warm engine."""

from __future__ import annotations

import os
import re
import time
import uuid
from collections import Counter
from datetime import UTC, date, datetime
from pathlib import Path
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spark_jobs.delta_log import commit_actions
from spark_jobs.delta_tables import Table
from spark_jobs.delta_tables.commit import commit_files, merge_changes
from spark_jobs.delta_tables.replace import ReplacePlan, carried_rows, overwrite_ranges, partition_column, plan_replace
from spark_jobs.errors import JobError
from spark_jobs.maintenance import MaintenanceSteps, TablePolicy, compaction, maintain
from spark_jobs.plans import DataFile
from spark_jobs.spec import Txn
from spark_jobs.storage import Store
from spark_jobs.table_features import SUPPORT, TableFeatures
from tests.spark_jobs.helpers import duckdb_connection
from tests.spark_jobs.test_maintenance_races import APP, SCHEMA, Where, _file, _rows, _run

pytestmark = pytest.mark.slow  # delta-spark in the test process

# delta-rs's vacuum judges a file the log removed by the time of its removal, which cannot be set back as
# a file's modification time can: so these tests vacuum as a week later would, with no retention left.
RETENTION = TablePolicy(target_file_bytes=1 << 20, small_file_bytes=1 << 18, vacuum_retention_hours=0)
WEEK_AND_A_DAY = 8 * 24 * 3600
COLUMN_MAPPING = ("ALTER TABLE {t} SET TBLPROPERTIES ('delta.columnMapping.mode'='name', 'delta.minReaderVersion'='2', "
                  "'delta.minWriterVersion'='5')")


@pytest.fixture
def where(tmp_path: Path) -> Where:
    (tmp_path / "table").mkdir()
    return Where(Store({}), str(tmp_path / "table"))


def _table(where: Where, runs: int = 3) -> Table:
    """``runs`` runs of 10 records per Kafka partition (0 and 1): offsets 0 to ``runs * 10``."""
    table = Table(where.store, where.uri)
    for seq in range(1, runs + 1):
        _run(table, where, seq, [_rows(p, (seq - 1) * 10, seq * 10) for p in (0, 1)])
    return table


def _sql(delta_spark, where: Where, *statements: str) -> None:
    for statement in statements:
        delta_spark.spark.sql(statement.format(t=f"delta.`{where.uri}`"))


def _spark_rows(delta_spark, where: Where) -> dict[tuple[int, int], list[str]]:
    """(partition, offset) -> the values delta-spark reads there (a list: a duplicate shows as two)."""
    rows: dict[tuple[int, int], list[str]] = {}
    for row in delta_spark.read(where.uri).select(["partition", "offset", "value"]).to_pylist():
        rows.setdefault((row["partition"], row["offset"]), []).append(row["value"])
    return rows


def _duckdb_rows(where: Where) -> Counter[tuple[int, int]]:
    found = duckdb_connection().execute(f"select partition, \"offset\" from delta_scan('{where.uri}')").fetchall()
    return Counter((p, o) for p, o in found)


def _expected(runs: int, *, deleted: set[tuple[int, int]] = frozenset(), replayed: dict[tuple[int, int], str] | None = None,
              updated: dict[tuple[int, int], str] | None = None) -> dict[tuple[int, int], list[str]]:
    rows = {(p, o): [f"v1-{p}-{o}"] for p in (0, 1) for o in range(runs * 10) if (p, o) not in deleted}
    rows.update({k: [v] for k, v in (updated or {}).items()})
    rows.update({k: [v] for k, v in (replayed or {}).items()})
    return rows


def _replay(table: Table, where: Where, seq: int, ranges: dict[str, dict[str, tuple[int, int]]]) -> int | None:
    """A replace-mode replay as the job makes it: planned, the ranges read again (tagged v2), committed."""
    plan = ReplacePlan()
    plan_replace(table, "main", ranges, plan)
    fresh = [_file(where, _rows(int(p), s, e, tag="v2")) for ps in ranges.values() for p, (s, e) in ps.items()]
    if "main" in plan.overwrite:
        return overwrite_ranges(table, Txn(app_id=APP, version=seq), fresh, SCHEMA, ranges)
    carried = [_file(where, rows) for f in plan.rewrite if (rows := carried_rows(table.store, f, ranges, SCHEMA)).num_rows]
    return commit_files(table, Txn(app_id=APP, version=seq), carried + fresh, SCHEMA, removes=plan.remove["main"])


def _age_files(where: Where) -> None:
    """Every file of the table older than the vacuum's retention, as a week later."""
    past = time.time() - WEEK_AND_A_DAY
    for folder, _, names in os.walk(where.uri):
        if "_delta_log" not in folder:
            for name in names:
                os.utime(os.path.join(folder, name), (past, past))


def _maintain(where: Where) -> None:
    """Inlet's maintenance, every step; on a table with table features (writer version 7) it leaves the
    properties alone (delta-rs would add a feature: ``features._in_use``)."""
    writer_version = Table(where.store, where.uri).delta().protocol().min_writer_version
    report = maintain(where.store, where.uri, RETENTION, MaintenanceSteps())
    assert (report.properties_error is not None and "variantType" in report.properties_error) == (writer_version >= 7)
    assert report.compaction is not None and report.compaction.outcome in ("done", "nothing"), report.compaction.error
    assert report.vacuum is not None and report.vacuum.outcome == "done" and report.vacuum.files_deleted, report.vacuum
    assert report.checkpoint is not None and report.checkpoint.outcome == "done", report.checkpoint


def _dv_files(where: Where) -> list[str]:
    return sorted(n for n in os.listdir(where.uri) if n.startswith("deletion_vector_"))


@pytest.mark.parametrize("deletion_vectors", [False, True], ids=["plain", "deletion-vectors"])
def test_a_delete_stays_deleted_through_runs_replays_and_maintenance(delta_spark, where: Where, deletion_vectors: bool) -> None:
    table = _table(where)
    if deletion_vectors:
        _sql(delta_spark, where, "ALTER TABLE {t} SET TBLPROPERTIES ('delta.enableDeletionVectors'='true')")
    _sql(delta_spark, where, "DELETE FROM {t} WHERE offset IN (5, 25)", "UPDATE {t} SET value = 'fixed' WHERE offset = 3")
    deleted = {(p, o) for p in (0, 1) for o in (5, 25)}
    updated = {(p, 3): "fixed" for p in (0, 1)}
    assert bool(_dv_files(where)) == deletion_vectors

    _run(table, where, 4, [_rows(p, 30, 40) for p in (0, 1)])  # a normal run
    # A replay of partition 0 from an offset past the changed rows: its files hold them too.
    replay = {"t": {"0": (10, 20)}}
    assert _replay(table, where, 5, replay) is not None

    expected = _expected(4, deleted=deleted, updated=updated, replayed={(0, o): f"v2-0-{o}" for o in range(10, 20)})
    assert _spark_rows(delta_spark, where) == expected
    _age_files(where)
    _maintain(where)

    assert _spark_rows(delta_spark, where) == expected, "maintenance changed what delta-spark reads"
    assert _duckdb_rows(where) == Counter({k: len(v) for k, v in expected.items()})
    if deletion_vectors:
        assert _dv_files(where), "vacuum deleted the deletion-vector file the log names"
        assert Table(where.store, where.uri).delta().transaction_version(APP) == 5


def test_a_replay_of_deleted_rows_brings_back_only_what_it_reads_again(delta_spark, where: Where) -> None:
    table = _table(where, runs=2)
    _sql(delta_spark, where, "ALTER TABLE {t} SET TBLPROPERTIES ('delta.enableDeletionVectors'='true')",
         "DELETE FROM {t} WHERE value LIKE 'v1-0-%' AND offset < 4")

    assert _replay(table, where, 3, {"t": {"0": (2, 12)}}) is not None
    assert _replay(table, where, 3, {"t": {"0": (2, 12)}}) is None, "a repeat of the replay committed again"

    # Offsets 2 and 3 are read again from Kafka; 0 and 1 stay deleted; 12-19 keep their first values.
    assert _spark_rows(delta_spark, where) == _expected(2, deleted={(0, 0), (0, 1)},
                                                        replayed={(0, o): f"v2-0-{o}" for o in range(2, 12)})


def test_a_keyed_merge_into_a_table_with_deletion_vectors(delta_spark, where: Where) -> None:
    from spark_jobs.columns import DELETED, RUN_ID, SEQUENCE

    def changes(seq: int, keys: range, tag: str) -> pa.Table:
        return pa.table({"id": pa.array(list(keys), pa.int64()), "name": [f"{tag}-{k}" for k in keys],
                         SEQUENCE: pa.array([seq * 1000 + k for k in keys], pa.int64()),
                         DELETED: pa.array([False] * len(keys)), RUN_ID: [f"run-{seq}"] * len(keys)})

    table = Table(where.store, where.uri)
    merge_changes(table, Txn(app_id=APP, version=1), changes(1, range(20), "a"), ["id"])
    _sql(delta_spark, where, "ALTER TABLE {t} SET TBLPROPERTIES ('delta.enableDeletionVectors'='true')",
         "DELETE FROM {t} WHERE id IN (3, 4)")

    merge_changes(table, Txn(app_id=APP, version=2), changes(2, range(10, 25), "b"), ["id"])

    names = {r["id"]: r["name"] for r in delta_spark.read(where.uri).to_pylist()}
    assert len(delta_spark.read(where.uri)) == len(names)
    assert names == {**{k: f"a-{k}" for k in range(10) if k not in (3, 4)}, **{k: f"b-{k}" for k in range(10, 25)}}


@pytest.mark.parametrize(("feature", "statements"), [
    ("rowTracking", ["ALTER TABLE {t} SET TBLPROPERTIES ('delta.enableRowTracking'='true')"]),
    ("clustering", ["ALTER TABLE {t} CLUSTER BY (partition)"]),
    ("inCommitTimestamp", ["ALTER TABLE {t} SET TBLPROPERTIES ('delta.enableInCommitTimestamps'='true')"]),
    ("typeWidening", ["ALTER TABLE {t} SET TBLPROPERTIES ('delta.enableTypeWidening'='true')"]),
    ("columnMapping", [COLUMN_MAPPING, "ALTER TABLE {t} RENAME COLUMN value TO payload"]),
    ("CHECK constraints", ["ALTER TABLE {t} ADD CONSTRAINT non_negative CHECK (offset >= 0)"]),
])
def test_a_feature_inlet_cannot_write_is_refused_and_the_table_left_as_it_was(delta_spark, where: Where, feature: str,
                                                                               statements: list[str]) -> None:
    table = _table(where, runs=2)
    _sql(delta_spark, where, *statements)
    before, version = _plain_columns(delta_spark, where), table.delta().version()

    for attempt in (lambda: _run(table, where, 3, [_rows(0, 20, 30)]),
                    lambda: _replay(table, where, 3, {"t": {"0": (5, 15)}})):
        with pytest.raises(JobError) as refused:
            attempt()
        assert refused.value.kind == "table_unsupported" and feature in refused.value.message, refused.value.message
    assert table.delta().version() == version, "a refused operation committed"
    _age_files(where)
    report = maintain(where.store, where.uri, RETENTION, MaintenanceSteps())

    if feature in SUPPORT and not SUPPORT[feature].allows:  # delta-rs cannot write the table at all
        assert report.properties_error and feature in report.properties_error
        steps = (report.compaction, report.vacuum, report.checkpoint)
        assert all(s is not None and s.outcome == "failed" and feature in (s.error or "") for s in steps), steps
        assert table.delta().version() == version
    elif feature == "columnMapping":  # compaction reads the files by the columns' names and types
        assert report.compaction is not None and report.compaction.outcome == "failed"
    else:  # a constraint binds the rows written, not compaction's rewrite of them
        assert report.compaction is not None and report.compaction.outcome == "done", report.compaction
    assert _sorted(_plain_columns(delta_spark, where)) == _sorted(before)


def test_a_variant_column_another_engine_added_is_appended_to_and_never_rewritten(delta_spark, where: Where) -> None:
    """Inlet appends VARIANT columns itself (``formats.variant``): a run into a table delta-spark gave one
    leaves it NULL in the new rows; a replay or a compaction, which would rewrite files delta-spark wrote
    with it, is refused."""
    table = _table(where, runs=2)
    _sql(delta_spark, where, "ALTER TABLE {t} ADD COLUMNS (document VARIANT)",
         "INSERT INTO {t} (topic, `partition`, `offset`, value, document) VALUES ('t', 9, 0, 'v1-9-0', parse_json('{{\"a\": 1}}'))")

    _run(table, where, 3, [_rows(0, 20, 30)])

    read = delta_spark.spark.read.format("delta").load(where.uri).selectExpr("partition", "offset", "to_json(document) AS d")
    documents = {(r["partition"], r["offset"]): r["d"] for r in read.collect()}
    assert len(documents) == 2 * 20 + 10 + 1
    assert documents[(9, 0)] == '{"a":1}' and {d for k, d in documents.items() if k != (9, 0)} == {None}
    version = table.delta().version()
    with pytest.raises(JobError, match="document is a VARIANT") as refused:
        _replay(table, where, 4, {"t": {"0": (5, 15)}})
    assert refused.value.kind == "table_unsupported"
    _age_files(where)
    report = maintain(where.store, where.uri, RETENTION, MaintenanceSteps())
    assert report.compaction is not None and report.compaction.outcome == "failed"
    assert "VARIANT" in (report.compaction.error or "") and table.delta().version() == version


def _plain_columns(delta_spark, where: Where) -> pa.Table:
    """The table as delta-spark reads it, less a VARIANT column (which has no Arrow type)."""
    return delta_spark.spark.read.format("delta").load(where.uri).drop("document").toArrow()


def _sorted(rows: pa.Table) -> list[dict[str, object]]:
    return sorted(rows.to_pylist(), key=lambda r: (r["partition"], r["offset"]))


def test_column_mapping_without_renames_is_written_and_a_new_column_refused(delta_spark, where: Where) -> None:
    table = _table(where, runs=1)
    _sql(delta_spark, where, COLUMN_MAPPING)

    _run(table, where, 2, [_rows(p, 10, 20) for p in (0, 1)])
    assert _replay(table, where, 3, {"t": {"1": (5, 15)}}) is not None
    wider = SCHEMA.append(pa.field("extra", pa.string()))
    rows = _rows(0, 20, 25).append_column("extra", pa.array(["x"] * 5))
    with pytest.raises(JobError) as refused:
        commit_files(table, Txn(app_id=APP, version=4), [_file(where, rows)], wider)

    assert refused.value.kind == "table_unsupported" and "columnMapping" in refused.value.message
    assert "ADD COLUMNS" in refused.value.message  # what to do
    assert _spark_rows(delta_spark, where) == _expected(2, replayed={(1, o): f"v2-1-{o}" for o in range(5, 15)})


def test_delta_spark_optimize_between_a_replay_plan_and_its_commit_makes_it_plan_again(delta_spark, where: Where) -> None:
    table = _table(where)
    ranges = {"t": {"0": (5, 15)}}
    plan = ReplacePlan()
    plan_replace(table, "main", ranges, plan)
    _sql(delta_spark, where, "OPTIMIZE {t}")  # rewrites every file the plan removes

    with pytest.raises(JobError) as lost:
        commit_files(table, Txn(app_id=APP, version=4), [_file(where, _rows(0, 5, 15, tag="v2"))], SCHEMA,
                     removes=plan.remove["main"])
    assert lost.value.kind == "target_conflict"  # retried: the next attempt plans on the optimized table

    assert _replay(table, where, 4, ranges) is not None
    _sql(delta_spark, where, "OPTIMIZE {t}")  # and after the replay committed
    assert _spark_rows(delta_spark, where) == _expected(3, replayed={(0, o): f"v2-0-{o}" for o in range(5, 15)})


def test_every_feature_has_an_answer_for_every_operation() -> None:
    plain = TableFeatures(1, 2, frozenset(), frozenset({"appendOnly", "invariants"}), {}, {})
    assert plain.allowed() == dict.fromkeys(plain.allowed())  # a plain table: everything allowed
    unknown = TableFeatures(3, 7, frozenset({"someNewFeature"}), frozenset({"someNewFeature"}), {}, {})
    assert all("someNewFeature" in (why or "") for why in unknown.allowed().values())
    for feature, support in SUPPORT.items():
        assert support.allows == frozenset(plain.allowed()) or support.why, feature


def test_a_run_replays_a_partition_of_a_table_delta_spark_deleted_rows_from(sandbox_kafka, kafka_topic, produce_keyed,
                                                                              delta_spark, tmp_path: Path) -> None:
    """The job itself: a run, delta-spark's DELETE with deletion vectors, then a replace-mode replay of
    one partition through the warm engine: the replay is the overwrite, and the deleted rows outside
    it stay deleted."""
    from tests.spark_jobs.helpers import make_spec, run_job

    topic = kafka_topic(partitions=2)
    placed = produce_keyed(sandbox_kafka.bootstrap_servers, topic, 200)
    ranges = {topic: {str(p): (0, len(offsets)) for p, offsets in placed.items()}}
    uri = str(tmp_path / "events")
    spec = make_spec(sandbox_kafka.bootstrap_servers, ranges, {"type": "delta", "uri": uri})
    assert run_job(spec, tmp_path / "work").status == "succeeded"
    delta_spark.spark.sql(f"ALTER TABLE delta.`{uri}` SET TBLPROPERTIES ('delta.enableDeletionVectors'='true')")
    delta_spark.spark.sql(f"DELETE FROM delta.`{uri}` WHERE offset IN (3, 70)")
    replayed = {topic: {"0": (50, len(placed[0]))}}
    replay = make_spec(sandbox_kafka.bootstrap_servers, replayed, {"type": "delta", "uri": uri, "replace_ranges": replayed}, version=2,
                       pipeline_id=spec.pipeline_id)

    result = run_job(replay, tmp_path / "work")

    assert result.status == "succeeded", result.error
    assert result.rows_written == len(placed[0]) - 50
    rows = delta_spark.read(uri)
    found = Counter(zip(rows["partition"].to_pylist(), rows["offset"].to_pylist(), strict=True))
    deleted = {(p, o) for p in (0, 1) for o in (3, 70)} - {(0, 70)}  # (0, 70) is read again by the replay
    assert found == Counter({(p, o): 1 for p, offsets in placed.items() for o in offsets if (p, o) not in deleted})
    by_run = {(p, o): r for p, o, r in zip(rows["partition"].to_pylist(), rows["offset"].to_pylist(),
                                           rows["_inlet_run_id"].to_pylist(), strict=True)}
    assert {k for k, r in by_run.items() if r == replay.run_id} == {(0, o) for o in range(50, len(placed[0]))}
    assert _duckdb_rows(Where(Store({}), uri)) == found
    # On storage: the live files, and the files the replay removed (until a vacuum); not the run's own.
    delta = Table(Store({}), uri).delta()
    removed = {a["remove"]["path"] for a in commit_actions(Store({}), uri, delta.version()) if "remove" in a}
    live = {name.rsplit("/", 1)[-1] for name in delta.file_uris()}
    assert removed and {n for n in os.listdir(uri) if n.endswith(".parquet")} == live | removed


@pytest.mark.parametrize(("feature", "statements", "partition_by"), [
    ("clustering", ["ALTER TABLE {t} CLUSTER BY (partition)"], []),  # clustering and partitions exclude each other
    ("rowTracking", ["ALTER TABLE {t} SET TBLPROPERTIES ('delta.enableRowTracking'='true')"], ["partition"]),
    ("columnMapping", [COLUMN_MAPPING, "ALTER TABLE {t} RENAME COLUMN value TO payload"], []),
    ("checkConstraints", ["ALTER TABLE {t} ADD CONSTRAINT non_negative CHECK (offset >= 0)"], ["partition"]),
])
def test_runs_and_replays_of_a_table_only_delta_spark_writes_are_committed_by_delta_spark(
        sandbox_kafka, kafka_topic, produce_keyed, delta_spark, tmp_path: Path, feature: str, statements: list[str],
        partition_by: list[str]) -> None:
    """The job on the warm engine: a table delta-rs cannot write (liquid clustering, row tracking, a
    renamed column, a CHECK constraint delta-rs does not check Inlet's files against) gets the next
    run's rows and a replay through delta-spark, exactly once, and keeps its feature."""
    from tests.spark_jobs.helpers import make_spec, run_job

    topic = kafka_topic(partitions=2)
    placed = produce_keyed(sandbox_kafka.bootstrap_servers, topic, 120)
    half = {topic: {str(p): (0, len(offsets) // 2) for p, offsets in placed.items()}}
    rest = {topic: {str(p): (len(offsets) // 2, len(offsets)) for p, offsets in placed.items()}}
    uri = str(tmp_path / "events")
    target = {"type": "delta", "uri": uri, "partition_by": partition_by}
    first = make_spec(sandbox_kafka.bootstrap_servers, half, target)
    assert run_job(first, tmp_path / "work").status == "succeeded"
    for statement in statements:
        delta_spark.spark.sql(statement.format(t=f"delta.`{uri}`"))

    second = make_spec(sandbox_kafka.bootstrap_servers, rest, target, version=2,
                       pipeline_id=first.pipeline_id)
    ran = run_job(second, tmp_path / "work")
    assert ran.status == "succeeded", ran.error
    assert run_job(second, tmp_path / "work").already_committed  # the same txn again: nothing
    replayed = {topic: {"1": (10, len(placed[1]))}}
    replay = make_spec(sandbox_kafka.bootstrap_servers, replayed,
                       {**target, "replace_ranges": replayed}, version=3, pipeline_id=first.pipeline_id)
    again = run_job(replay, tmp_path / "work")

    assert again.status == "succeeded", again.error
    rows = delta_spark.read(uri)
    found = Counter(zip(rows["partition"].to_pylist(), rows["offset"].to_pylist(), strict=True))
    assert found == Counter({(p, o): 1 for p, offsets in placed.items() for o in offsets})
    runs = Counter(zip(rows["partition"].to_pylist(), rows["_inlet_run_id"].to_pylist(), strict=True))
    assert runs[(1, replay.run_id)] == len(placed[1]) - 10
    assert feature in TableFeatures.of(Table(Store({}), uri).delta()).features
    history = delta_spark.spark.sql(f"DESCRIBE HISTORY delta.`{uri}`").select("engineInfo", "operation").collect()
    assert [r.operation for r in history[:2]] == ["WRITE", "WRITE"] and "Delta-Lake" in history[0].engineInfo
    assert _stray_files(uri) == set(), "the run's own files stayed beside delta-spark's"


def _stray_files(uri: str) -> set[str]:
    """The files Inlet's tasks wrote (``part-<token>-<uuid>.parquet``) under the table's folder that no
    commit of it ever added. (delta-spark may leave files of its own that it did not commit, until its
    VACUUM: not Inlet's to count.)"""
    added = {unquote(a["add"]["path"]) for v in range(Table(Store({}), uri).delta().version() + 1)
             for a in commit_actions(Store({}), uri, v) if "add" in a}
    on_disk = {os.path.relpath(os.path.join(folder, n), uri) for folder, _, names in os.walk(uri)
               if "_delta_log" not in folder for n in names if re.fullmatch(r"part-[0-9a-f]{12}-[0-9a-f]{32}\.parquet", n)}
    return on_disk - added


def test_a_deletion_vector_that_appears_after_a_replay_planned_makes_it_plan_again(delta_spark, where: Where) -> None:
    table = _table(where)
    ranges = {"t": {"0": (5, 15)}}
    plan = ReplacePlan()
    plan_replace(table, "main", ranges, plan)  # no vector yet: files removed and rewritten
    assert plan.rewrite and not plan.overwrite
    _sql(delta_spark, where, "ALTER TABLE {t} SET TBLPROPERTIES ('delta.enableDeletionVectors'='true')",
         "DELETE FROM {t} WHERE offset = 2", "UPDATE {t} SET value = 'fixed' WHERE offset = 17")
    carried = [_file(where, rows) for f in plan.rewrite if (rows := carried_rows(table.store, f, ranges, SCHEMA)).num_rows]

    with pytest.raises(JobError) as lost:
        commit_files(table, Txn(app_id=APP, version=4), [*carried, _file(where, _rows(0, 5, 15, tag="v2"))], SCHEMA,
                     removes=plan.remove["main"])
    assert lost.value.kind == "target_conflict"  # retried: the next attempt plans on the table as it is now

    assert _replay(table, where, 4, ranges) is not None
    assert _spark_rows(delta_spark, where) == _expected(
        3, deleted={(0, 2), (1, 2)}, updated={(0, 17): "fixed", (1, 17): "fixed"},
        replayed={(0, o): f"v2-0-{o}" for o in range(5, 15)})


def test_a_replay_with_deletion_vectors_into_a_partitioned_table(delta_spark, tmp_path: Path) -> None:
    where = Where(Store({}), str(tmp_path / "table"))
    table = Table(where.store, where.uri, ("partition",))

    def file(rows: pa.Table) -> DataFile:
        partition = rows["partition"][0].as_py()
        folder = tmp_path / "table" / f"partition={partition}"
        folder.mkdir(parents=True, exist_ok=True)
        name = f"partition={partition}/part-{uuid.uuid4().hex}.parquet"
        pq.write_table(rows.drop_columns(["partition"]), str(tmp_path / "table" / name))
        return DataFile("main", name, os.path.getsize(tmp_path / "table" / name), {"partition": str(partition)},
                        rows.num_rows, compaction._stats(rows.drop_columns(["partition"])))

    for seq in (1, 2):
        commit_files(table, Txn(app_id=APP, version=seq), [file(_rows(p, (seq - 1) * 10, seq * 10)) for p in (0, 1)], SCHEMA)
    _sql(delta_spark, where, "ALTER TABLE {t} SET TBLPROPERTIES ('delta.enableDeletionVectors'='true')",
         "DELETE FROM {t} WHERE offset IN (3, 12)")
    ranges = {"t": {"1": (10, 20)}}
    plan = ReplacePlan()
    plan_replace(table, "main", ranges, plan)
    assert plan.overwrite == {"main"}

    version = overwrite_ranges(table, Txn(app_id=APP, version=3), [file(_rows(1, 10, 20, tag="v2"))], SCHEMA, ranges)
    assert version is not None and version == table.delta().version()

    assert _spark_rows(delta_spark, where) == _expected(2, deleted={(0, 3), (1, 3), (0, 12)},
                                                        replayed={(1, o): f"v2-1-{o}" for o in range(10, 20)})
    assert table.delta().metadata().partition_columns == ["partition"]


@pytest.mark.parametrize(("value", "kind", "typed"), [
    ("2024-01-02 03:04:05.000006", pa.timestamp("us", tz="UTC"), datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=UTC)),
    ("2024-01-02 03:04:05.000000", pa.timestamp("us"), datetime(2024, 1, 2, 3, 4, 5)),
    ("2024-01-02", pa.date32(), date(2024, 1, 2)), ("true", pa.bool_(), True), ("7", pa.int32(), 7),
    ("007", pa.string(), "007"), (None, pa.int64(), None),
])
def test_a_partition_value_as_the_log_spells_it_is_read_back_typed(value: str | None, kind: pa.DataType, typed: object) -> None:
    assert partition_column(value, kind, 2).to_pylist() == [typed, typed]


def test_who_writes_a_table_with_features_delta_rs_cannot_write() -> None:
    clustered = TableFeatures(1, 7, frozenset(), frozenset({"domainMetadata", "clustering", "appendOnly", "invariants"}),
                              {}, {"id": {}})
    assert clustered.writer("append", spark=True) == ("delta-spark", None)
    assert clustered.writer("replace", spark=True) == ("delta-spark", None)
    for operation in ("compact", "vacuum", "checkpoint", "properties"):  # spark_jobs.spark_maintenance
        assert clustered.writer(operation, spark=True) == ("delta-spark", None), operation
    for operation in ("merge", "compact", "vacuum", "append"):
        writer, why = clustered.writer(operation, spark=operation == "merge")
        assert writer is None and why is not None and "clustering" in why, operation
    plain = TableFeatures(1, 2, frozenset(), frozenset({"appendOnly", "invariants"}), {}, {})
    assert plain.writer("append", spark=True) == ("delta-rs", None)
    generated = TableFeatures(1, 7, frozenset(), clustered.writer_features,
                              {}, {"day": {"delta.generationExpression": "CAST(ts AS DATE)"}})
    assert generated.writer("append", spark=True)[0] is None  # delta-spark would compute it: untested, so refused
    append_only = TableFeatures(1, 7, frozenset(), clustered.writer_features, {"delta.appendOnly": "true"}, {})
    assert append_only.writer("append", spark=True)[0] == "delta-spark"
    assert append_only.writer("replace", spark=True)[0] is None
    uniform = TableFeatures(2, 7, frozenset({"columnMapping"}), frozenset({"icebergCompatV2", "columnMapping"}), {}, {})
    assert uniform.writer("append", spark=True)[0] is None
