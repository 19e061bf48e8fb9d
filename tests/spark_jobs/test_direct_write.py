"""The direct-write task without Spark: a task's chunks read from the sandbox Kafka, decoded and
written as Delta files, reported, committed with delta-rs; and how chunks are packed into tasks."""

from __future__ import annotations

import datetime
import gc
import json
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from pyspark.sql.pandas.types import to_arrow_schema

from spark_jobs import kafka_source
from spark_jobs.decode import decoded_struct, quarantine_struct
from spark_jobs.delta_tables import Table, direct_write
from spark_jobs.delta_tables.commit import commit_files
from spark_jobs.delta_tables.direct_write import DirectWritePlan, WriteUnit, pack_chunks, write_unit
from spark_jobs.delta_tables.files import FileSet
from spark_jobs.delta_tables.replace import RewriteFile
from spark_jobs.errors import JobError
from spark_jobs.kafka_source import Chunk, consumer_config, kafka_struct, read_chunks
from spark_jobs.read_budget import ReadBudget
from spark_jobs.spec import SourceSpec, Txn
from spark_jobs.storage import Store
from tests.factories import LOOPBACK_ALLOWED
from tests.fixtures.kafka import read_range


def test_chunks_are_packed_into_balanced_tasks_of_distinct_partitions() -> None:
    chunks = [Chunk("t", p, 0, 100) for p in range(8)] + [Chunk("t", 8, 0, 60), Chunk("t", 8, 60, 120)]

    tasks = pack_chunks(chunks, max_records_per_task=400, slots=2)

    assert len(tasks) == 4  # 920 offsets need 3 tasks of <= 400; rounded up to keep both cores busy
    assert sorted(tuple(vars(c).values()) for task in tasks for c in task) == sorted(tuple(vars(c).values()) for c in chunks)
    assert all(sum(c.end - c.start for c in task) <= 400 for task in tasks)
    assert all(len({c.partition for c in task}) == len(task) for task in tasks)
    loads = [sum(c.end - c.start for c in task) for task in tasks]
    assert loads == sorted(loads, reverse=True) and loads[0] - loads[-1] <= 100
    # Never more tasks than chunks, nor a task above the limit when a chunk already fills it.
    assert pack_chunks([Chunk("t", 0, 0, 5)], 10, slots=4) == [(Chunk("t", 0, 0, 5),)]
    assert [len(t) for t in pack_chunks([Chunk("t", p, 0, 30) for p in range(3)], 30, slots=2)] == [1, 1, 1]
    assert pack_chunks([], 10, slots=2) == []


