"""The keyed Delta target (``target.mode`` upsert): the table holds the latest change per key (or, with
``scd_type`` 2, every version of a key), applied by ONE MERGE per run tagged with the run's app
transaction (``txn``), so that a retried run is a no-op and a replay of older offsets cannot move a
row back (docs/keyed-tables.md).

    prepare  the run's txn already in the table: nothing to do. Else the Kafka records' columns.
             Replace-mode replays re-apply their ranges as append-mode ones do: a keyed table
             has no rows of offsets to take out, and re-applied changes that are not newer than a
             row's are no-ops.
    write    one Spark job whose tasks read and decode their chunks (``delta_tables.direct_write``),
             turn the records into changes (``delta_tables.changes``), keep the latest per key, and
             report them (Arrow IPC); the records that are no change go to the quarantine table's files.
    commit   the quarantine table first (as the append target), then the latest change per key over
             all tasks, merged (``delta_tables.commit.merge_changes``; a large table's by delta-spark
             on the run's Spark, ``delta_tables.spark_merge``). The run's offsets commit after this,
             in the run's ledger.
    discard  the quarantine files this attempt did not commit (a MERGE writes nothing until it commits).

Deletes are kept as rows (``_inlet_deleted`` true, the key and ``_inlet_sequence`` only): a replay of
the offsets before a delete then finds the delete's higher sequence and cannot bring the row back.
Readers select ``WHERE NOT _inlet_deleted``.

With ``target.scd_type`` 2 a run keeps every change (one per key and sequence) and merges them into
the key's history (``delta_tables.history``): versions valid from a sequence (``_inlet_valid_from``)
to the next; a delete is a version of its own, never current. Readers select ``WHERE _inlet_current``.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import TYPE_CHECKING

import pyarrow as pa

from spark_jobs.columns import INLET_PREFIX, SEQUENCE
from spark_jobs.delta_tables.changes import ChangeReader, latest, unhidden
from spark_jobs.delta_tables.commit import already_committed, key_marked, merge_changes
from spark_jobs.delta_tables.history import merge_history
from spark_jobs.delta_tables.spark_merge import merge_changes_on_spark, merges_on_spark
from spark_jobs.errors import JobError
from spark_jobs.targets import ALREADY_COMMITTED, Committed, Reading
from spark_jobs.targets.delta_append import DeltaAppend, session_time_zone

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from spark_jobs.decode import Framed
    from spark_jobs.delta_tables.direct_write import DirectWritePlan, WriteUnit
    from spark_jobs.plans import TaskReport

log = logging.getLogger("inlet.delta")


class DeltaUpsert(DeltaAppend):
    """``spec``'s changes merged into ``target``'s keyed table (a ``targets.RunTarget``)."""

    reader: ChangeReader | None = None

    def prepare(self) -> Committed | None:
        txn = self.spec.txn
        if already_committed(self.main, txn):
            log.info("txn %s v%d is already in %s: nothing to do", txn.app_id, txn.version, self.main.uri)
            return ALREADY_COMMITTED
        self._plan_columns()  # the Kafka records' and the quarantine table's columns; registry formats' subjects
        # Refused before anything is written (table_features); the commit checks again.
        self.main.require("history_merge" if self.target.scd_type == 2 else "merge")
        if self.quarantine is not None:
            self.quarantine.require("append")
        if self.target.replace_ranges:
            log.info("replace: a keyed table re-applies the replayed changes; older ones leave rows as they are")
        return None

    def write(self, reading: Reading) -> list[TaskReport]:
        from spark_jobs.decode import json_columns
        from spark_jobs.delta_tables.direct_write import WriteUnit, pack_chunks, run_units

        source, target = self.spec.source, self.target
        try:
            rows = self.framed if self.framed is not None else json_columns(source.schema_ or "")
            self.reader = reader = ChangeReader(rows, target.key, target.sequence_by,
                                                target.changes == "debezium", session_time_zone(reading.context),
                                                key_from_kafka=target.key_from == "kafka_key",
                                                partition_by=tuple(target.partition_by),
                                                soft_deletes=target.deletes == "soft")
        except (TypeError, ValueError) as exc:  # a type or zone the json decoder refuses
            raise JobError("invalid_spec", f"schema: {exc}") from None
        if self.protection is not None:
            reader.without(self.protection.dropped)
        self.schemas["main"] = reader.schema
        # The evolution policy's checks, on the record's columns: Inlet's own differ by table (SCD type 2 keeps no sequence).
        self._evolved(pa.schema([f for f in unhidden(reader.schema.empty_table()).schema
                                 if not f.name.startswith(INLET_PREFIX)]), self.framed)
        self.context = reading.context
        self._check_spark_writes()
        self._check_contract(reader.schema)
        self._create_main(key_marked(unhidden(reader.schema.empty_table()).schema, target.key))
        chunks = list(reading.plan.chunks)
        groups = pack_chunks(chunks, source.max_records_per_task, reading.context.defaultParallelism)
        log.info("reading the changes of %d chunks in %d tasks", len(chunks), len(groups))
        plan = self._write_plan(reading, reader.schema, None)
        return run_units(reading.context, plan, [WriteUnit(chunks=g) for g in groups],
                         task=partial(changes_unit, reader, self._kept_per()))

    def commit(self, reports: list[TaskReport]) -> Committed:
        self.checkpoint("its Delta merge")
        assert self.reader is not None  # by write
        quarantine = [f for r in reports for f in r.files if f.table == "quarantine"]
        self._commit_quarantine(quarantine)
        parts = [pa.ipc.open_stream(r.changes).read_all() for r in reports if r.changes is not None]
        changes = latest(pa.concat_tables(parts), self._kept_per()) if parts else None
        merged = (unhidden(changes) if changes is not None
                  else self.reader.schema.empty_table())
        least, spark = self.target.merge_on_spark_bytes or 0, self._merging_spark()
        if self.target.scd_type == 2:
            outcome = merge_history(self.main, self.spec.txn, merged, self.reader.key, spark=spark, least_bytes=least)
        elif spark is not None:
            outcome = merge_changes_on_spark(spark, self.main, self.spec.txn, merged, self.reader.key, least_bytes=least,
                                             soft_deletes=self.reader.soft_deletes)
        else:
            outcome = merge_changes(self.main, self.spec.txn, merged, self.reader.key, soft_deletes=self.reader.soft_deletes)
        if outcome is None:  # an earlier or concurrent attempt of this run merged first
            return ALREADY_COMMITTED
        version, files, written, rows = outcome
        self.committed.add("main")
        quarantined = sum(r.quarantined for r in reports)
        read = sum(s.records for r in reports for s in r.partitions.values())
        log.info("merged %d changes (%d kept, %d rows set) into %s v%d", read - quarantined, merged.num_rows, rows,
                 self.main.uri, version)
        # The rows the MERGE inserted or updated: a change not newer than its key's row sets none.
        return Committed(rows=rows, quarantined=quarantined,
                         bytes=written + (sum(f.size for f in quarantine) if "quarantine" in self.committed else 0),
                         version=version, files=files)

    def _merging_spark(self) -> SparkSession | None:
        """The run's Spark, if the table's MERGE may go to delta-spark (the platform's
        ``INLET_SPARK_MERGE_MIN_MB`` set, ``spark_merge.merges_on_spark``); the MERGE then decides by
        the table's size as it reads it."""
        if self.target.merge_on_spark_bytes is None or not merges_on_spark(
                self.main, self.context.getConf().get("spark.sql.extensions") if self.context else None):
            return None
        from pyspark.sql import SparkSession

        return SparkSession.builder.getOrCreate()

    def _plan_framed_columns(self, framed: Framed) -> None:
        """Registry formats: the columns come from the subjects through the ``ChangeReader`` (``write``),
        the value's record (for debezium the envelope's ``after``) beside the keyed table's own, which
        ``write`` checks against the table's by the evolution policy."""

    def _kept_per(self) -> tuple[str, ...]:
        """What a run keeps one change of: each key (the latest change), or with scd_type 2 each key
        and sequence (every version of a key: the history keeps them all)."""
        assert self.reader is not None  # by write
        return (*self.reader.key, SEQUENCE) if self.target.scd_type == 2 else self.reader.key


