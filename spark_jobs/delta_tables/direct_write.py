"""Kafka chunks to Delta files inside one executor task: how every run into Delta writes.

A run's rows never need to become Spark rows. Each task reads its chunks with ONE confluent-kafka
consumer (``read_chunks``), decodes them on Arrow (``spark_jobs.decode``), writes Parquet files
straight into the table folder (one per table partition for the task's small Kafka ranges, as
Delta's optimized writes do; large ranges get files of their own: ``OWN_FILE_RECORDS``) and returns
only a ``TaskReport`` (files, sizes, row counts, stats, offsets read). Spark runs the tasks as one
job and collects the reports; the JVM only schedules them (no SQL session, no Arrow → JVM rows →
Arrow round trip of any row). The driver commits the reports in ONE delta-rs transaction per table.

Per value format: raw and string records are written as they are (``decode_arrow``); json values
are read as Spark's ``from_json`` reads them (``decode_json``, with ``formats.json_values``, held to
Spark by ``tests/formats/test_json_conformance.py``); registry formats (avro, protobuf,
json_schema) by their subjects' schemas (``decode_framed``). The records that do not decode go to
the quarantine table's files, written by the same task, with their reason.

Replace mode: each partially replaced table file (of the main or the quarantine table) is
rewritten, minus the replaced rows, by a task of the same job; the Delta target
(``targets.delta_append``) commits the removes with the adds.

Every file a run writes is named ``part-<token>-*``, so a failed job's files can be found and
deleted even when its tasks could not report them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
from pyspark import SparkContext

from spark_jobs.decode import Framed, decode_arrow, decode_framed, decode_json, quarantine_struct
from spark_jobs.delta_tables.files import FileSet, delete_run_files
from spark_jobs.delta_tables.replace import RewriteFile, carried_rows
from spark_jobs.kafka_source import Chunk, read_chunks
from spark_jobs.plans import ClientConfig, PartitionStats, TaskReport
from spark_jobs.read_budget import ReadBudget
from spark_jobs.storage import Store

if TYPE_CHECKING:
    from spark_jobs.contract.expectations import Expectations
    from spark_jobs.contract.rows import RowContract
    from spark_jobs.contract.sensitive import Protection
    from spark_jobs.formats.json_values import JsonValues
    from spark_jobs.spec import Ranges, ValueFormat  # pydantic costs every Python worker ~1 s to import


# A chunk of this many offsets gets files of its own; smaller ones share their task's. A replay removes a
# file whole only when every row of it is replaced, and rewrites the others: a large range's own file
# is dropped by a replay of that range, while the small ranges of frequent runs are better few files
# (a run of 64 small partitions on 2 cores adds 2, where it added 64), which compaction merges anyway.
OWN_FILE_RECORDS = 100_000


@dataclass(frozen=True)
class DirectWritePlan:
    """What every task of a direct write shares; it travels pickled with each task."""

    uri: str
    partition_by: list[str]
    token: str  # names this attempt's files ``part-<token>-*``
    schema: pa.Schema  # of the table's rows, including columns of the table this run lacks
    read_schema: pa.Schema  # of the Kafka records read
    consumer_config: ClientConfig
    budget: ReadBudget
    value_format: ValueFormat
    run_id: str
    replace_ranges: Ranges  # empty outside replace mode
    store: Store
    framed: Framed | None = None  # registry formats: the subjects to decode with
    json: JsonValues | None = None  # json: the decoder of the pipeline's schema, in the session's time zone
    quarantine_uri: str | None = None  # where the records that do not decode go (json, registry formats)
    expectations: Expectations | None = None  # the pipeline's rules on decoded rows (json, registry formats)
    protection: Protection | None = None  # its sensitive fields (json, registry formats)

    def decode(self, batch: pa.RecordBatch, contract: RowContract | None = None) -> tuple[pa.Table, pa.Table | None]:
        """A batch of records as table rows, and as quarantine rows those that do not decode or break
        an expectation's quarantine rule (None: every record of this format decodes); ``contract``:
        the task's (``row_contract``)."""
        if self.json is not None:
            return decode_json(batch, self.json, self.run_id, self.schema, quarantine_struct(self.read_schema), contract)
        if self.framed is not None:
            return decode_framed(batch, self.framed, self.run_id, self.schema, quarantine_struct(self.read_schema),
                                 contract)
        return decode_arrow(batch, self.value_format, self.run_id, self.schema), None

    def row_contract(self) -> RowContract | None:
        """A task's contract on its rows (its own count of the expectations); None without one."""
        if self.expectations is None and self.protection is None:
            return None
        from spark_jobs.contract.rows import RowContract

        return RowContract(self.expectations.tally() if self.expectations is not None else None, self.protection)


