"""The Delta append target: a run's rows added to a Delta table, and the records that do not decode
to its quarantine table, in one commit per table tagged with the run's app transaction (``txn``), so
that a run commits at most once however often it is tried.

    prepare  the run's txn already in the table: nothing to do. Else the run's columns (the registry
             subjects' resolved here) merged with the table's (a changed type fails here, before
             anything is read); a json schema's once Spark runs (its DDL parser is the JVM's).
             Replace mode: the files to remove and rewrite.
    write    one Spark job whose tasks read, decode and write Parquet files into the table folders
             by themselves (``delta_tables.direct_write``; the JVM only schedules them). Replace
             mode's partially replaced files are rewritten, minus the replaced rows, by the same job.
             A new table the pipeline opted into Delta features for is created by delta-spark
             first (``delta_tables.create``).
    commit   the quarantine table first, then the main one (``delta_tables.commit``): if the main
             commit fails, the retry skips the quarantine by its txn.
    discard  the files of each table this attempt did not commit.
"""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, cast

import pyarrow as pa

from spark_jobs.contract.expectations import Expectations
from spark_jobs.contract.sensitive import Protection
from spark_jobs.delta_tables import Table
from spark_jobs.delta_tables.commit import already_committed, commit_files, last_note
from spark_jobs.delta_tables.create import create_on_spark
from spark_jobs.delta_tables.files import delete_files
from spark_jobs.delta_tables.replace import ReplacePlan, overwrite_ranges, plan_replace
from spark_jobs.delta_tables.spark_merge import merges_on_spark
from spark_jobs.delta_tables.spark_write import commit_on_spark
from spark_jobs.errors import JobError
from spark_jobs.table_features import Operation, Writer, writer_for
from spark_jobs.targets import ALREADY_COMMITTED, Checkpoint, Committed, Reading

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql.types import DataType

    from spark_jobs.decode import Framed
    from spark_jobs.delta_tables.direct_write import DirectWritePlan
    from spark_jobs.egress import EgressPolicy
    from spark_jobs.formats.evolution import Policy, Widening
    from spark_jobs.formats.json_values import JsonValues
    from spark_jobs.plans import DataFile, TableRole, TaskReport
    from spark_jobs.spec import DeltaTargetSpec, RunSpec, SourceSpec, TableCreation

log = logging.getLogger("inlet.delta")


