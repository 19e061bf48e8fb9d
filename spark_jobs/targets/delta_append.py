"""The Delta append target: a run's rows added to a Delta table, and the records that do not decode
to its quarantine table, in one commit per table tagged with the run's app transaction (``txn``), so
that a run commits at most once however often it is tried.

    prepare  the run's txn already in the table: nothing to do. Raw, string and registry formats:
             the subjects resolved, and the run's columns merged with the table's (a changed type
             fails here, before anything is read). Replace mode: the files to remove and rewrite.
    write    one Spark job whose tasks write Parquet files into the table folders, either
             - tasks that read, decode and write by themselves (``delta_tables.direct_write``: raw,
               string and registry formats; the JVM only schedules them), or
             - DataFrames, for json: ``inlet_kafka`` → ``decode`` (Spark's from_json decides what is
               quarantined) → the ``inlet_delta`` data source (``delta_tables.files``).
             Replace mode's partially replaced files are rewritten, minus the replaced rows, by the
             same job.
    commit   the quarantine table first, then the main one (``delta_tables.commit``): if the main
             commit fails, the retry skips the quarantine by its txn.
    discard  the files of each table this attempt did not commit.
"""

from __future__ import annotations

import logging
import os
import uuid
from typing import TYPE_CHECKING, cast

import pyarrow as pa

from spark_jobs.delta_tables import Table
from spark_jobs.delta_tables.commit import already_committed, commit_files, last_note
from spark_jobs.delta_tables.files import delete_files
from spark_jobs.delta_tables.replace import ReplacePlan, plan_replace
from spark_jobs.errors import JobError
from spark_jobs.targets import ALREADY_COMMITTED, Checkpoint, Committed, Reading

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import DataType

    from spark_jobs.decode import Framed
    from spark_jobs.egress import EgressPolicy
    from spark_jobs.plans import DataFile, TableRole, TaskReport
    from spark_jobs.spec import DeltaTargetSpec, RunSpec, SourceSpec

log = logging.getLogger("inlet.delta")


