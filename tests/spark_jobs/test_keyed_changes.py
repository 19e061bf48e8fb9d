"""A keyed table's changes without Spark or Kafka: records read as changes (``delta_tables.changes``),
the latest per key, and the MERGE (``delta_tables.commit.merge_changes``) against a reference that
applies the same changes one by one, including retries and replays of older changes."""

from __future__ import annotations

import datetime as dt
import json
import random
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from pyspark.sql.types import LongType, StringType, StructField, StructType

from spark_jobs.delta_tables import Table
from spark_jobs.delta_tables.changes import HIDDEN, ChangeReader, latest, unhidden
from spark_jobs.delta_tables.commit import key_bounds, merge_changes
from spark_jobs.errors import JobError
from spark_jobs.spec import Txn
from spark_jobs.storage import Store
from tests.fixtures.debezium import QUARANTINE, ROWS, envelope, record_batch


def _reasons(quarantine: pa.Table) -> dict[int, str]:
    return dict(zip(quarantine["offset"].to_pylist(), quarantine["_inlet_quarantine_reason"].to_pylist(), strict=True))


def _rows(changes: pa.Table) -> list[tuple]:
    return [(r["id"], r["name"], r["_inlet_sequence"], r["_inlet_deleted"]) for r in changes.to_pylist()]


def test_debezium_envelopes_with_and_without_the_wrapper_become_changes() -> None:
    reader = ChangeReader(ROWS, ["id"], "source.lsn", True, "UTC")
    batch = record_batch([
        envelope("c", None, {"id": 1, "name": "a"}, 10),
        envelope("u", {"id": 1, "name": "a"}, {"id": 1, "name": "b"}, 20, wrapped=True),
        envelope("d", {"id": 1, "name": "b"}, None, 30),
        None,  # Debezium's tombstone after the delete: skipped
        envelope("r", None, {"id": 2, "name": "snap"}, 5, wrapped=True),
        envelope("t", None, None, 40),
        b"{not json",
        envelope("c", None, {"id": 3, "name": "x"}, None),
        envelope("c", None, {"name": "no id"}, 50),
        envelope("d", None, None, 60),
    ])
    changes, quarantine, skipped = reader.read(batch, "run-1", QUARANTINE)

    assert skipped == 1
    assert changes.column_names == ["id", "name", "at", "_inlet_sequence", "_inlet_deleted", "_inlet_run_id", *HIDDEN]
    # A delete keeps only its key columns.
    assert _rows(changes) == [(1, "a", 10, False), (1, "b", 20, False), (1, None, 30, True), (2, "snap", 5, False)]
    assert _reasons(quarantine) == {
        5: "op 't' is not applied to a keyed table",
        6: "value is not JSON of the pipeline's schema",
        7: "sequence_by source.lsn is null",
        8: "key column id is null",
        9: "op 'd' without its before image",
    }
    assert sorted(_rows(latest(changes, reader.key)), key=lambda r: r[0]) == [(1, None, 30, True), (2, "snap", 5, False)]


def test_rows_take_the_offset_as_sequence_and_a_tombstone_deletes_the_key_its_kafka_key_names() -> None:
    reader = ChangeReader(ROWS, ["id"], None, False, "UTC")
    batch = record_batch(
        [b'{"id": 5, "name": "q", "at": "2026-11-26T10:00:00Z"}', None, None, b'{"name": "no id"}', None],
        keys=[b"whatever", b'{"id": 5}', b'{"schema": {}, "payload": {"id": 6}}', b"k", b"not json"],
        offsets=[40, 41, 42, 43, 44])
    changes, quarantine, skipped = reader.read(batch, "run-1", QUARANTINE)

    assert skipped == 0
    assert _rows(changes) == [(5, "q", 40, False), (5, None, 41, True), (6, None, 42, True)]
    assert _reasons(quarantine) == {43: "key column id is null",
                                    44: "a tombstone whose key is not a JSON object of the key columns"}


def test_a_value_field_orders_changes_and_a_tombstone_without_it_goes_to_quarantine() -> None:
    reader = ChangeReader(ROWS, ["id"], "at", False, "UTC")
    batch = record_batch([b'{"id": 1, "name": "late", "at": "2026-11-26T10:00:01Z"}',
                    b'{"id": 1, "name": "early", "at": "2026-11-26T10:00:00Z"}', None], keys=[None, None, b'{"id": 1}'])
    changes, quarantine, _ = reader.read(batch, "run-1", QUARANTINE)

    assert [r[1] for r in _rows(latest(changes, reader.key))] == ["late"]
    assert _reasons(quarantine) == {2: "a tombstone has no sequence_by field at"}