class DeltaAppend:
    """``spec``'s rows appended to ``target``'s table (a ``targets.RunTarget``)."""

    uses_dataframes = False  # its tasks are plain Python functions (``direct_write``)

    def __init__(self, spec: RunSpec, target: DeltaTargetSpec, checkpoint: Checkpoint) -> None:
        self.spec, self.target, self.checkpoint = spec, target, checkpoint
        self.main = Table(target.store, target.uri, tuple(target.partition_by))
        # Where the records that do not decode go: json and registry formats have such records.
        q_uri = target.quarantine_uri
        self.quarantine = Table(target.store, q_uri) if q_uri and spec.source.quarantines else None
        self.replace = ReplacePlan()
        self.framed: Framed | None = None  # registry formats: the subjects the tasks decode with
        self.read_schema: pa.Schema | None = None  # of the Kafka records, for tasks that read them
        self.schemas: dict[TableRole, pa.Schema] = {}  # the columns each table's files have, and are committed with
        self.notes: dict[str, str] = {}  # the main commit's metadata: the subjects' versions
        self.widenings: list[Widening] = []  # the main table's columns the run widens (evolution policy widen)
        self.committed: set[TableRole] = set()
        self.writers: dict[TableRole, Writer] = {}  # who commits each existing table (table_features.writer_for)
        self.context: SparkContext | None = None  # the run's, from write
        self.expectations = Expectations.of(spec.contract.expectations)  # tested by the tasks on decoded rows
        self.protection = Protection.of(spec.contract.sensitive, spec.contract.field_key)  # its sensitive fields

    def prepare(self) -> Committed | None:
        txn = self.spec.txn
        if already_committed(self.main, txn):
            log.info("txn %s v%d is already in %s: nothing to do", txn.app_id, txn.version, self.main.uri)
            return ALREADY_COMMITTED
        self._plan_columns()
        operation: Operation = "replace" if self.target.replace_ranges else "append"
        for role, table in self._tables():  # refused before anything is written (table_features)
            if table.exists():
                self.writers[role] = writer_for(table.delta(), operation, table.uri, spark=spark_may_write(table))
        if self.target.replace_ranges:
            for role, table in self._tables():
                if self.writers.get(role) == "delta-spark":
                    self.replace.overwrite.add(role)
                else:
                    plan_replace(table, role, self.target.replace_ranges, self.replace)
            log.info("replace: removing %d files, rewriting %d partially replaced ones%s",
                     sum(len(r) for r in self.replace.remove.values()), len(self.replace.rewrite),
                     f"; overwriting the ranges of {sorted(self.replace.overwrite)}" if self.replace.overwrite else "")
        return None

    def write(self, reading: Reading) -> list[TaskReport]:
        from spark_jobs.delta_tables.direct_write import WriteUnit, pack_chunks, run_units

        source, chunks = self.spec.source, list(reading.plan.chunks)
        self.context = reading.context
        self._check_spark_writes()
        assert self.read_schema is not None  # by prepare
        values = self._json_values(reading.context) if source.value_format == "json" else None
        self._check_contract(self.schemas["main"])
        operation: Operation = "replace" if self.target.replace_ranges else "append"
        if self._create_main(self.schemas["main"]):  # before the tasks put files in its folder
            self.writers["main"] = writer_for(self.main.delta(), operation, self.main.uri, spark=True)
        if self.widenings:  # refused before the tasks write the wider type's files; widened by the commit
            self._check_widening(operation)
        groups = pack_chunks(chunks, source.max_records_per_task, reading.context.defaultParallelism)
        units = [WriteUnit(chunks=g) for g in groups] + [WriteUnit(rewrite=f) for f in self.replace.rewrite]
        plan = self._write_plan(reading, self.schemas["main"], values)
        log.info("writing %d chunks in %d tasks, rewriting %d files", len(chunks), len(groups), len(self.replace.rewrite))
        return run_units(reading.context, plan, units)

    def _write_plan(self, reading: Reading, schema: pa.Schema, values: JsonValues | None) -> DirectWritePlan:
        from spark_jobs.delta_tables.direct_write import DirectWritePlan

        assert self.read_schema is not None  # by prepare
        return DirectWritePlan(
            uri=self.main.uri,
            partition_by=list(self.main.partition_by),
            token=uuid.uuid4().hex[:12],
            schema=schema,
            read_schema=self.read_schema,
            consumer_config=reading.plan.consumer_config,
            budget=reading.plan.budget,
            value_format=self.spec.source.value_format,
            run_id=self.spec.run_id,
            replace_ranges=self.target.replace_ranges or {},
            store=self.main.store,
            framed=self.framed,
            json=values,
            quarantine_uri=self.quarantine.uri if self.quarantine else None,
            expectations=self.expectations,
            protection=self.protection,
        )

    def commit(self, reports: list[TaskReport]) -> Committed:
        self.checkpoint("its Delta commit")
        files = {role: _files_of(reports, role) for role in ("main", "quarantine")}
        self._commit_quarantine(files["quarantine"])
        if self.widenings:
            self._widen()
        version = self._commit_table("main", self.main, files["main"], notes=self.notes)
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

    def _commit_quarantine(self, files: list[DataFile]) -> None:
        """The quarantine table's commit, first: if the main one fails, the retry skips it by its txn."""
        if self.quarantine is None:
            return
        version = self._commit_table("quarantine", self.quarantine, files)
        if version is None:  # an earlier attempt committed it
            self._delete(files)
        else:
            self.committed.add("quarantine")

    def _check_spark_writes(self) -> None:
        """Refuse, before the tasks write anything, a table only delta-spark can write when the run's
        Spark cannot: it lacks delta-spark (`make setup` caches its jars) or does not reach the table."""
        extensions = self.context.getConf().get("spark.sql.extensions") if self.context else None
        if self.target.table_features.needs_spark and not self.main.exists() and not merges_on_spark(self.main, extensions):
            raise JobError("table_unsupported", f"{self.main.uri}: the pipeline's table is created with "
                                                f"{_asked(self.target.table_features)} by delta-spark, which the run's Spark "
                                                "lacks (`make setup` caches its jars) or which does not reach the table")
        for role, table in self._tables():
            if self.writers.get(role) == "delta-spark" and not merges_on_spark(table, extensions):
                raise JobError("table_unsupported", f"{table.uri}: its features need delta-spark to write it, and the "
                                                    "run's Spark has none (`make setup` caches its jars), or does not "
                                                    "reach the table (an object store)")

    def _commit_table(self, role: TableRole, table: Table, files: list[DataFile], *,
                      notes: dict[str, str] | None = None) -> int | None:
        """One table's commit: its files and replace mode's removes, or the overwrite of the replayed
        ranges where the replaced files carry deletion vectors (``delta_tables.replace``); by delta-spark
        where the table has features delta-rs cannot write (``delta_tables.spark_write``)."""
        if self.writers.get(role) == "delta-spark":  # the run's Spark can (checked by write)
            from pyspark.sql import SparkSession

            return commit_on_spark(SparkSession.builder.getOrCreate(), table, self.spec.txn, files, self.schemas[role],
                                   ranges=self.target.replace_ranges or None, notes=notes)
        if role in self.replace.overwrite:
            assert self.target.replace_ranges  # an overwrite is planned for replays only
            return overwrite_ranges(table, self.spec.txn, files, self.schemas[role], self.target.replace_ranges, notes=notes)
        return commit_files(table, self.spec.txn, files, self.schemas[role], removes=self.replace.remove[role], notes=notes)

    def _check_contract(self, schema: pa.Schema) -> None:
        """Each expectation and sensitive field applies to rows of ``schema``: ``invalid_spec`` before
        anything is read or created."""
        for rules in (self.expectations, self.protection):
            if rules is not None:
                rules.check(schema)

    def _check_widening(self, operation: Operation) -> None:
        """The evolution policy ``widen``'s type changes can be made, and the table written after them,
        by delta-spark (``delta_tables.widening``), which the run's Spark must have."""
        from spark_jobs.delta_tables.widening import check_widening

        extensions = self.context.getConf().get("spark.sql.extensions") if self.context else None
        if not merges_on_spark(self.main, extensions):
            raise JobError("table_unsupported", f"{self.main.uri}: widening {self.widenings[0].path} takes delta-spark, "
                                                "which the run's Spark lacks (`make setup` caches its jars) or which does "
                                                "not reach the table (an object store)")
        check_widening(self.main, operation, self.widenings)

    def _widen(self) -> None:
        """The widenings made, by the commit just before the main table's: delta-spark writes the table
        from then on."""
        from pyspark.sql import SparkSession

        from spark_jobs.delta_tables.widening import widen_on_spark

        widen_on_spark(SparkSession.builder.getOrCreate(), self.main, self.widenings)
        self.writers["main"] = writer_for(self.main.delta(), "append", self.main.uri, spark=True)

    def _create_main(self, schema: pa.Schema) -> bool:
        """The table created by delta-spark with the features the pipeline opted into, if it asks for
        any and there is no table yet (``delta_tables.create``); whether it was created now."""
        if not self.target.table_features.needs_spark or self.main.exists():
            return False
        from pyspark.sql import SparkSession

        return create_on_spark(SparkSession.builder.getOrCreate(), self.main, schema, self.target.table_features)

    def discard(self, reports: list[TaskReport]) -> None:
        # A committed table's files are its rows now.
        self._delete([f for r in reports for f in r.files if f.table not in self.committed])

    def _tables(self) -> list[tuple[TableRole, Table]]:
        tables: list[tuple[TableRole, Table]] = [("main", self.main)]
        return tables + ([("quarantine", self.quarantine)] if self.quarantine else [])

    def _delete(self, files: list[DataFile]) -> None:
        delete_files(self.main.store, files, self.main.uri, self.quarantine.uri if self.quarantine else None)

    def _plan_columns(self) -> None:
        """The tables' columns, before anything is read: the run's (the subjects' for registry
        formats), merged with those of the existing table. json: ``_json_values``, once Spark runs."""
        from pyspark.sql.pandas.types import to_arrow_schema

        from spark_jobs.decode import quarantine_struct
        from spark_jobs.kafka_source import kafka_struct

        source = self.spec.source
        self.read_schema = to_arrow_schema(kafka_struct(source.include_headers), timezone="UTC")
        if self.quarantine is not None:
            self.schemas["quarantine"] = quarantine_struct(self.read_schema)
        if source.value_format == "json":
            return  # its columns need Spark's DDL parser: ``_json_values``, once Spark runs
        if not source.decodes_framed:
            self._plain_columns()
            return
        self.framed = framed = _framed(source, self.spec.egress.policy())
        self.notes = {f"inlet.{s.part}_schema": f"{s.subject} version {s.version} (schema id {s.schema.id})"
                      for s in (framed.value, framed.key) if s is not None}
        self._plan_framed_columns(framed)

    def _plan_framed_columns(self, framed: Framed) -> None:
        """Registry formats: the table's columns, the subjects' merged with the existing table's."""
        assert self.read_schema is not None  # by _plan_columns
        columns = _framed_columns(framed, self.spec.source, self.read_schema)
        if self.protection is not None:  # a dropped field is no column of a new table
            columns = self.protection.without_dropped(columns)
        self.schemas["main"] = self._evolved(columns, framed)

    def _plain_columns(self) -> None:
        """raw, string and json: the table's columns (``decode.decoded_struct``) and the existing table's."""
        from pyspark.sql.types import StructType

        from spark_jobs.decode import decoded_struct
        from spark_jobs.formats import variant

        struct = decoded_struct(self.spec.source)
        if self.protection is not None:  # a dropped field is no column of a new table
            struct = StructType([f for f in struct.fields if f.name not in self.protection.dropped])
        self._evolved(variant.arrow_schema(struct), None)  # the policy's checks; the columns stay in the DDL's order
        for name, data_type in _missing_columns(struct.fieldNames(), self.main):
            struct.add(name, data_type, True)
        self.schemas["main"] = variant.arrow_schema(struct)  # a VARIANT column in delta-rs's order

    def _evolved(self, columns: pa.Schema, framed: Framed | None) -> pa.Schema:
        """The run's ``columns`` merged into the existing table's by the evolution policy, and the
        widenings that takes (``formats.evolution``): checked before anything is read."""
        from spark_jobs.formats.evolution import widenings

        policy, source = self.spec.contract.evolution, self.spec.source
        protobuf = policy == "widen" and "protobuf" in (source.value_format, source.key_format)
        existing = self.main.columns()
        merged = _merged_columns(self.main, existing, columns, framed, "add" if protobuf else policy,
                                 " (Protobuf's types are not widened: a float is not a double on the wire, nor an "
                                 "int32 a sint64)" if protobuf else "")
        self.widenings = widenings(existing, merged) if existing is not None else []
        placing = {*self.main.partition_by, *self.target.table_features.cluster_by}
        if placed := [w.path for w in self.widenings if w.path.split(".")[0].split("[")[0] in placing]:
            raise JobError("schema_incompatible", f"{self.main.uri}: {placed[0]} partitions or clusters the table, and "
                                                  "its type cannot widen: write to a new path")
        if self.widenings and self.target.replace_ranges:
            raise JobError("schema_incompatible", f"{self.main.uri}: a replay cannot widen {self.widenings[0].path}; "
                                                  "let a run widen it first, then replay")
        return merged

    def _json_values(self, context: SparkContext) -> JsonValues:
        """json: the table's columns, and the decoder the tasks read values with, in the time zone
        Spark SQL would read them in (``spark.sql.session.timeZone``, by default the driver JVM's).
        Spark's DDL parser needs the running ``context``."""
        from spark_jobs.decode import json_columns
        from spark_jobs.formats.json_values import JsonValues

        try:
            values = JsonValues(json_columns(self.spec.source.schema_ or ""), session_time_zone(context))
        except TypeError as exc:  # a type json_values does not read (VARIANT)
            raise JobError("invalid_spec", f"schema: {exc}") from None
        except ValueError as exc:  # a zone Spark refuses too
            raise JobError("invalid_spec", f"spark.sql.session.timeZone: {exc}") from None
        self._plain_columns()
        return values