@dataclass(frozen=True)
class WriteUnit:
    """One task's work: chunks of distinct partitions to read, or one table file to rewrite."""

    chunks: tuple[Chunk, ...] = ()
    rewrite: RewriteFile | None = None


def pack_chunks(chunks: list[Chunk], max_records_per_task: int, slots: int) -> list[tuple[Chunk, ...]]:
    """Chunks grouped into tasks of at most ``max_records_per_task`` offsets, never two chunks of
    one partition together, into a multiple of ``slots`` (the cores) where the chunks allow, biggest
    task first: one consumer reads many partitions and every core stays busy to the end."""
    if not chunks:
        return []
    total = sum(c.end - c.start for c in chunks)
    wanted = max(slots, math.ceil(total / max_records_per_task))
    wanted = min(len(chunks), math.ceil(wanted / slots) * slots)
    bins: list[tuple[list[int], list[Chunk], set[tuple[str, int]]]] = [([0], [], set()) for _ in range(wanted)]
    for chunk in sorted(chunks, key=lambda c: (c.start - c.end, c.topic, c.partition, c.start)):
        size, key = chunk.end - chunk.start, (chunk.topic, chunk.partition)
        fits = [b for b in bins if key not in b[2] and b[0][0] + size <= max_records_per_task]
        if not fits:
            bins.append(([0], [], set()))
            fits = [bins[-1]]
        load, members, keys = min(fits, key=lambda b: b[0][0])
        load[0] += size
        members.append(chunk)
        keys.add(key)
    bins.sort(key=lambda b: -b[0][0])
    return [tuple(sorted(members, key=lambda c: (c.topic, c.partition, c.start))) for _, members, _ in bins if members]


def read_counted(plan: DirectWritePlan, chunks: tuple[Chunk, ...], report: TaskReport) -> Iterator[tuple[Chunk, pa.RecordBatch]]:
    """The records of ``chunks``, in batches, counted into ``report`` as they are read."""
    for chunk, batch in read_chunks(plan.consumer_config, list(chunks), plan.read_schema, plan.budget):
        low, high = pc.min_max(batch.column("offset")).values()
        size = sum(pc.sum(pc.binary_length(batch.column(c))).as_py() or 0 for c in ("key", "value"))
        stats = report.partitions.setdefault((chunk.topic, chunk.partition), PartitionStats())
        stats.merge(batch.num_rows, low.as_py(), high.as_py(), size, pc.max(batch.column("timestamp")).as_py())
        yield chunk, batch


def write_unit(plan: DirectWritePlan, unit: WriteUnit) -> TaskReport:
    """Runs on an executor: one unit's files, reported (and deleted again if the task fails)."""
    report = TaskReport()
    files = FileSet("main", plan.store, plan.uri, plan.schema, plan.partition_by, plan.token)
    quarantine_schema = quarantine_struct(plan.read_schema)
    quarantine = None
    if plan.quarantine_uri:
        quarantine = FileSet("quarantine", plan.store, plan.quarantine_uri, quarantine_schema, [], plan.token)
    try:
        if unit.rewrite is not None and unit.rewrite.table == "quarantine":
            assert quarantine is not None  # only planned with a quarantine table
            quarantine.write(carried_rows(plan.store, unit.rewrite, plan.replace_ranges, quarantine_schema))
        elif unit.rewrite is not None:
            files.write(carried_rows(plan.store, unit.rewrite, plan.replace_ranges, plan.schema))
        else:
            contract = plan.row_contract()
            for chunk, batch in read_counted(plan, unit.chunks, report):
                rows, bad = plan.decode(batch, contract)
                files.write(rows, (chunk.topic, chunk.partition) if chunk.end - chunk.start >= OWN_FILE_RECORDS else ())
                if bad is not None:
                    report.quarantined += bad.num_rows
                    if quarantine is not None:
                        quarantine.write(bad)
            report.expected(contract)
        report.files = files.close() + (quarantine.close() if quarantine else [])
    except BaseException:
        files.discard()
        if quarantine:
            quarantine.discard()
        raise
    return report


def run_units(context: SparkContext, plan: DirectWritePlan, units: list[WriteUnit],
              task: Callable[[DirectWritePlan, WriteUnit], TaskReport] = write_unit) -> list[TaskReport]:
    """One Spark job, one ``task`` per unit; only the reports come back to the driver."""
    if not units:
        return []
    try:
        return context.parallelize(units, len(units)).map(partial(task, plan)).collect()
    except BaseException:
        for root in (plan.uri, plan.quarantine_uri):  # files of the tasks that did finish
            if root:
                delete_run_files(plan.store, root, plan.token)
        raise
