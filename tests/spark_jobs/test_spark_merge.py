"""A keyed table's MERGE by delta-spark on the run's Spark (``delta_tables.spark_merge``) against the
driver's by delta-rs (``commit.merge_changes``, ``history.merge_history``): the same batches into two
copies of one table give the same rows, the same counts and the same txn, for SCD type 1 (deletes
marked or soft) and type 2; a retried txn writes nothing; a new column arrives first.
Which tables go to Spark, and how delta-spark's failures reach the commit's retry. The end-to-end run,
through the warm engine and Kafka, is ``test_keyed_tables``' delta-spark case."""

from __future__ import annotations

import datetime as dt
import random
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from deltalake import DeltaTable

from spark_jobs.columns import DELETED, RUN_ID, SEQUENCE
from spark_jobs.delta_tables import Table, spark_merge
from spark_jobs.delta_tables.changes import ChangeReader
from spark_jobs.delta_tables.commit import merge_changes
from spark_jobs.delta_tables.history import merge_history
from spark_jobs.spec import Txn
from spark_jobs.storage import Store
from tests.fixtures.debezium import ROWS
from tests.spark_jobs.test_keyed_changes import AT, SoftChange, _soft_reference, _soft_rows, _soft_run
from tests.spark_jobs.test_keyed_history import _changes as history_changes
from tests.spark_jobs.test_keyed_history import _delta_rows as history_rows
from tests.spark_jobs.test_keyed_history import _reference as history_reference

pytestmark = pytest.mark.slow


def _changes(ids: range | list[int], sequence: int | list[int], run: str, *, deleted: set[int] = frozenset(),
             note: bool = False) -> pa.Table:
    ids = list(ids)
    sequences = sequence if isinstance(sequence, list) else [sequence] * len(ids)
    columns = {"id": pa.array(ids, pa.int64()),
               "name": pa.array([None if i in deleted else f"{run}-{i}" for i in ids], pa.string()),
               "amount": pa.array([None if i in deleted else i * 0.5 for i in ids], pa.float64()),
               # Times with a zone and without one (a local time stays zone-less through Spark).
               "at": pa.array([dt.datetime(2026, 3, 29, 1, 30, tzinfo=dt.UTC) + dt.timedelta(minutes=i) for i in ids],
                              pa.timestamp("us", "UTC")),
               "local": pa.array([dt.datetime(2026, 3, 29, 2, 30) + dt.timedelta(seconds=i) for i in ids], pa.timestamp("us")),
               SEQUENCE: pa.array(sequences, pa.int64()), DELETED: pa.array([i in deleted for i in ids], pa.bool_()),
               RUN_ID: pa.array([run] * len(ids), pa.string())}
    if note:
        columns["note"] = pa.array([f"n{i}" for i in ids])
    return pa.table(columns)


def _merged_by(uri: str, after: int = -1) -> set[str]:
    """Which writer made the table's MERGE commits after version ``after``: delta-spark's say so in ``engineInfo``."""
    return {"delta-spark" if "Delta-Lake/" in r.get("engineInfo", "") else "delta-rs"
            for r in DeltaTable(uri).history() if r["operation"] == "MERGE" and r["version"] > after}


def _rows(uri: str) -> list[tuple]:
    table = DeltaTable(uri).to_pyarrow_table()
    return sorted(tuple(row.values()) for row in table.select(sorted(table.column_names)).to_pylist())


def test_delta_spark_merges_every_batch_as_delta_rs_does(delta_spark, tmp_path: Path) -> None:
    spark = delta_spark.spark
    seeded = str(tmp_path / "seed")
    assert merge_changes(Table(Store(), seeded), Txn(app_id="p", version=1), _changes(range(300), 5, "r1"), ["id"])
    by_rs, by_spark = str(tmp_path / "rs"), str(tmp_path / "spark")
    shutil.copytree(seeded, by_rs)
    shutil.copytree(seeded, by_spark)
    rng = np.random.default_rng(7)
    batches = [
        # Updates, some older than the row (set nothing), new keys, and deletes kept as flagged rows.
        _changes([*range(150), *range(300, 360)], [int(s) for s in rng.choice([3, 9], 210)], "r2",
                 deleted={10, 20, 30, 310}),
        # A new column: added to the table before the MERGE; rows it does not reach get nulls.
        _changes(range(100, 400, 3), 12, "r3", note=True),
        _changes([], 13, "r4"),  # no change: the txn alone
    ]
    for version, batch in enumerate(batches, start=2):
        txn = Txn(app_id="p", version=version)
        rs = merge_changes(Table(Store(), by_rs), txn, batch, ["id"])
        sp = spark_merge.merge_changes_on_spark(spark, Table(Store(), by_spark), txn, batch, ["id"])
        assert rs is not None and sp is not None
        assert sp.rows == rs.rows and sp.version == DeltaTable(by_spark).version()
        assert (sp.files > 0) == (rs.files > 0) and (sp.bytes > 0) == (rs.bytes > 0)
        assert _rows(by_spark) == _rows(by_rs)
        assert DeltaTable(by_spark).transaction_version("p") == version
    assert _merged_by(by_spark, after=1) == {"delta-spark"}  # after the seed
    assert any(name == "note" for name in DeltaTable(by_spark).schema().to_arrow().names)
    ids = DeltaTable(by_spark).to_pyarrow_table()["id"].to_pylist()
    assert sorted(ids) == sorted({*range(300), *(i for b in batches for i in b["id"].to_pylist())})  # every key once
    delta_spark.assert_reads_alike(by_spark, DeltaTable(by_spark).to_pyarrow_table())

    at = DeltaTable(by_spark).version()  # a retried run: its txn is in the table
    assert spark_merge.merge_changes_on_spark(spark, Table(Store(), by_spark), Txn(app_id="p", version=3),
                                              batches[1], ["id"]) is None
    assert DeltaTable(by_spark).version() == at