class DeltaAppend:
    """``spec``'s rows appended to ``target``'s table (a ``targets.RunTarget``)."""

    def __init__(self, spec: RunSpec, target: DeltaTargetSpec, checkpoint: Checkpoint) -> None:
        self.spec, self.target, self.checkpoint = spec, target, checkpoint
        self.uses_dataframes = not spec.writes_directly
        self.main = Table(target.store, target.uri, tuple(target.partition_by))
        # Where the records that do not decode go: json and registry formats have such records.
        q_uri, decodes = target.quarantine_uri, spec.source.decodes_framed or self.uses_dataframes
        self.quarantine = Table(target.store, q_uri) if q_uri and decodes else None
        self.replace = ReplacePlan()
        self.framed: Framed | None = None  # registry formats: the subjects the tasks decode with
        self.read_schema: pa.Schema | None = None  # of the Kafka records, for tasks that read them
        self.schemas: dict[TableRole, pa.Schema] = {}  # the columns each table's files have, and are committed with
        self.notes: dict[str, str] = {}  # the main commit's metadata: the subjects' versions
        self.committed: set[TableRole] = set()

    def prepare(self) -> Committed | None:
        txn = self.spec.txn
        if already_committed(self.main, txn):
            log.info("txn %s v%d is already in %s: nothing to do", txn.app_id, txn.version, self.main.uri)
            return ALREADY_COMMITTED
        if not self.uses_dataframes:
            self._plan_columns()
        if self.target.replace_ranges:
            for role, table in self._tables():
                plan_replace(table, role, self.target.replace_ranges, self.replace)
            log.info("replace: removing %d files, rewriting %d partially replaced ones",
                     sum(len(r) for r in self.replace.remove.values()), len(self.replace.rewrite))
        return None

    def write(self, reading: Reading) -> list[TaskReport]:
        return self._write_rows(reading) if self.uses_dataframes else self._write_files(reading)

    def commit(self, reports: list[TaskReport]) -> Committed:
        self.checkpoint("its Delta commit")
        txn, files = self.spec.txn, {role: _files_of(reports, role) for role in ("main", "quarantine")}
        if self.quarantine is not None and "quarantine" in self.schemas:
            version = commit_files(self.quarantine, txn, files["quarantine"], self.schemas["quarantine"],
                                   removes=self.replace.remove["quarantine"])
            if version is None:  # an earlier attempt committed it
                self._delete(files["quarantine"])
            else:
                self.committed.add("quarantine")
        version = commit_files(self.main, txn, files["main"], self.schemas["main"], removes=self.replace.remove["main"],
                               notes=self.notes)
        if version is None:  # a concurrent duplicate of this run committed first
            self._delete(files["main"])
            return ALREADY_COMMITTED
        self.committed.add("main")
        # Counted from the Kafka records, not the files: replace mode also rewrites older rows.
        quarantined = sum(r.quarantined for r in reports)
        return Committed(
            rows=sum(s.records for r in reports for s in r.partitions.values()) - quarantined,
            quarantined=quarantined,
            bytes=sum(f.size for role in self.committed for f in files[role]),
            version=version,
            files=len(files["main"]),
        )

    def discard(self, reports: list[TaskReport]) -> None:
        # A committed table's files are its rows now.
        self._delete([f for r in reports for f in r.files if f.table not in self.committed])

    def _tables(self) -> list[tuple[TableRole, Table]]:
        tables: list[tuple[TableRole, Table]] = [("main", self.main)]
        return tables + ([("quarantine", self.quarantine)] if self.quarantine else [])

    def _delete(self, files: list[DataFile]) -> None:
        delete_files(self.main.store, files, self.main.uri, self.quarantine.uri if self.quarantine else None)

    # --- tasks that read, decode and write by themselves ------------------------------------------

    def _plan_columns(self) -> None:
        """The tables' columns, before anything is read: the run's (the subjects' for registry
        formats), merged with those of the existing table."""
        from pyspark.sql.pandas.types import to_arrow_schema

        from spark_jobs.decode import decoded_struct
        from spark_jobs.kafka_source import kafka_struct

        source = self.spec.source
        self.read_schema = to_arrow_schema(kafka_struct(source.include_headers), timezone="UTC")
        if not source.decodes_framed:
            struct = decoded_struct(source)
            for name, data_type in _missing_columns(struct.fieldNames(), self.main):
                struct.add(name, data_type, True)
            self.schemas["main"] = to_arrow_schema(struct, timezone="UTC")
            return
        self.framed = framed = _framed(source, self.read_schema, self.spec.egress.policy())
        self.notes = {f"inlet.{s.part}_schema": f"{s.subject} version {s.version} (schema id {s.schema.id})"
                      for s in (framed.value, framed.key) if s is not None}
        if self.quarantine is not None:
            self.schemas["quarantine"] = framed.quarantine_schema
        self.schemas["main"] = _merged_columns(self.main, _framed_columns(framed, source, self.read_schema), framed)

    def _write_files(self, reading: Reading) -> list[TaskReport]:
        from spark_jobs.delta_tables.direct_write import DirectWritePlan, WriteUnit, pack_chunks, run_units

        source, chunks = self.spec.source, list(reading.plan.chunks)
        assert self.read_schema is not None  # by prepare
        groups = pack_chunks(chunks, source.max_records_per_task, reading.context.defaultParallelism)
        units = [WriteUnit(chunks=g) for g in groups] + [WriteUnit(rewrite=f) for f in self.replace.rewrite]
        plan = DirectWritePlan(
            uri=self.main.uri,
            partition_by=list(self.main.partition_by),
            token=uuid.uuid4().hex[:12],
            schema=self.schemas["main"],
            read_schema=self.read_schema,
            consumer_config=reading.plan.consumer_config,
            stall_timeout_s=reading.plan.stall_timeout_s,
            value_format=source.value_format,
            run_id=self.spec.run_id,
            replace_ranges=self.target.replace_ranges or {},
            store=self.main.store,
            framed=self.framed,
            quarantine_uri=self.quarantine.uri if self.quarantine else None,
        )
        log.info("writing %d chunks in %d tasks, rewriting %d files", len(chunks), len(groups), len(self.replace.rewrite))
        return run_units(reading.context, plan, units)

    # --- DataFrames (json) ------------------------------------------------------------------------

    def _write_rows(self, reading: Reading) -> list[TaskReport]:
        from pyspark.sql import functions as F
        from pyspark.sql.pandas.types import to_arrow_schema

        from spark_jobs.columns import CARRIED, QUARANTINE_REASON
        from spark_jobs.decode import decode
        from spark_jobs.delta_tables.files import INTERNAL, DeltaWritePlan, InletDeltaDataSource, quarantine_schema
        from spark_jobs.delta_tables.replace import InletDeltaRewriteDataSource, RewritePlan
        from spark_jobs.plans import read_reports, write_plan

        scratch, store = reading.scratch, self.main.store
        assert reading.records is not None  # uses_dataframes
        rows = _with_missing_columns(decode(reading.records, self.spec.source, self.spec.run_id), self.main)
        if self.replace.rewrite:
            rows = rows.withColumn(CARRIED, F.lit(None).cast("boolean"))
            rewrite = RewritePlan(tuple(self.replace.rewrite), self.target.replace_ranges or {}, store)
            rows.sparkSession.dataSource.register(InletDeltaRewriteDataSource)
            carried = (rows.sparkSession.read.format("inlet_delta_rewrite").schema(rows.schema)
                       .option("plan", write_plan(os.path.join(scratch, "rewrite-plan.pickle"), rewrite)).load())
            rows = rows.unionByName(carried)

        writer_schema = to_arrow_schema(rows.schema, timezone="UTC")
        self.schemas["main"] = pa.schema([f for f in writer_schema if f.name not in INTERNAL])
        if QUARANTINE_REASON not in rows.columns:  # no record of the run can go to quarantine
            self.quarantine = None
        elif self.quarantine is not None:
            self.schemas["quarantine"] = quarantine_schema(writer_schema)
        plan = DeltaWritePlan(
            uri=self.main.uri,
            quarantine_uri=self.quarantine.uri if self.quarantine else None,
            partition_by=list(self.main.partition_by),
            manifest=os.path.join(scratch, "manifest.pickle"),
            store=store,
        )
        rows.sparkSession.dataSource.register(InletDeltaDataSource)
        plan_path = write_plan(os.path.join(scratch, "write-plan.pickle"), plan)
        rows.write.format("inlet_delta").mode("append").option("plan", plan_path).save()
        return read_reports(plan.manifest)


