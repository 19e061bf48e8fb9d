"""An SCD type 2 keyed table without Spark or Kafka (``delta_tables.history``): runs of changes merged
into a real local Delta table match, row for row, a reference history computed here from every change
(sorted by sequence per key, each version closed by the next); read back with delta-rs and DuckDB's
delta extension. Several changes of a key in one run and across runs, sequences out of order across
runs, deletes, a retried run (its txn in the table) and replays of older changes."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from pyspark.sql.types import LongType, StringType, StructField, StructType

from spark_jobs.columns import SEQUENCE
from spark_jobs.delta_tables import Table
from spark_jobs.delta_tables.changes import HIDDEN, ChangeReader, latest
from spark_jobs.delta_tables.commit import key_ranges, merge_changes
from spark_jobs.delta_tables.history import files_in_ranges, merge_history
from spark_jobs.errors import JobError
from spark_jobs.spec import Txn
from spark_jobs.storage import Store
from tests.fixtures.debezium import QUARANTINE, ROWS, envelope, record_batch
from tests.spark_jobs.helpers import duckdb_connection

APP = "inlet-pipeline-h"
Change = tuple[int, str | None, int]  # (id, name or None for a delete, lsn)
# (id, name, valid_from, valid_to, current, deleted)
Version = tuple[int, str | None, int, int | None, bool, bool]


def _changes(reader: ChangeReader, run: list[Change]) -> pa.Table:
    """A run's changes as the job merges them: one per key and sequence."""
    values: list[bytes | None] = [
        envelope("d", {"id": i}, None, lsn) if name is None else envelope("u", None, {"id": i, "name": name}, lsn)
        for i, name, lsn in run]
    changes, quarantine, _ = reader.read(record_batch(values), "run", QUARANTINE)
    assert quarantine.num_rows == 0
    return latest(changes, (*reader.key, SEQUENCE)).drop_columns(list(HIDDEN))


def _reference(applied: list[Change]) -> list[Version]:
    """Every change applied so far, per key by sequence (the first of a key and sequence kept), each
    valid to the key's next change; current: the last, unless it is a delete."""
    first: dict[tuple[int, int], str | None] = {}
    for i, name, lsn in applied:
        first.setdefault((i, lsn), name)
    history: list[Version] = []
    ordered = sorted(first)
    for n, (i, lsn) in enumerate(ordered):
        following = ordered[n + 1][1] if n + 1 < len(ordered) and ordered[n + 1][0] == i else None
        name = first[(i, lsn)]
        history.append((i, name, lsn, following, following is None and name is not None, name is None))
    return history


def _delta_rows(uri: str) -> list[Version]:
    rows = DeltaTable(uri).to_pyarrow_table().to_pylist()
    return sorted(((r["id"], r["name"], r["_inlet_valid_from"], r["_inlet_valid_to"], r["_inlet_current"],
                    r["_inlet_deleted"]) for r in rows), key=_by_key_and_sequence)


def _duckdb_rows(uri: str) -> list[Version]:
    return sorted(duckdb_connection().execute(
        "SELECT id, name, _inlet_valid_from, _inlet_valid_to, _inlet_current, _inlet_deleted "
        f"FROM delta_scan('{uri}')").fetchall(), key=_by_key_and_sequence)


def _by_key_and_sequence(version: Version) -> tuple[int, int]:
    return version[0], version[2]


def test_runs_of_changes_in_any_order_land_as_the_reference_history(tmp_path: Path) -> None:
    reader = ChangeReader(ROWS, ["id"], "source.lsn", True, "UTC")
    table = Table(Store(), str(tmp_path / "customers"))
    rng = random.Random(2)
    stream: list[Change] = [(rng.randrange(25), None if rng.random() < 0.2 else f"n{lsn}", lsn) for lsn in range(1, 500)]
    rng.shuffle(stream)  # sequences arrive out of order across runs, and within them
    applied: list[Change] = []
    runs = [stream[i:i + 61] for i in range(0, len(stream), 61)]
    for version, run in enumerate(runs, start=1):
        txn = Txn(app_id=APP, version=version)
        merged = merge_history(table, txn, _changes(reader, run), reader.key)
        assert merged is not None and merged.rows == len(run)  # every change a new version (closes not counted)
        applied += run
        assert _delta_rows(table.uri) == _reference(applied)
        before = DeltaTable(table.uri).version()
        # A retried run: its txn is in the table, it merges nothing.
        assert merge_history(table, txn, _changes(reader, run), reader.key) is None
        assert DeltaTable(table.uri).version() == before
    expected = _reference(stream)
    assert len(expected) == len(stream)  # every change a row, several per key and per run
    assert _delta_rows(table.uri) == expected
    assert _duckdb_rows(table.uri) == expected

    # A replay of every change (any order, a new txn) adds nothing and reopens nothing: only the txn commits.
    replay = list(stream)
    rng.shuffle(replay)
    before = DeltaTable(table.uri).version()
    assert merge_history(table, Txn(app_id=APP, version=100), _changes(reader, replay[:200]), reader.key) == (before + 1, 0, 0, 0)
    assert merge_history(table, Txn(app_id=APP, version=101), _changes(reader, replay[200:]), reader.key) == (before + 2, 0, 0, 0)
    assert _delta_rows(table.uri) == expected
    assert _duckdb_rows(table.uri) == expected
    assert DeltaTable(table.uri).transaction_version(APP) == 101
    # One current row per key that is not deleted, and the current rows are SCD type 1's table.
    current = duckdb_connection().execute(
        f"SELECT id, name FROM delta_scan('{table.uri}') WHERE _inlet_current ORDER BY id").fetchall()
    latest_of: dict[int, tuple[int, str | None]] = {}
    for i, name, lsn in stream:
        if i not in latest_of or latest_of[i][0] < lsn:
            latest_of[i] = (lsn, name)
    assert current == sorted((i, name) for i, (_, name) in latest_of.items() if name is not None)