def test_the_kafka_key_can_be_the_rows_identity_for_every_record_of_a_compacted_topic(tmp_path: Path) -> None:
    reader = ChangeReader(ROWS, ["customer"], None, False, "UTC", key_from_kafka=True)
    assert reader.schema.names[:2] == ["customer", "id"]  # the key column first, the value's fields after
    batch = record_batch(
        [b'{"id": 1, "name": "a"}', b'{"id": 2, "name": "b"}', b'{"id": 1, "name": "a2"}', None, b'{"id": 9}',
         b'{"id": 8}', None],
        keys=[b"cust-1", "cust-\u00e9".encode(), b"cust-1", "cust-\u00e9".encode(), None, b"\xff\xfe", b"cust-3"],
        offsets=[10, 11, 12, 13, 14, 15, 16])
    changes, quarantine, skipped = reader.read(batch, "run-1", QUARANTINE)

    assert skipped == 0
    assert [(r["customer"], r["name"], r["_inlet_sequence"], r["_inlet_deleted"]) for r in changes.to_pylist()] == [
        ("cust-1", "a", 10, False), ("cust-\u00e9", "b", 11, False), ("cust-1", "a2", 12, False),
        ("cust-\u00e9", None, 13, True), ("cust-3", None, 16, True)]
    assert _reasons(quarantine) == {14: "the record's Kafka key is null or not UTF-8 text",
                                    15: "the record's Kafka key is null or not UTF-8 text"}

    table = Table(Store(), str(tmp_path / "by-kafka-key"))
    merged = latest(changes, reader.key).drop_columns(list(HIDDEN))
    assert merge_changes(table, Txn(app_id="p", version=1), merged, reader.key) is not None
    live = [r for r in DeltaTable(table.uri).to_pyarrow_table().to_pylist() if not r["_inlet_deleted"]]
    assert [(r["customer"], r["id"], r["name"]) for r in live] == [("cust-1", 1, "a2")]


def test_a_kafka_key_column_is_one_column_apart_from_the_schema_of_rows() -> None:
    for key, debezium in ((["id"], False), (["ID"], False), (["_inlet_run_id"], False), (["a", "b"], False),
                          (["customer"], True)):
        with pytest.raises(JobError, match="key_from kafka_key"):
            ChangeReader(ROWS, key, None, debezium, "UTC", key_from_kafka=True)


def test_the_schema_decides_what_can_key_and_order_changes() -> None:
    with pytest.raises(JobError, match="key column nope is not a field"):
        ChangeReader(ROWS, ["nope"], None, False, "UTC")
    with pytest.raises(JobError, match="sequence_by name is string"):
        ChangeReader(ROWS, ["id"], "name", False, "UTC")
    with pytest.raises(JobError, match="not of after"):
        ChangeReader(ROWS, ["id"], "after.id", True, "UTC")


def test_latest_breaks_ties_of_equal_sequences_by_partition_then_offset() -> None:
    reader = ChangeReader(ROWS, ["id"], None, False, "UTC")
    first, _, _ = reader.read(record_batch([b'{"id": 1, "name": "p0"}'], partition=0, offsets=[7]), "r", QUARANTINE)
    second, _, _ = reader.read(record_batch([b'{"id": 1, "name": "p2"}'], partition=2, offsets=[7]), "r", QUARANTINE)
    assert [r[1] for r in _rows(latest(pa.concat_tables([first, second]), reader.key))] == ["p2"]


def _changes(reader: ChangeReader, rows: list[tuple[int, str | None, int]]) -> pa.Table:
    """Changes (id, name or None for a delete, lsn) as a run would merge them."""
    values = [envelope("d", {"id": i}, None, lsn) if name is None else envelope("u", None, {"id": i, "name": name}, lsn)
              for i, name, lsn in rows]
    changes, quarantine, _ = reader.read(record_batch(values), "run", QUARANTINE)
    assert quarantine.num_rows == 0
    return latest(changes, reader.key).drop_columns(list(HIDDEN))