def session_time_zone(context: SparkContext) -> str:
    """The time zone Spark SQL reads times without one in: ``spark.sql.session.timeZone``, by default
    the driver JVM's."""
    zone = context.getConf().get("spark.sql.session.timeZone")
    if not zone:
        assert context._jvm is not None  # a running context's
        zone = context._jvm.java.util.TimeZone.getDefault().getID()
    return str(zone)


def _files_of(reports: list[TaskReport], role: TableRole) -> list[DataFile]:
    return [f for r in reports for f in r.files if f.table == role]


def _framed(source: SourceSpec, egress: EgressPolicy) -> Framed:
    """The subjects this run reads, resolved on the driver once (``resolve``), for every task."""
    from spark_jobs.decode import Framed
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
    return Framed(registry or RegistryConfig(url=""), subjects.get("value"), subjects.get("key"))


def _framed_columns(framed: Framed, source: SourceSpec, read_schema: pa.Schema) -> pa.Schema:
    from spark_jobs.decode import framed_schema

    return framed_schema(read_schema, source.value_format, source.key_format, framed.value, framed.key)


def _merged_columns(table: Table, existing: pa.Schema | None, columns: pa.Schema, framed: Framed | None,
                    policy: Policy, why: str) -> pa.Schema:
    """The run's columns merged into the ``existing`` table's by ``policy`` (``formats.evolution``),
    checked before anything is read: a change the policy refuses fails the run, naming the subject's
    versions (and ``why``)."""
    from spark_jobs.formats.evolution import NewField, TypeChange, merge_schema

    if existing is None:
        return columns
    try:
        return merge_schema(existing, columns, policy)
    except (TypeChange, NewField) as change:
        key = change.path == "key" or change.path.startswith("key.")
        subject = None if framed is None else framed.key if key else framed.value
        written = last_note(table, f"inlet.{subject.part}_schema") if subject else None
        read = subject.describe() if subject else "this run"
        raise JobError("schema_incompatible", f"{read} cannot go into {table.uri}: {change}"
                                              + (f" (last written from {written})" if written else "") + why) from None


def _missing_columns(columns: list[str], table: Table) -> list[tuple[str, DataType]]:
    """The existing table's columns (name, Spark type) that are not in ``columns``."""
    from pyspark.sql.pandas.types import from_arrow_type

    existing = table.columns()
    return [(f.name, from_arrow_type(_plain(f.type))) for f in existing or [] if f.name not in columns]


def _plain(arrow_type: pa.DataType) -> pa.DataType:
    return pa.string() if arrow_type in (pa.large_string(), pa.string_view()) else pa.binary() if arrow_type in (pa.large_binary(), pa.binary_view()) else arrow_type


def _asked(creation: TableCreation) -> str:
    return " and ".join((["deletion vectors"] if creation.deletion_vectors else [])
                        + ([f"clustering by {', '.join(creation.cluster_by)}"] if creation.cluster_by else []))


def spark_may_write(table: Table) -> bool:
    """Whether the run's Spark may commit ``table``: it is on a file system Spark reads without a
    connector. Whether that Spark loads delta-spark is known only once it runs: the commit checks it
    (``merges_on_spark``), before it writes anything into the table."""
    return "://" not in table.uri or table.uri.startswith("file://")