def changes_unit(reader: ChangeReader, kept_per: tuple[str, ...], plan: DirectWritePlan, unit: WriteUnit) -> TaskReport:
    """Runs on an executor: one unit's changes, the latest per ``kept_per`` (the key, or the key and
    sequence), in its report (Arrow IPC), and its records that are no change in quarantine files
    (deleted again if the task fails)."""
    from spark_jobs.decode import quarantine_struct
    from spark_jobs.delta_tables.direct_write import read_counted
    from spark_jobs.delta_tables.files import FileSet
    from spark_jobs.plans import TaskReport

    report = TaskReport()
    schema = quarantine_struct(plan.read_schema)
    quarantine = FileSet("quarantine", plan.store, plan.quarantine_uri, schema, [], plan.token) if plan.quarantine_uri else None
    try:
        parts: list[pa.Table] = []
        contract = plan.row_contract()
        for _, batch in read_counted(plan, unit.chunks, report):
            changes, bad, skipped = reader.read(batch, plan.run_id, schema, contract)
            parts.append(latest(changes, kept_per))
            report.skipped += skipped
            report.quarantined += bad.num_rows
            if quarantine is not None:
                quarantine.write(bad)
        if parts:
            sink = pa.BufferOutputStream()
            table = latest(pa.concat_tables(parts), kept_per)
            with pa.ipc.new_stream(sink, table.schema) as stream:
                stream.write_table(table)
            report.changes = sink.getvalue().to_pybytes()
        report.expected(contract)
        report.files = quarantine.close() if quarantine else []
    except BaseException:
        if quarantine:
            quarantine.discard()
        raise
    return report