def test_a_task_writes_its_chunks_as_delta_files_and_reports_what_it_read(sandbox_kafka, kafka_topic, produce_keyed, tmp_path: Path) -> None:
    bootstrap = sandbox_kafka.bootstrap_servers
    topic = kafka_topic(partitions=3)
    placed = produce_keyed(bootstrap, topic, 300, headers={"h": b"v"})
    source = SourceSpec(kafka_config={"bootstrap.servers": bootstrap}, ranges={}, value_format="string", include_headers=True)
    schema = to_arrow_schema(decoded_struct(source), timezone="UTC")
    uri = str(tmp_path / "t")
    plan = DirectWritePlan(
        uri=uri, partition_by=["partition"], token="tok1", schema=schema,
        read_schema=to_arrow_schema(kafka_struct(True), timezone="UTC"),
        consumer_config=consumer_config(source.kafka_config, "g", LOOPBACK_ALLOWED), budget=ReadBudget(stall_timeout_s=10.0),
        value_format="string", run_id="run-1", replace_ranges={}, store=Store(),
    )
    # Partition 0 from offset 2, partition 1 up to 5 before its end, partition 2 not at all.
    chunks = (Chunk(topic, 0, 2, len(placed[0])), Chunk(topic, 1, 0, len(placed[1]) - 5))

    report = write_unit(plan, WriteUnit(chunks=chunks))

    assert sorted((f.table, f.partition_values["partition"], f.num_records) for f in report.files) == [
        ("main", "0", len(placed[0]) - 2), ("main", "1", len(placed[1]) - 5)
    ]
    assert all(Path(uri, f.path).name.startswith("part-tok1-") for f in report.files)
    stats = {k: (s.records, s.first_offset, s.last_offset) for k, s in report.partitions.items()}
    assert stats == {(topic, 0): (len(placed[0]) - 2, 2, len(placed[0]) - 1), (topic, 1): (len(placed[1]) - 5, 0, len(placed[1]) - 6)}
    assert commit_files(Table(Store(), uri, ("partition",)), Txn(app_id="a", version=1), report.files, schema) == 1
    table = DeltaTable(uri).to_pyarrow_table().sort_by([("partition", "ascending"), ("offset", "ascending")])
    expected = [m for c in chunks for m in read_range(bootstrap, topic, c.partition, c.start, c.end)]
    assert table.column_names == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers", "_inlet_run_id"]
    assert [(r["partition"], r["offset"], r["key"], r["value"]) for r in table.to_pylist()] == [
        (m.partition(), m.offset(), m.key().decode(), m.value().decode()) for m in expected
    ]
    assert [int(r["timestamp"].timestamp() * 1000) for r in table.to_pylist()] == [m.timestamp()[1] for m in expected]
    assert set(table["timestampType"].to_pylist()) == {0} and table["headers"][0].as_py() == [{"key": "h", "value": b"v"}]
    assert sum(s.bytes for s in report.partitions.values()) == sum(len(m.key()) + len(m.value()) for m in expected)
    assert pq.read_schema(Path(uri, report.files[0].path)).field("_inlet_run_id").nullable is False


def test_one_consumer_reads_the_chunks_of_two_topics_each_exactly(sandbox_kafka, kafka_topic, produce_keyed) -> None:
    """A task's consumer reads chunks of several topics and partitions at once: each consumed batch is
    split by (topic, partition) (``kafka_source._by_partition``), each chunk's records in
    offset order, none past its end, none of another chunk's."""
    bootstrap = sandbox_kafka.bootstrap_servers
    orders, payments = kafka_topic(partitions=3), kafka_topic(partitions=2)
    placed = {orders: produce_keyed(bootstrap, orders, 400), payments: produce_keyed(bootstrap, payments, 300)}
    chunks = [Chunk(orders, 0, 3, len(placed[orders][0])), Chunk(orders, 2, 0, len(placed[orders][2]) - 7),
              Chunk(payments, 0, 0, len(placed[payments][0])), Chunk(payments, 1, 5, len(placed[payments][1]) - 5)]
    schema = to_arrow_schema(kafka_struct(False), timezone="UTC")
    config = consumer_config({"bootstrap.servers": bootstrap}, "g", LOOPBACK_ALLOWED)

    read: dict[tuple[str, int], list[tuple[int, bytes]]] = {}
    for chunk, batch in read_chunks(config, chunks, schema, ReadBudget(stall_timeout_s=10.0)):
        assert set(batch.column("topic").to_pylist()) == {chunk.topic}
        assert set(batch.column("partition").to_pylist()) == {chunk.partition}
        read.setdefault((chunk.topic, chunk.partition), []).extend(
            zip(batch.column("offset").to_pylist(), batch.column("value").to_pylist(), strict=True))

    assert read == {(c.topic, c.partition): [(m.offset(), m.value()) for m in read_range(bootstrap, c.topic, c.partition, c.start, c.end)]
                    for c in chunks}