def test_a_key_s_versions_in_one_run_a_late_change_and_a_delete(tmp_path: Path) -> None:
    reader = ChangeReader(ROWS, ["id"], "source.lsn", True, "UTC")
    table = Table(Store(), str(tmp_path / "t"))
    # Three versions of key 1 in one run, out of order; key 2 once.
    assert merge_history(table, Txn(app_id=APP, version=1),
                         _changes(reader, [(1, "c", 30), (1, "a", 10), (2, "x", 5), (1, "b", 20)]), reader.key)
    assert _delta_rows(table.uri) == [(1, "a", 10, 20, False, False), (1, "b", 20, 30, False, False),
                                      (1, "c", 30, None, True, False), (2, "x", 5, None, True, False)]
    # A late change slots in between (b's version now ends at 25), a delete closes key 2's current row.
    assert merge_history(table, Txn(app_id=APP, version=2), _changes(reader, [(1, "late", 25), (2, None, 6)]), reader.key)
    assert _delta_rows(table.uri) == [(1, "a", 10, 20, False, False), (1, "b", 20, 25, False, False),
                                      (1, "late", 25, 30, False, False), (1, "c", 30, None, True, False),
                                      (2, "x", 5, 6, False, False), (2, None, 6, None, False, True)]
    # An insert after the delete opens a new current version; an older insert replayed reopens nothing.
    assert merge_history(table, Txn(app_id=APP, version=3), _changes(reader, [(2, "y", 9), (2, "x", 5)]), reader.key)
    assert _delta_rows(table.uri)[4:] == [(2, "x", 5, 6, False, False), (2, None, 6, 9, False, True),
                                          (2, "y", 9, None, True, False)]
    assert _duckdb_rows(table.uri) == _delta_rows(table.uri)


def test_a_run_without_changes_commits_its_txn_and_tables_of_the_other_type_are_refused(tmp_path: Path) -> None:
    reader = ChangeReader(ROWS, ["id"], None, False, "UTC")
    history, latest_only = Table(Store(), str(tmp_path / "h")), Table(Store(), str(tmp_path / "l"))
    assert merge_history(history, Txn(app_id="a", version=1), reader.schema.empty_table(), reader.key) == (1, 0, 0, 0)
    assert DeltaTable(history.uri).transaction_version("a") == 1
    assert DeltaTable(history.uri).schema().to_arrow().names == [
        "id", "name", "at", "_inlet_valid_from", "_inlet_valid_to", "_inlet_current", "_inlet_deleted", "_inlet_run_id"]
    assert merge_changes(latest_only, Txn(app_id="a", version=1), reader.schema.empty_table(), reader.key)
    with pytest.raises(JobError, match=r"holds the latest change per key \(mode upsert\), not every version") as refused:
        merge_history(latest_only, Txn(app_id="a", version=2), reader.schema.empty_table(), reader.key)
    assert refused.value.kind == "invalid_spec"
    with pytest.raises(JobError, match=r"holds every version of a key \(mode upsert, scd_type 2\), not the latest") as refused:
        merge_changes(history, Txn(app_id="a", version=2), reader.schema.empty_table(), reader.key)
    assert refused.value.kind == "invalid_spec"