def test_an_attempt_that_finds_its_txn_committed_meanwhile_writes_nothing_and_says_so(
        delta_spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another attempt of the run commits the txn after this one read the table: delta-spark's
    idempotent-DML settings skip this MERGE, and the merge returns None (the run already committed),
    not the other attempt's commit as its own."""
    table, txn = Table(Store(), str(tmp_path / "t")), Txn(app_id="p", version=2)
    merge_changes(table, Txn(app_id="p", version=1), _changes(range(100), 1, "r1"), ["id"])
    batch = _changes(range(50, 150), 2, "r2")
    execute = spark_merge.SparkMerge.execute

    def after_the_other_attempt(self: spark_merge.SparkMerge) -> dict:
        assert merge_changes(table, txn, batch, ["id"]) is not None  # the other attempt, by delta-rs
        return execute(self)

    monkeypatch.setattr(spark_merge.SparkMerge, "execute", after_the_other_attempt)
    theirs = DeltaTable(table.uri).version() + 1
    assert spark_merge.merge_changes_on_spark(delta_spark.spark, table, txn, batch, ["id"]) is None
    assert DeltaTable(table.uri).version() == theirs  # no commit of this attempt's
    assert _merged_by(table.uri) == {"delta-rs"}


def test_soft_deletes_land_alike_by_delta_spark_and_by_delta_rs(delta_spark, tmp_path: Path) -> None:
    """A soft-deleting table's clauses (``commit.soft_clauses``, given to delta-spark by ``SparkClauses``)
    over runs that arrive out of order, then a late update to a deleted key and the key's return."""
    spark = delta_spark.spark
    reader = ChangeReader(ROWS, ["id"], "source.lsn", True, "UTC", soft_deletes=True)
    by_rs, by_spark = Table(Store(), str(tmp_path / "rs")), Table(Store(), str(tmp_path / "spark"))
    rng = random.Random(29)
    stream: list[SoftChange] = [(rng.randrange(12), None if rng.random() < 0.3 else f"n{lsn}", lsn, rng.randrange(3))
                                for lsn in range(1, 121)]
    rng.shuffle(stream)
    runs = [[stream[i:i + 40]] for i in range(0, len(stream), 40)]
    runs += [[[(90, "first", 400, 0)]], [[(90, None, 402, 0)]], [[(90, "late", 401, 0)]], [[(90, "back", 403, 0)]]]
    for version, tasks in enumerate(runs, start=1):
        changes, txn = _soft_run(reader, tasks), Txn(app_id="a", version=version)
        rs = merge_changes(by_rs, txn, changes, reader.key, soft_deletes=True)
        sp = spark_merge.merge_changes_on_spark(spark, by_spark, txn, changes, reader.key, soft_deletes=True)
        assert rs is not None and sp is not None and sp.rows == rs.rows, version
        assert _soft_rows(by_spark.uri) == _soft_rows(by_rs.uri), version
        if version == len(runs) - 1:  # the late update reached the deleted row
            assert _soft_rows(by_spark.uri)[90] == ("late", 402, True, AT + dt.timedelta(seconds=402))
    assert _soft_rows(by_spark.uri) == {**_soft_reference(stream), 90: ("back", 403, False, None)}
    assert _merged_by(by_spark.uri) == {"delta-spark"}


def test_a_history_table_lands_alike_by_delta_spark_and_by_delta_rs(delta_spark, tmp_path: Path) -> None:
    """SCD type 2 (``history.merge_history``): the driver stages the versions to insert and those they
    close; delta-spark's MERGE of them (``history_clauses`` behind ``SparkClauses``) sets delta-rs's
    rows, counts and txn, over runs out of order, deletes, a late change, a replay and a retried run."""
    spark = delta_spark.spark
    reader = ChangeReader(ROWS, ["id"], "source.lsn", True, "UTC")
    by_rs, by_spark = Table(Store(), str(tmp_path / "rs")), Table(Store(), str(tmp_path / "spark"))
    rng = random.Random(5)
    stream = [(rng.randrange(20), None if rng.random() < 0.2 else f"n{lsn}", lsn) for lsn in range(1, 241)]
    rng.shuffle(stream)  # sequences arrive out of order across runs and within them
    runs = [stream[i:i + 60] for i in range(0, len(stream), 60)] + [[(3, "late", 0)], stream[:90]]  # a replay last
    for version, run in enumerate(runs, start=1):
        changes, txn = history_changes(reader, run), Txn(app_id="h", version=version)
        rs = merge_history(by_rs, txn, changes, reader.key)
        sp = merge_history(by_spark, txn, changes, reader.key, spark=spark)
        assert rs is not None and sp is not None and sp.rows == rs.rows, version
        assert history_rows(by_spark.uri) == history_rows(by_rs.uri), version
        assert DeltaTable(by_spark.uri).transaction_version("h") == version
    assert history_rows(by_spark.uri) == history_reference([*stream, (3, "late", 0)])
    assert _merged_by(by_spark.uri) == {"delta-spark"}
    delta_spark.assert_reads_alike(by_spark.uri, DeltaTable(by_spark.uri).to_pyarrow_table())
    at = DeltaTable(by_spark.uri).version()
    assert merge_history(by_spark, Txn(app_id="h", version=2), history_changes(reader, runs[1]), reader.key,
                         spark=spark) is None  # a retried run: its txn is in the table
    assert DeltaTable(by_spark.uri).version() == at


def test_string_keys_with_quotes_are_matched_and_bounded_as_values(delta_spark, tmp_path: Path) -> None:
    """The condition is built of columns, not SQL text: a key holding quotes, backslashes or SQL matches itself."""
    uri = str(tmp_path / "t")
    keys = ["o'brien", 'say "hi"', "back\\slash", "x' OR '1'='1", "plain"]
    def changes(sequence: int, run: str) -> pa.Table:
        return pa.table({"k": pa.array(keys), "v": pa.array([f"{run}:{k}" for k in keys]),
                         SEQUENCE: pa.array([sequence] * len(keys), pa.int64()), DELETED: pa.array([False] * len(keys)),
                         RUN_ID: pa.array([run] * len(keys))})
    for version, run in enumerate(["a", "b"], start=1):
        assert spark_merge.merge_changes_on_spark(delta_spark.spark, Table(Store(), uri), Txn(app_id="q", version=version),
                                                  changes(version, run), ["k"]) is not None
    table = DeltaTable(uri).to_pyarrow_table()
    assert sorted(zip(table["k"].to_pylist(), table["v"].to_pylist(), strict=True)) == sorted((k, f"b:{k}") for k in keys)


def test_which_tables_are_merged_on_spark(delta_spark, tmp_path: Path) -> None:
    """Whether the route is open (``merges_on_spark``), then each attempt's engine by the table's size as it reads it."""
    uri, delta = str(tmp_path / "t"), spark_merge.DELTA_EXTENSION

    def may(at: str, extensions: str | None = delta) -> bool:
        return spark_merge.merges_on_spark(Table(Store(), at), extensions)

    assert may(uri) and may(f"file://{uri}") and may(uri, f"other.Extension,{delta}")
    # A Spark without delta-spark (no jars cached when the worker started it): the driver merges.
    assert not may(uri, None) and not may(uri, "other.Extension")
    # An object store: Inlet gives Spark no connector, so the driver merges (nothing is reached to decide).
    assert not may("s3://bucket/t")

    def merged_by(version: int, least: int) -> set[str]:
        at = DeltaTable(uri).version() if DeltaTable.is_deltatable(uri) else -1
        spark_merge.merge_changes_on_spark(delta_spark.spark, Table(Store(), uri), Txn(app_id="p", version=version),
                                           _changes(range(version * 100, version * 100 + 200), version, "r"), ["id"],
                                           least_bytes=least)
        return _merged_by(uri, after=at)

    def size() -> int:
        return sum(a["size_bytes"] for a in pa.table(DeltaTable(uri).get_add_actions(flatten=True)).to_pylist())

    assert merged_by(1, 1) == {"delta-rs"}  # a new table holds nothing: under any line above 0
    assert merged_by(2, size() + 1) == {"delta-rs"}
    assert merged_by(3, size()) == {"delta-spark"}
    shutil.rmtree(uri)
    assert merged_by(1, 0) == {"delta-spark"}  # a new table, a line of 0


def test_delta_sparks_lost_races_are_retried_and_other_failures_fail_the_commit() -> None:
    from delta.exceptions import ConcurrentAppendException, MetadataChangedException
    from deltalake.exceptions import CommitFailedError, DeltaError

    lost = spark_merge._as_delta_error(ConcurrentAppendException(message="Files were added to the table\nby a concurrent update"))
    assert isinstance(lost, CommitFailedError) and "Files were added to the table" in str(lost)
    changed = spark_merge._as_delta_error(MetadataChangedException(message="The metadata of the Delta table has been changed"))
    assert isinstance(changed, CommitFailedError)  # a new column's commit meanwhile: merged again, as with delta-rs
    failed = spark_merge._as_delta_error(RuntimeError("[DELTA_MISSING_COLUMN] no such column\n\tat org.apache..."))
    assert isinstance(failed, DeltaError) and not isinstance(failed, CommitFailedError)
    assert str(failed) == "delta-spark: [DELTA_MISSING_COLUMN] no such column"