def _live(uri: str) -> dict[int, tuple[str | None, int]]:
    table = DeltaTable(uri).to_pyarrow_table()
    return {r["id"]: (r["name"], r["_inlet_sequence"]) for r in table.to_pylist() if not r["_inlet_deleted"]}


def test_merges_apply_the_latest_change_per_key_and_older_changes_never_win(tmp_path: Path) -> None:
    reader = ChangeReader(ROWS, ["id"], "source.lsn", True, "UTC")
    table, txn = Table(Store(), str(tmp_path / "customers")), Txn(app_id="inlet-pipeline-p", version=1)
    rng = random.Random(30)
    stream = [(rng.randrange(40), None if rng.random() < 0.2 else f"n{lsn}", lsn) for lsn in range(1, 400)]
    rng.shuffle(stream)  # sequences arrive out of order across runs
    reference: dict[int, tuple[str | None, int]] = {}
    runs = [stream[i:i + 57] for i in range(0, len(stream), 57)]
    for version, run in enumerate(runs, start=1):
        txn = Txn(app_id="inlet-pipeline-p", version=version)
        merged = merge_changes(table, txn, _changes(reader, run), reader.key)
        newer = {i for i, _, lsn in run if i not in reference or reference[i][1] < lsn}
        assert merged is not None and merged.rows == len(newer)  # the keys whose row the run set
        for i, name, lsn in run:
            if i not in reference or reference[i][1] < lsn:
                reference[i] = (name, lsn)
        # A retried run: its txn is in the table, it merges nothing.
        assert merge_changes(table, txn, _changes(reader, run), reader.key) is None
    expected = {i: v for i, v in reference.items() if v[0] is not None}
    assert _live(table.uri) == expected

    # A replay of every change (any order, other runs' txns) leaves the table as it is: deletes are rows
    # with their sequence, so an older insert cannot bring a deleted key back.
    replay = list(stream)
    rng.shuffle(replay)
    replayed = merge_changes(table, Txn(app_id="inlet-pipeline-p", version=100), _changes(reader, replay), reader.key)
    assert replayed is not None and replayed.rows == 0
    assert _live(table.uri) == expected
    deleted = DeltaTable(table.uri).to_pyarrow_table().filter(pa.compute.field("_inlet_deleted"))
    assert sorted(deleted["id"].to_pylist()) == sorted(i for i, v in reference.items() if v[0] is None)
    assert set(deleted["name"].to_pylist()) == {None}
    assert DeltaTable(table.uri).transaction_version("inlet-pipeline-p") == 100


SoftChange = tuple[int, str | None, int, int]  # key, name (None: a delete), lsn, partition
AT = dt.datetime(2026, 11, 29, 5, 0, tzinfo=dt.UTC)  # a record's Kafka timestamp: AT + its lsn in seconds


def _soft_run(reader: ChangeReader, tasks: list[list[SoftChange]]) -> pa.Table:
    """A run's changes as its tasks (each reading its partitions) and then its driver reduce them."""
    parts = []
    for task in filter(None, tasks):
        read = []
        for partition in sorted({c[3] for c in task}):
            mine = [c for c in task if c[3] == partition]
            values = [envelope("d", {"id": i}, None, lsn) if name is None else envelope("u", None, {"id": i, "name": name}, lsn)
                      for i, name, lsn, _ in mine]
            batch = record_batch(values, partition=partition, offsets=[lsn for _, _, lsn, _ in mine],
                                 timestamps=[AT + dt.timedelta(seconds=lsn) for _, _, lsn, _ in mine])
            changes, quarantine, _ = reader.read(batch, "run", QUARANTINE)
            assert quarantine.num_rows == 0
            read.append(changes)
        parts.append(latest(pa.concat_tables(read), reader.key))
    return unhidden(latest(pa.concat_tables(parts), reader.key))


def _soft_reference(changes: list[SoftChange]) -> dict[int, tuple[str | None, int, bool, dt.datetime | None]]:
    """Each key's row: its latest change (by lsn, then partition); a deleted key's values those of its last
    change before the delete, its time the delete's."""
    rows = {}
    for key in {c[0] for c in changes}:
        mine = sorted((c for c in changes if c[0] == key), key=lambda c: (c[2], c[3]))
        _, name, lsn, _ = mine[-1]
        if name is not None:
            rows[key] = (name, lsn, False, None)
        else:
            before = [c for c in mine[:-1] if c[1] is not None]
            rows[key] = (before[-1][1] if before else None, lsn, True, AT + dt.timedelta(seconds=lsn))
    return rows