def _files_of(reports: list[TaskReport], role: TableRole) -> list[DataFile]:
    return [f for r in reports for f in r.files if f.table == role]


def _framed(source: SourceSpec, read_schema: pa.Schema, egress: EgressPolicy) -> Framed:
    """The subjects this run reads, resolved on the driver once (``resolve``), for every task."""
    from spark_jobs.decode import Framed, quarantine_struct
    from spark_jobs.formats.wire import Part, RegistryFormat, SubjectSchema, resolve
    from spark_jobs.registry import RegistryConfig
    from spark_jobs.spec import REGISTRY_FORMATS, SubjectRef

    registry = source.registry.config(egress) if source.registry else None
    subjects: dict[Part, SubjectSchema] = {}
    parts: tuple[tuple[Part, str | None, SubjectRef | None], ...] = (
        ("value", source.value_format, source.value_subject), ("key", source.key_format, source.key_subject))
    for part, fmt, ref in parts:
        if ref is not None:
            assert registry is not None and fmt in REGISTRY_FORMATS  # the spec's validation
            subjects[part] = resolve(registry, part, cast(RegistryFormat, fmt), ref.subject, ref.version)
            log.info("%ss: %s", part, subjects[part].describe())
    return Framed(registry or RegistryConfig(url=""), subjects.get("value"), subjects.get("key"), quarantine_struct(read_schema))


def _framed_columns(framed: Framed, source: SourceSpec, read_schema: pa.Schema) -> pa.Schema:
    from spark_jobs.decode import framed_schema

    return framed_schema(read_schema, source.value_format, source.key_format, framed.value, framed.key)


def _merged_columns(table: Table, columns: pa.Schema, framed: Framed) -> pa.Schema:
    """The run's columns merged into the existing table's (``formats.evolution``), checked before
    anything is read: a field whose type changed fails the run, naming the subject's versions."""
    from spark_jobs.formats.evolution import TypeChange, merge_schema

    existing = table.columns()
    if existing is None:
        return columns
    try:
        return merge_schema(existing, columns)
    except TypeChange as change:
        subject = framed.key if change.path == "key" or change.path.startswith("key.") else framed.value
        written = last_note(table, f"inlet.{subject.part}_schema") if subject else None
        read = subject.describe() if subject else "this run"
        raise JobError("schema_incompatible", f"{read} cannot go into {table.uri}: {change}"
                                              + (f" (last written from {written})" if written else "")) from None


def _with_missing_columns(rows: DataFrame, table: Table) -> DataFrame:
    """Carry the existing table's columns that this run lacks, as nulls, so rewrites keep them."""
    from pyspark.sql import functions as F

    for name, data_type in _missing_columns(rows.columns, table):
        rows = rows.withColumn(name, F.lit(None).cast(data_type))
    return rows


def _missing_columns(columns: list[str], table: Table) -> list[tuple[str, DataType]]:
    """The existing table's columns (name, Spark type) that are not in ``columns``."""
    from pyspark.sql.pandas.types import from_arrow_type

    existing = table.columns()
    return [(f.name, from_arrow_type(_plain(f.type))) for f in existing or [] if f.name not in columns]


def _plain(arrow_type: pa.DataType) -> pa.DataType:
    return pa.string() if arrow_type in (pa.large_string(), pa.string_view()) else pa.binary() if arrow_type in (pa.large_binary(), pa.binary_view()) else arrow_type