@pytest.mark.parametrize("one_topic", [True, False])
def test_a_consumed_batch_goes_to_its_chunks_in_offset_order_whatever_order_its_partitions_come_in(one_topic: bool) -> None:
    """``kafka_source._take`` on messages made by hand: a partition in two runs of one batch, two
    topics, a record at its chunk's end (not taken, the chunk done), keys null or not, and each
    timestamp type counted as Spark counts them."""
    from confluent_kafka import Message

    def message(topic: str, partition: int, offset: int, key: bytes | None = None, kind: int = 1) -> Message:
        return Message(topic=topic, partition=partition, offset=offset, key=key, value=f"{topic}/{partition}/{offset}".encode(),
                       timestamp=(kind, 1_000 + offset))

    second = "a" if one_topic else "b"
    batch = [message("a", 0, 10), message("a", 1, 20, b"k"), message("a", 0, 11, kind=2), message(second, 2, 5, kind=0),
             message("a", 1, 21), message("a", 0, 12), message(second, 2, 6), message("a", 1, 22)]
    chunks = [Chunk("a", 0, 10, 100), Chunk("a", 1, 20, 22), Chunk(second, 2, 5, 100)]
    pending = {(c.topic, c.partition): kafka_source._Pending(c) for c in chunks}
    schema = to_arrow_schema(kafka_struct(False), timezone="UTC")

    touched, _ = kafka_source._take(batch, pending, one_topic, False, schema.field("timestamp").type, None, ReadBudget())

    assert touched == set(pending)
    taken = {key: pa.Table.from_batches(p.pieces).to_pylist() for key, p in pending.items()}
    utc = datetime.UTC
    assert {key: [(r["topic"], r["partition"], r["offset"], r["key"], r["value"], r["timestamp"], r["timestampType"])
                  for r in rows] for key, rows in taken.items()} == {
        ("a", 0): [("a", 0, o, None, f"a/0/{o}".encode(), datetime.datetime.fromtimestamp(1 + o / 1000, utc), t)
                   for o, t in ((10, 0), (11, 1), (12, 0))],
        ("a", 1): [("a", 1, 20, b"k", b"a/1/20", datetime.datetime.fromtimestamp(1.02, utc), 0),
                   ("a", 1, 21, None, b"a/1/21", datetime.datetime.fromtimestamp(1.021, utc), 0)],
        (second, 2): [(second, 2, o, None, f"{second}/2/{o}".encode(), datetime.datetime.fromtimestamp(1 + o / 1000, utc), t)
                      for o, t in ((5, -1), (6, 0))],
    }
    assert {key: p.position for key, p in pending.items()} == {("a", 0): 13, ("a", 1): 22, (second, 2): 7}


def test_a_consumed_batch_whose_partitions_come_in_runs_is_sliced_into_its_chunks() -> None:
    """As librdkafka queues them: each partition's records together. One partition number in two
    topics side by side, every key null, and a record without a timestamp (type 0, time -1)."""
    from confluent_kafka import Message

    batch = [Message(topic=t, partition=p, offset=o, key=None, value=f"{t}/{p}/{o}".encode(), timestamp=stamp)
             for t, p, o, stamp in (("a", 2, 7, (1, 5)), ("a", 2, 8, (0, -1)), ("b", 2, 3, (2, 9)), ("b", 2, 4, (2, 10)),
                                    ("a", 0, 1, (1, 1)))]
    chunks = [Chunk("a", 2, 7, 9), Chunk("b", 2, 0, 100), Chunk("a", 0, 0, 100)]
    pending = {(c.topic, c.partition): kafka_source._Pending(c) for c in chunks}
    schema = to_arrow_schema(kafka_struct(False), timezone="UTC")

    kafka_source._take(batch, pending, False, False, schema.field("timestamp").type, None, ReadBudget())

    taken = {key: pa.Table.from_batches(p.pieces) for key, p in pending.items()}
    assert all(t.column("key").null_count == t.num_rows for t in taken.values())
    assert {key: [(r["topic"], r["partition"], r["offset"], r["value"], r["timestampType"]) for r in t.to_pylist()]
            for key, t in taken.items()} == {
        ("a", 2): [("a", 2, 7, b"a/2/7", 0), ("a", 2, 8, b"a/2/8", -1)],
        ("b", 2): [("b", 2, 3, b"b/2/3", 1), ("b", 2, 4, b"b/2/4", 1)],
        ("a", 0): [("a", 0, 1, b"a/0/1", 0)],
    }
    assert taken["a", 2].column("timestamp").to_pylist()[1] == datetime.datetime.fromtimestamp(-0.001, datetime.UTC)
    assert {key: p.position for key, p in pending.items()} == {("a", 2): 9, ("b", 2): 5, ("a", 0): 2}