def _soft_rows(uri: str) -> dict[int, tuple[str | None, int, bool, dt.datetime | None]]:
    read = DeltaTable(uri).to_pyarrow_table().to_pylist()
    return {r["id"]: (r["name"], r["_inlet_sequence"], r["_inlet_deleted"], r["_inlet_deleted_at"]) for r in read}


def test_soft_deletes_hold_each_keys_last_values_whatever_order_runs_arrive_in(tmp_path: Path) -> None:
    reader = ChangeReader(ROWS, ["id"], "source.lsn", True, "UTC", soft_deletes=True)
    table = Table(Store(), str(tmp_path / "customers"))
    rng = random.Random(35)
    stream: list[SoftChange] = [(rng.randrange(15), None if rng.random() < 0.3 else f"n{lsn}", lsn, rng.randrange(3))
                                for lsn in range(1, 300)]
    rng.shuffle(stream)  # runs arrive out of order; within each, two tasks reduce their share first
    runs = [stream[i:i + 23] for i in range(0, len(stream), 23)]
    for version, run in enumerate(runs, start=1):
        split = rng.randrange(len(run) + 1)
        assert merge_changes(table, Txn(app_id="a", version=version), _soft_run(reader, [run[:split], run[split:]]),
                             reader.key, soft_deletes=True)
    expected = _soft_reference(stream)
    assert _soft_rows(table.uri) == expected
    assert any(deleted and name is not None for name, _, deleted, _ in expected.values())  # deleted keys that keep values
    columns = DeltaTable(table.uri).schema().to_arrow().names
    assert "_inlet_values_sequence" in columns and "_inlet_values_partition" not in columns

    # A replay of everything, in any order, changes nothing.
    rng.shuffle(stream)
    replayed = merge_changes(table, Txn(app_id="a", version=100), _soft_run(reader, [stream[:150], stream[150:]]),
                             reader.key, soft_deletes=True)
    assert replayed is not None and replayed.rows == 0
    assert _soft_rows(table.uri) == expected

    # A delete, then (in a later run) the update before it: the deleted row takes the update's values.
    for version, run in enumerate([[(90, "first", 400, 0)], [(90, None, 402, 0)], [(90, "late", 401, 0)]], start=101):
        merge_changes(table, Txn(app_id="a", version=version), _soft_run(reader, [run]), reader.key, soft_deletes=True)
    assert _soft_rows(table.uri)[90] == ("late", 402, True, AT + dt.timedelta(seconds=402))
    # A newer change brings the key back, its flag and time cleared.
    merge_changes(table, Txn(app_id="a", version=104), _soft_run(reader, [[(90, "back", 403, 0)]]), reader.key,
                  soft_deletes=True)
    assert _soft_rows(table.uri)[90] == ("back", 403, False, None)


def test_a_soft_delete_carries_the_same_values_however_a_runs_records_are_packed_into_tasks(tmp_path: Path) -> None:
    reader = ChangeReader(ROWS, ["id"], "source.lsn", True, "UTC", soft_deletes=True)
    # Two updates of one sequence in two partitions (the higher partition's is the later), then a delete.
    u1, u2, d = (1, "u1", 5, 0), (1, "u2", 5, 1), (1, None, 6, 2)
    for version, tasks in enumerate([[[u1, u2, d]], [[u1, d], [u2]], [[u2, d], [u1]], [[d], [u1], [u2]]], start=1):
        table = Table(Store(), str(tmp_path / f"t{version}"))
        assert merge_changes(table, Txn(app_id="a", version=1), _soft_run(reader, tasks), reader.key, soft_deletes=True)
        assert _soft_rows(table.uri) == {1: ("u2", 6, True, AT + dt.timedelta(seconds=6))}, tasks