def test_a_mixed_case_composite_key_with_a_nested_column_keeps_its_versions(tmp_path: Path) -> None:
    rows = StructType([StructField("Region", StringType()), StructField("customerId", LongType()),
                       StructField("address", StructType([StructField("city", StringType())]))])
    reader = ChangeReader(rows, ["Region", "customerId"], None, False, "UTC")
    table = Table(Store(), str(tmp_path / "t"))
    first, _, _ = reader.read(record_batch([b'{"Region": "eu", "customerId": 1, "address": {"city": "Oslo"}}',
                                            b'{"Region": "us", "customerId": 1, "address": {"city": "Reno"}}',
                                            b'{"Region": "eu", "customerId": 1, "address": {"city": "Bergen"}}']),
                              "r1", QUARANTINE)
    assert merge_history(table, Txn(app_id="a", version=1), latest(first, (*reader.key, SEQUENCE)).drop_columns(list(HIDDEN)),
                         reader.key)
    tombstone, _, _ = reader.read(record_batch([None], keys=[b'{"Region": "eu", "customerId": 1}'], offsets=[7]), "r2",
                                  QUARANTINE)
    assert merge_history(table, Txn(app_id="a", version=2), tombstone.drop_columns(list(HIDDEN)), reader.key)
    got = sorted(((r["Region"], r["address"], r["_inlet_valid_from"], r["_inlet_valid_to"], r["_inlet_current"])
                  for r in DeltaTable(table.uri).to_pyarrow_table().to_pylist()), key=lambda v: (v[0], v[2]))
    assert got == [("eu", {"city": "Oslo"}, 0, 2, False), ("eu", {"city": "Bergen"}, 2, 7, False),
                   ("eu", None, 7, None, False), ("us", {"city": "Reno"}, 1, None, True)]


def test_a_new_schema_field_becomes_a_column_and_closing_rows_keep_their_values(tmp_path: Path) -> None:
    table = Table(Store(), str(tmp_path / "t"))
    narrow = ChangeReader(StructType([StructField("id", LongType()), StructField("name", StringType())]), ["id"], None,
                          False, "UTC")
    first, _, _ = narrow.read(record_batch([b'{"id": 1, "name": "a"}']), "r1", QUARANTINE)
    assert merge_history(table, Txn(app_id="a", version=1), first.drop_columns(list(HIDDEN)), narrow.key)
    wide = ChangeReader(StructType([*narrow.values.schema.fields, StructField("tier", LongType())]), ["id"], None,
                        False, "UTC")
    second, _, _ = wide.read(record_batch([b'{"id": 1, "name": "b", "tier": 3}'], offsets=[5]), "r2", QUARANTINE)
    assert merge_history(table, Txn(app_id="a", version=2), second.drop_columns(list(HIDDEN)), wide.key)
    rows = DeltaTable(table.uri).to_pyarrow_table().sort_by("_inlet_valid_from").to_pylist()
    assert [(r["name"], r["tier"], r["_inlet_valid_from"], r["_inlet_valid_to"], r["_inlet_current"], r["_inlet_run_id"])
            for r in rows] == [("a", None, 0, 5, False, "r1"), ("b", 3, 5, None, True, "r2")]
    with pytest.raises(JobError, match=r"clash with Inlet's columns \(_inlet_"):
        ChangeReader(StructType([StructField("id", LongType()), StructField("_inlet_current", StringType())]), ["id"],
                     None, False, "UTC")


def test_a_string_keyed_history_reads_and_rewrites_only_the_files_that_can_hold_its_keys(tmp_path: Path) -> None:
    # Keys past delta-rs's 64 characters of statistics (a truncated min, a max raised to a bound), a
    # quote, and files the MERGEs wrote (string views, which pyarrow's filters cannot compare).
    reader = ChangeReader(ROWS, ["name"], None, False, "UTC")
    table = Table(Store(), str(tmp_path / "t"))
    long = "p" * 70
    offset = 0

    def changes(names: list[str]) -> pa.Table:
        nonlocal offset
        values = [json.dumps({"name": n, "id": offset + i}).encode() for i, n in enumerate(names)]
        read, quarantine, _ = reader.read(record_batch(values, offsets=list(range(offset, offset + len(names)))),
                                          "run", QUARANTINE)
        assert quarantine.num_rows == 0
        offset += len(names)
        return latest(read, (*reader.key, SEQUENCE)).drop_columns(list(HIDDEN))

    for version, names in enumerate([[f"{long}{c}" for c in "aceg"], ["q'Brien", "quote's end"], ["zz", "zz\u00e9"]], 1):
        assert merge_history(table, Txn(app_id="a", version=version), changes(names), reader.key)  # a file each
        if version == 1:
            first_file = {f.path for f in DeltaTable(table.uri).to_pyarrow_dataset().get_fragments()}
    before = set(DeltaTable(table.uri).file_uris())

    batch = changes([f"{long}c", f"{long}d"])  # a key of the first file changed, and a new key beside it
    read = files_in_ranges(DeltaTable(table.uri), key_ranges(batch, reader.key))
    assert {f.path for f in read.get_fragments()} == first_file
    assert merge_history(table, Txn(app_id="a", version=4), batch, reader.key)

    after = set(DeltaTable(table.uri).file_uris())
    assert len(before - after) == 1 and len(after) == 3  # the first file rewritten, the two others left alone
    rows = {(r["name"], r["_inlet_valid_from"]): (r["_inlet_valid_to"], r["_inlet_current"])
            for r in DeltaTable(table.uri).to_pyarrow_table().to_pylist()}
    assert len(rows) == 10
    assert rows[(f"{long}c", 1)] == (8, False) and rows[(f"{long}c", 8)] == (None, True)
    assert rows[(f"{long}d", 9)] == (None, True) and rows[("q'Brien", 4)] == (None, True)