def test_readers_hold_young_collections_back_and_the_last_to_close_sets_the_thresholds_again() -> None:
    """Readers are generators: they interleave, end, are closed while suspended or fail. The
    thresholds in force before the first opened come back when the last one closes, whichever it is;
    a process that turned automatic collection off keeps it off."""
    def reader(fail: bool = False) -> Iterator[int]:
        with kafka_source._collections_deferred():
            yield 1
            if fail:
                raise RuntimeError("a reader's failure")
            yield 2

    before, held = gc.get_threshold(), max(gc.get_threshold()[0], kafka_source._YOUNG_THRESHOLD)
    readers = [reader(), reader(), reader(fail=True)]
    try:
        for each in readers:
            next(each)
        assert gc.get_threshold() == (held, *before[1:])
        readers[0].close()
        with pytest.raises(RuntimeError, match="a reader's failure"):
            next(readers[2])
        assert gc.get_threshold() == (held, *before[1:])
        assert list(readers[1]) == [2]
        assert gc.get_threshold() == before

        gc.set_threshold(0)
        off = reader()
        readers.append(off)
        next(off)
        assert gc.get_threshold()[0] == 0
        off.close()
        assert gc.get_threshold()[0] == 0
    finally:
        for each in readers:
            each.close()
        gc.set_threshold(*before)


def test_a_task_that_finds_its_offsets_deleted_fails_as_data_loss_and_leaves_no_file(
    sandbox_kafka, kafka_topic, produce_keyed, kafka_faults, tmp_path: Path
) -> None:
    bootstrap = sandbox_kafka.bootstrap_servers
    topic = kafka_topic(partitions=1)
    produce_keyed(bootstrap, topic, 50)
    kafka_faults.delete_records(topic, 0, 20)  # after the driver's watermark check, say
    source = SourceSpec(kafka_config={"bootstrap.servers": bootstrap}, ranges={})
    plan = DirectWritePlan(
        uri=str(tmp_path / "t"), partition_by=[], token="tok2", schema=to_arrow_schema(decoded_struct(source), timezone="UTC"),
        read_schema=to_arrow_schema(kafka_struct(False), timezone="UTC"),
        consumer_config=consumer_config(source.kafka_config, "g", LOOPBACK_ALLOWED), budget=ReadBudget(stall_timeout_s=10.0),
        value_format="raw", run_id="run-2", replace_ranges={}, store=Store(),
    )

    with pytest.raises(JobError) as failed:
        write_unit(plan, WriteUnit(chunks=(Chunk(topic, 0, 0, 50),)))

    assert (failed.value.kind, failed.value.topic, failed.value.partition) == ("data_loss", topic, 0)
    assert not [p for p in (tmp_path / "t").rglob("*") if p.is_file()]