def test_a_table_whose_deletes_become_soft_keeps_its_rows_values_through_late_updates(tmp_path: Path) -> None:
    table = Table(Store(), str(tmp_path / "customers"))
    mark = ChangeReader(ROWS, ["id"], "source.lsn", True, "UTC")
    assert merge_changes(table, Txn(app_id="a", version=1), _changes(mark, [(1, "a", 20), (2, "b", 21), (3, None, 22)]),
                         mark.key)
    soft = ChangeReader(ROWS, ["id"], "source.lsn", True, "UTC", soft_deletes=True)
    for version, run in enumerate([[(1, None, 30, 0), (2, None, 31, 0)], [(1, "older", 10, 0), (3, "late", 15, 0)]], start=2):
        assert merge_changes(table, Txn(app_id="a", version=version), _soft_run(soft, [run]), soft.key, soft_deletes=True)
    rows = _soft_rows(table.uri)
    # 1: live from the mark run, soft-deleted, then an update older than its values: it keeps "a".
    assert rows[1] == ("a", 30, True, AT + dt.timedelta(seconds=30)) and rows[2][:3] == ("b", 31, True)
    # 3: deleted in mark mode (no values, no time), then its late update before the delete: its values only.
    assert rows[3] == ("late", 22, True, None)


def test_a_delete_record_without_a_kafka_timestamp_is_timed_when_it_is_read() -> None:
    reader = ChangeReader(ROWS, ["id"], "source.lsn", True, "UTC", soft_deletes=True)
    batch = record_batch([envelope("d", {"id": 1}, None, 5)], timestamps=[dt.datetime(1969, 12, 31, 23, 59, 59, 999000,
                                                                                        tzinfo=dt.UTC)])
    batch = batch.set_column(batch.schema.get_field_index("timestampType"), "timestampType", pa.array([-1], pa.int32()))
    before = dt.datetime.now(dt.UTC)
    changes, _, _ = reader.read(batch, "run", QUARANTINE)
    assert before <= changes["_inlet_deleted_at"][0].as_py() <= dt.datetime.now(dt.UTC)  # not Kafka's -1 ms


def test_a_run_without_changes_commits_its_txn_and_a_changed_type_is_refused(tmp_path: Path) -> None:
    reader = ChangeReader(ROWS, ["id"], None, False, "UTC")
    table = Table(Store(), str(tmp_path / "t"))
    assert merge_changes(table, Txn(app_id="a", version=1), reader.schema.empty_table(), reader.key) == (1, 0, 0, 0)
    assert DeltaTable(table.uri).transaction_version("a") == 1
    assert merge_changes(table, Txn(app_id="a", version=1), reader.schema.empty_table(), reader.key) is None

    other = pa.schema([pa.field("id", pa.string()) if f.name == "id" else f for f in reader.schema])
    with pytest.raises(JobError) as refused:
        merge_changes(table, Txn(app_id="a", version=2), other.empty_table(), reader.key)
    assert refused.value.kind == "schema_incompatible"


def test_a_merge_that_loses_to_a_compaction_merges_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    reader = ChangeReader(ROWS, ["id"], "source.lsn", True, "UTC")
    table = Table(Store(), str(tmp_path / "t"))
    for version, rows in enumerate([[(1, "a", 1), (2, "b", 2)], [(3, "c", 3)]], start=1):
        assert merge_changes(table, Txn(app_id="a", version=version), _changes(reader, rows), reader.key)
    stale = DeltaTable(table.uri)  # what a MERGE read before the compaction committed
    assert DeltaTable(table.uri).optimize.compact()["numFilesRemoved"] >= 2
    reads: list[str] = []
    fresh = Table.delta

    def first_stale(self: Table) -> DeltaTable:
        reads.append(self.uri)
        return stale if len(reads) == 1 else fresh(self)

    monkeypatch.setattr(Table, "delta", first_stale)
    caplog.set_level("INFO", logger="inlet.delta")
    assert merge_changes(table, Txn(app_id="a", version=3), _changes(reader, [(1, "z", 10)]), reader.key)
    assert "met a concurrent commit; merging again (1)" in caplog.text  # the lost MERGE, then one that committed
    assert _live(table.uri) == {1: ("z", 10), 2: ("b", 2), 3: ("c", 3)}
    assert DeltaTable(table.uri).transaction_version("a") == 3


def test_a_mixed_case_key_merges_and_a_new_schema_field_becomes_a_column(tmp_path: Path) -> None:
    table = Table(Store(), str(tmp_path / "t"))
    narrow = ChangeReader(StructType([StructField("customerId", LongType()), StructField("Name", StringType())]),
                          ["customerId"], None, False, "UTC")
    first, _, _ = narrow.read(record_batch([b'{"customerId": 1, "Name": "a"}', b'{"customerId": 2, "Name": "b"}']), "r1", QUARANTINE)
    assert merge_changes(table, Txn(app_id="a", version=1), latest(first, narrow.key).drop_columns(list(HIDDEN)), narrow.key)
    wide = ChangeReader(StructType([*narrow.values.schema.fields, StructField("tier", LongType())]), ["customerId"], None,
                        False, "UTC")
    second, _, _ = wide.read(record_batch([b'{"customerId": 2, "Name": "B", "tier": 3}'], offsets=[5]), "r2", QUARANTINE)
    assert merge_changes(table, Txn(app_id="a", version=2), latest(second, wide.key).drop_columns(list(HIDDEN)), wide.key)
    rows = sorted(DeltaTable(table.uri).to_pyarrow_table().select(["customerId", "Name", "tier", "_inlet_sequence"])
                  .to_pylist(), key=lambda r: r["customerId"])
    assert rows == [{"customerId": 1, "Name": "a", "tier": None, "_inlet_sequence": 0},
                    {"customerId": 2, "Name": "B", "tier": 3, "_inlet_sequence": 5}]
    # The field dropped again: a change replaces its row whole, the dropped column null.
    third, _, _ = narrow.read(record_batch([b'{"customerId": 2, "Name": "C"}'], offsets=[9]), "r3", QUARANTINE)
    assert merge_changes(table, Txn(app_id="a", version=3), latest(third, narrow.key).drop_columns(list(HIDDEN)), narrow.key)
    assert DeltaTable(table.uri).to_pyarrow_table().filter(pa.compute.field("customerId") == 2).select(
        ["Name", "tier"]).to_pylist() == [{"Name": "C", "tier": None}]


def test_a_merge_carries_its_key_range_and_leaves_the_files_outside_it_alone(tmp_path: Path) -> None:
    reader = ChangeReader(ROWS, ["id"], "source.lsn", True, "UTC")
    table = Table(Store(), str(tmp_path / "t"))
    for version, start in enumerate((0, 10, 20), start=1):  # a file per ten keys
        rows = [(i, f"n{i}", 1) for i in range(start, start + 10)]
        assert merge_changes(table, Txn(app_id="a", version=version), _changes(reader, rows), reader.key)
    before = set(DeltaTable(table.uri).file_uris())
    batch = _changes(reader, [(12, "x", 5), (13, None, 5), (35, "new", 5), (-1, "neg", 5)])
    assert key_bounds(batch, reader.key) == ['t."id" >= -1', 't."id" <= 35']
    assert key_bounds(batch.slice(0, 0), reader.key) == []
    assert key_bounds(pa.table({"at": pa.array([0], pa.timestamp("us"))}), ["at"]) == []  # integers and strings only
    assert merge_changes(table, Txn(app_id="a", version=4), batch, reader.key)
    expected = {i: (f"n{i}", 1) for i in range(30) if i != 13} | {12: ("x", 5), 35: ("new", 5), -1: ("neg", 5)}
    assert _live(table.uri) == expected
    narrow = _changes(reader, [(25, "y", 6), (26, "z", 6)])
    assert merge_changes(table, Txn(app_id="a", version=5), narrow, reader.key)
    after = set(DeltaTable(table.uri).file_uris())
    assert len(before - after) == 2  # 10..19's file (12, 13) and 20..29's (25, 26) rewritten; 0..9's left alone
    assert _live(table.uri) == expected | {25: ("y", 6), 26: ("z", 6)}