def test_rewrite_units_carry_the_rows_outside_the_replaced_ranges_of_either_table(tmp_path: Path) -> None:
    read_schema = to_arrow_schema(kafka_struct(False), timezone="UTC")
    quarantined = pa.table({"key": [b"k0", b"k1", b"k2"], "value": [b"{x", None, b"[]"], "topic": ["t"] * 3,
                            "partition": pa.array([0] * 3, pa.int32()), "offset": [0, 1, 2],
                            "timestamp": pa.array([0] * 3, pa.timestamp("us", "UTC")), "timestampType": pa.array([0] * 3, pa.int32()),
                            "_inlet_quarantine_reason": ["not JSON", "null", "not JSON"], "_inlet_run_id": ["run-0"] * 3},
                           schema=quarantine_struct(read_schema))
    main_schema = pa.schema([("n", pa.int32()), ("day", pa.date32()), ("topic", pa.string()), ("partition", pa.int32()),
                             ("offset", pa.int64())])
    (tmp_path / "q").mkdir()
    (tmp_path / "t" / "day=2026-01-02").mkdir(parents=True)
    pq.write_table(quarantined, tmp_path / "q" / "part-old.parquet")
    pq.write_table(pa.table({"n": pa.array([5, 6], pa.int32()), "topic": ["t", "t"], "partition": pa.array([0, 0], pa.int32()),
                             "offset": [3, 4]}), tmp_path / "t" / "day=2026-01-02" / "part-old.parquet")
    plan = DirectWritePlan(
        uri=str(tmp_path / "t"), partition_by=["day"], token="tok3", schema=main_schema, read_schema=read_schema,
        consumer_config={}, budget=ReadBudget(stall_timeout_s=10.0), value_format="json", run_id="run-3", replace_ranges={"t": {"0": (1, 4)}},
        store=Store(), quarantine_uri=str(tmp_path / "q"),
    )

    [carried_quarantine] = write_unit(plan, WriteUnit(rewrite=RewriteFile("quarantine", str(tmp_path / "q" / "part-old.parquet"), {}))).files
    # The partition value reaches the task typed (a date), as the table's add action holds it.
    [carried] = write_unit(plan, WriteUnit(rewrite=RewriteFile("main", str(tmp_path / "t" / "day=2026-01-02" / "part-old.parquet"),
                                                                {"day": datetime.date(2026, 1, 2)}))).files

    # Records as read stay as read: key and value too.
    assert pq.read_table(tmp_path / "q" / carried_quarantine.path).to_pylist() == quarantined.slice(0, 1).to_pylist()
    assert (carried_quarantine.table, carried_quarantine.num_records) == ("quarantine", 1)
    assert (carried.table, carried.partition_values, carried.num_records) == ("main", {"day": "2026-01-02"}, 1)
    assert pq.read_table(tmp_path / "t" / carried.path).to_pylist() == [{"n": 6, "topic": "t", "partition": 0, "offset": 4}]


def test_a_tasks_partitions_share_its_file_in_row_groups_of_many_batches(tmp_path: Path) -> None:
    """A run of many small partitions makes one file per task, not one per Kafka partition, and its
    small batches are held into row groups rather than written a group each (readers pay per group)."""
    schema = pa.schema([("partition", pa.int32()), ("offset", pa.int64()), ("value", pa.binary())])

    def batch(partition: int, start: int, rows: int) -> pa.Table:
        return pa.table({"partition": pa.array([partition] * rows, pa.int32()), "offset": pa.array(range(start, start + rows), pa.int64()),
                         "value": [b"v"] * rows}, schema=schema)

    small = FileSet("main", Store(), str(tmp_path / "small"), schema, [], "tok")
    for start in (0, 10, 20):
        for partition in range(64):
            small.write(batch(partition, start, 10))
    [file] = small.close()
    meta = pq.ParquetFile(tmp_path / "small" / file.path).metadata
    assert (file.num_records, meta.num_rows, meta.num_row_groups) == (1920, 1920, 1)
    stats = json.loads(file.stats)
    assert (stats["minValues"]["partition"], stats["maxValues"]["partition"]) == (0, 63)
    assert (stats["minValues"]["offset"], stats["maxValues"]["offset"]) == (0, 29)

    large = FileSet("main", Store(), str(tmp_path / "large"), schema, [], "tok")
    for start in range(0, 300_000, 10_000):  # batches as the reader yields them
        large.write(batch(0, start, 10_000))
    [file] = large.close()
    meta = pq.ParquetFile(tmp_path / "large" / file.path).metadata
    groups = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
    assert groups == [140_000, 140_000, 20_000]  # written once 128k rows are held
    read = pq.read_table(tmp_path / "large" / file.path)
    assert read["offset"].to_pylist() == list(range(300_000))