def test_a_string_keyed_merge_leaves_files_outside_its_range_alone_and_misses_no_key(tmp_path: Path) -> None:
    # Keys past delta-rs's 64 characters of statistics (a truncated min, a max raised to a bound),
    # quotes and backslashes in the MERGE's literals.
    reader = ChangeReader(ROWS, ["name"], None, False, "UTC")
    table = Table(Store(), str(tmp_path / "t"))
    long = "p" * 70
    files = [[f"{long}{c}" for c in "acegi"], ["O'Brien", "back\\slash", "quote's end"], ["zz", "zz\u00e9", "zz\U0001F600"]]
    offset, reference = 0, {}

    def merge(version: int, names: list[str]) -> None:
        nonlocal offset
        values = [json.dumps({"name": n, "id": version}).encode() for n in names]
        changes, quarantine, _ = reader.read(record_batch(values, offsets=list(range(offset, offset + len(names)))),
                                             "run", QUARANTINE)
        assert quarantine.num_rows == 0
        offset += len(names)
        merged = merge_changes(table, Txn(app_id="a", version=version),
                               latest(changes, reader.key).drop_columns(list(HIDDEN)), reader.key)
        assert merged is not None and merged.rows == len(names)
        metrics = DeltaTable(table.uri).history(1)[0]["operationMetrics"]
        # A key the table holds is matched (updated), never inserted a second time.
        assert metrics["num_target_rows_updated"] == sum(1 for n in names if n in reference)
        reference.update({n: version for n in names})

    for version, names in enumerate(files, start=1):  # a file each
        merge(version, names)
    before = set(DeltaTable(table.uri).file_uris())
    batch = [f"{long}c", f"{long}d", f"{long}i"]  # two in the first file's range, one new between them
    assert key_bounds(pa.table({"name": batch + ["it's"]}), ["name"]) == ["t.\"name\" >= 'it''s'", f"t.\"name\" <= '{long}i'"]
    merge(4, batch)
    merge(5, ["back\\slash", "quote's end"])
    after = set(DeltaTable(table.uri).file_uris())
    assert len(before - after) == 2 and len(after - before) == 2  # the first two files rewritten; the zz file left alone
    rows = DeltaTable(table.uri).to_pyarrow_table(columns=["name", "id"]).to_pylist()
    assert len(rows) == len(reference) and {r["name"]: r["id"] for r in rows} == reference  # no key twice


def test_an_append_table_and_a_keyed_table_never_take_the_other_kinds_rows(tmp_path: Path) -> None:
    # A pipeline switched between append and upsert on the same path: its run fails naming both
    # kinds, where a MERGE into the append table would have mixed keyed rows into it silently.
    from deltalake import write_deltalake

    from spark_jobs.delta_tables.commit import commit_files

    reader = ChangeReader(ROWS, ["id"], None, False, "UTC")
    appended = Table(Store(), str(tmp_path / "appended"))
    write_deltalake(appended.uri, pa.table({"id": [1], "name": ["a"]}))
    with pytest.raises(JobError, match=r"holds a row per record \(mode append\), not the latest change per key") as refused:
        merge_changes(appended, Txn(app_id="p", version=1), reader.schema.empty_table(), reader.key)
    assert refused.value.kind == "invalid_spec"
    assert DeltaTable(appended.uri).version() == 0 and "_inlet_sequence" not in DeltaTable(appended.uri).schema().to_arrow().names

    keyed = Table(Store(), str(tmp_path / "keyed"))
    assert merge_changes(keyed, Txn(app_id="p", version=1), reader.schema.empty_table(), reader.key)
    with pytest.raises(JobError, match=r"holds the latest change per key \(mode upsert\), not a row per record") as refused:
        commit_files(keyed, Txn(app_id="p", version=2), [], pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string())]))
    assert refused.value.kind == "invalid_spec"


def test_a_keyed_table_refuses_a_merge_by_another_key(tmp_path: Path) -> None:
    # Matched by another key, a MERGE would add a second row for every existing one: the table says
    # its key (field metadata set when it was created), and a run keyed otherwise fails, changing nothing.
    by_id = ChangeReader(ROWS, ["id"], None, False, "UTC")
    table = Table(Store(), str(tmp_path / "t"))
    first, _, _ = by_id.read(record_batch([b'{"id": 1, "name": "a"}']), "r1", QUARANTINE)
    assert merge_changes(table, Txn(app_id="p", version=1), first.drop_columns(list(HIDDEN)), by_id.key)
    assert {f.name: f.metadata for f in DeltaTable(table.uri).schema().fields}["id"] == {"inlet.key": "0"}

    by_name = ChangeReader(ROWS, ["name"], None, False, "UTC")
    second, _, _ = by_name.read(record_batch([b'{"id": 1, "name": "a"}']), "r2", QUARANTINE)
    with pytest.raises(JobError, match="is keyed by id, the pipeline by name: write that to a new path") as refused:
        merge_changes(table, Txn(app_id="p", version=2), second.drop_columns(list(HIDDEN)), by_name.key)
    assert refused.value.kind == "invalid_spec" and DeltaTable(table.uri).version() == 1