def test_a_runs_files_delta_encode_offsets_and_timestamps_and_keep_dictionaries_for_text_only(tmp_path: Path) -> None:
    """Kafka's offset and timestamp ascend: delta-encoded. Text repeats (a topic, a status, a name):
    a dictionary. Numbers, times and bytes rarely repeat: none, which writes faster and smaller."""
    schema = pa.schema([("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()),
                        ("timestamp", pa.timestamp("us", tz="UTC")), ("value", pa.binary()), ("amount", pa.float64()),
                        ("tags", pa.list_(pa.struct([("name", pa.string()), ("n", pa.int64())])))])
    n = 5_000
    rows = pa.table({"topic": ["orders"] * n, "partition": pa.array([3] * n, pa.int32()), "offset": range(10**9, 10**9 + n),
                     "timestamp": pa.array([1_764_000_000_000_000 + 1000 * i for i in range(n)], pa.timestamp("us", tz="UTC")),
                     "value": [b"%d" % i for i in range(n)], "amount": [i * 0.37 for i in range(n)],
                     "tags": [[{"name": ("a", "b")[i % 2], "n": i}] for i in range(n)]}, schema=schema)
    files = FileSet("main", Store(), str(tmp_path / "t"), schema, [], "tok")
    files.write(rows)
    [file] = files.close()

    meta = pq.ParquetFile(tmp_path / "t" / file.path).metadata
    encodings = {meta.row_group(0).column(i).path_in_schema: set(meta.row_group(0).column(i).encodings)
                 for i in range(meta.num_columns)}
    assert "DELTA_BINARY_PACKED" in encodings["offset"] and "DELTA_BINARY_PACKED" in encodings["timestamp"]
    assert "RLE_DICTIONARY" in encodings["topic"] and "RLE_DICTIONARY" in encodings["tags.list.element.name"]
    assert not any("DICTIONARY" in e for path in ("partition", "offset", "timestamp", "value", "amount", "tags.list.element.n")
                   for e in encodings[path]), encodings
    assert meta.row_group(0).column(0).compression == "SNAPPY"
    assert pq.read_table(tmp_path / "t" / file.path).equals(rows)


def test_a_large_range_gets_a_file_of_its_own_and_small_ones_share_the_tasks(
        sandbox_kafka, kafka_topic, produce_keyed, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """So a replay of the large range can drop its file whole, while small ranges make few files."""
    monkeypatch.setattr(direct_write, "OWN_FILE_RECORDS", 50)
    bootstrap = sandbox_kafka.bootstrap_servers
    topic = kafka_topic(partitions=3)
    placed = produce_keyed(bootstrap, topic, 600)
    assert min(len(offsets) for offsets in placed.values()) >= 60
    source = SourceSpec(kafka_config={"bootstrap.servers": bootstrap}, ranges={}, value_format="string")
    plan = DirectWritePlan(
        uri=str(tmp_path / "t"), partition_by=[], token="tok2", schema=to_arrow_schema(decoded_struct(source), timezone="UTC"),
        read_schema=to_arrow_schema(kafka_struct(False), timezone="UTC"),
        consumer_config=consumer_config(source.kafka_config, "g", LOOPBACK_ALLOWED), budget=ReadBudget(stall_timeout_s=10.0),
        value_format="string", run_id="run-2", replace_ranges={}, store=Store(),
    )
    chunks = (Chunk(topic, 0, 0, 60), Chunk(topic, 1, 0, 20), Chunk(topic, 2, 5, 25))

    report = write_unit(plan, WriteUnit(chunks=chunks))

    partitions = sorted(sorted(set(pq.read_table(tmp_path / "t" / f.path)["partition"].to_pylist())) for f in report.files)
    assert partitions == [[0], [1, 2]]
    assert sorted(f.num_records for f in report.files) == [40, 60]


def test_a_failed_task_deletes_the_files_it_had_closed_too(tmp_path: Path) -> None:
    """A task failing after one set's files closed (the quarantine's close, say) reports nothing, so
    nothing of it may stay behind, closed or not."""
    schema = pa.schema([("partition", pa.int32()), ("offset", pa.int64())])
    files = FileSet("main", Store(), str(tmp_path), schema, [], "tok")
    files.write(pa.table({"partition": pa.array([0], pa.int32()), "offset": pa.array([1], pa.int64())}))
    assert len(files.close()) == 1
    files.write(pa.table({"partition": pa.array([1], pa.int32()), "offset": pa.array([2], pa.int64())}))
    assert len(list(tmp_path.glob("part-tok-*.parquet"))) == 2
    files.discard()
    assert list(tmp_path.glob("part-tok-*.parquet")) == []
