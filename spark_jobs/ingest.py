"""The spark-submit entry point: one run of one pipeline, from a ``RunSpec`` file to a ``RunResult`` file.

    spark-submit spark_jobs/ingest.py --spec /path/spec.json --result /path/result.json

Exit status 0 when the run succeeded (including "already committed"), 1 when it failed; the result
file is written in both cases whenever the spec could be read. Nothing here logs a secret: the
Kafka client configs are only ever logged redacted.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Protocol, cast

import pyarrow as pa

from spark_jobs.egress import EgressPolicy
from spark_jobs.errors import JobError, classify
from spark_jobs.registry import RegistryConfig
from spark_jobs.spec import (
    REGISTRY_FORMATS,
    DeltaTargetSpec,
    SourceSpec,
    SubjectRef,
    KafkaTargetSpec,
    OffsetRange,
    PartitionResult,
    Ranges,
    RunFailure,
    RunResult,
    RunSpec,
    Timings,
    Txn,
    redact,
    redacted_config,
)

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import DataType

    from spark_jobs.decode import Framed
    from spark_jobs.delta_sink import ReplacePlan
    from spark_jobs.plans import DataFile, PartitionKey, PartitionStats, TableRole, TaskReport

log = logging.getLogger("inlet.ingest")


class Driver(Protocol):
    """Where a run's Spark jobs go: a context of the run's own (spark-submit) or a resident one (the
    warm engine). ``context`` is enough for tasks of plain Python functions; ``session`` adds SQL."""

    def context(self, name: str) -> AbstractContextManager[SparkContext]: ...

    def session(self, name: str) -> AbstractContextManager[SparkSession]: ...


class OneShot:
    """spark-submit's driver: the run's own SparkContext or SparkSession, stopped when the run ends."""

    @contextmanager
    def context(self, name: str) -> Iterator[SparkContext]:
        from pyspark import SparkConf, SparkContext

        # Tasks of plain Python functions need no SQL session: its start costs seconds.
        context = SparkContext.getOrCreate(SparkConf().setAppName(name))
        try:
            yield context
        finally:
            context.stop()

    @contextmanager
    def session(self, name: str) -> Iterator[SparkSession]:
        from pyspark.sql import SparkSession

        spark = SparkSession.builder.appName(name).getOrCreate()
        try:
            yield spark
        finally:
            spark.stop()


class _Run:
    """Counters and timings of one run, turned into a ``RunResult`` at the end."""

    def __init__(self, spec: RunSpec, cancelled: threading.Event | None = None):
        self.spec = spec
        self.cancelled = cancelled or threading.Event()
        self.started_at = datetime.now(timezone.utc)
        self.stats: dict[PartitionKey, PartitionStats] = {}
        self.gaps: dict[PartitionKey, OffsetRange] = {}
        self.rows_written = self.rows_quarantined = 0
        self.bytes_written: int | None = None
        self.delta_version: int | None = None
        self.already_committed = False
        self.session_start_s = self.process_s = self.commit_s = 0.0

    def check_cancelled(self, before: str) -> None:
        """Stop here if the run was cancelled: Spark cancels the jobs it runs, not the steps between them."""
        if self.cancelled.is_set():
            raise JobError("cancelled", f"the run was cancelled before {before}")

    def result(self, error: JobError | None = None) -> RunResult:
        partitions = []
        for topic, ranges in sorted(self.spec.source.ranges.items()):
            for key, (start, end) in sorted(ranges.items(), key=lambda kv: int(kv[0])):
                stats = self.stats.get((topic, int(key)))
                partitions.append(
                    PartitionResult(
                        topic=topic,
                        partition=int(key),
                        start=start,
                        end=end,
                        records_read=stats.records if stats else 0,
                        first_offset=stats.first_offset if stats else None,
                        last_offset=stats.last_offset if stats else None,
                        gap=self.gaps.get((topic, int(key))),
                    )
                )
        secrets = self.spec.secret_values()
        return RunResult(
            run_id=self.spec.run_id,
            status="failed" if error else "succeeded",
            partitions=partitions,
            rows_written=self.rows_written,
            rows_quarantined=self.rows_quarantined,
            bytes_read=sum(s.bytes for s in self.stats.values()),
            bytes_written=self.bytes_written,
            delta_version=self.delta_version,
            already_committed=self.already_committed,
            timings=Timings(
                started_at=self.started_at,
                finished_at=datetime.now(timezone.utc),
                session_start_s=round(self.session_start_s, 3),
                process_s=round(self.process_s, 3),
                commit_s=round(self.commit_s, 3),
            ),
            error=RunFailure(kind=error.kind, message=redact(error.message, secrets), topic=error.topic, partition=error.partition)
            if error
            else None,
        )


@dataclass(frozen=True)
class DeltaCommit:
    """What a run commits to Delta: its tasks' files, the schemas to commit them with, replace mode's removes."""

    target: DeltaTargetSpec
    txn: Txn
    reports: list[TaskReport]
    main_schema: pa.Schema
    quarantine_schema: pa.Schema | None  # None: nothing is committed to a quarantine table
    replace: ReplacePlan
    notes: dict[str, str] = field(default_factory=dict)  # commit metadata of the main table

    @property
    def files(self) -> list[DataFile]:
        return [f for r in self.reports for f in r.files]

    def files_of(self, table: TableRole) -> list[DataFile]:
        return [f for f in self.files if f.table == table]


def run(spec: RunSpec, driver: Driver, scratch: str, state: _Run) -> None:
    from spark_jobs import delta_sink
    from spark_jobs.kafka_source import check_watermarks

    target = spec.target
    if isinstance(target, DeltaTargetSpec) and delta_sink.already_committed(target.store, target.uri, spec.txn):
        log.info("txn %s v%d is already in %s: nothing to do", spec.txn.app_id, spec.txn.version, target.uri)
        state.already_committed = True
        return

    # Cheap checks before paying for a Spark session.
    group_id = f"inlet-pipeline-{spec.pipeline_id}"
    readable, gaps = check_watermarks(spec.source, group_id, spec.egress.policy())
    state.gaps = {(g.topic, g.partition): (g.start, g.end) for g in gaps}
    for gap in gaps:
        log.warning("data loss skipped: %s[%d] offsets [%d, %d) no longer exist", gap.topic, gap.partition, gap.start, gap.end)

    state.check_cancelled("reading")
    began = time.monotonic()
    name = f"inlet-{spec.pipeline_id}-{spec.run_id}"
    if isinstance(target, DeltaTargetSpec) and spec.writes_directly:
        with driver.context(name) as context:
            state.session_start_s = time.monotonic() - began
            _to_delta_direct(context, spec, target, readable, group_id, state)
        return
    with driver.session(name) as spark:
        state.session_start_s = time.monotonic() - began
        records = _read(spark, spec, readable, group_id, scratch)
        if isinstance(target, DeltaTargetSpec):
            _to_delta(spark, spec, target, records, scratch, state)
        else:
            _to_kafka(spec, target, records, scratch, state)


def _to_delta_direct(
    context: SparkContext, spec: RunSpec, target: DeltaTargetSpec, readable: Ranges, group_id: str, state: _Run
) -> None:
    from pyspark.sql.pandas.types import to_arrow_schema

    from spark_jobs import delta_sink, direct_write
    from spark_jobs.decode import decoded_struct
    from spark_jobs.kafka_source import chunk_ranges, consumer_config, kafka_struct

    source = spec.source
    read_schema = to_arrow_schema(kafka_struct(source.include_headers), timezone="UTC")
    framed = _framed(source, read_schema, spec.egress.policy()) if source.decodes_framed else None
    if framed is None:
        struct = decoded_struct(source)
        for name, data_type in _missing_table_columns(struct.fieldNames(), target):
            struct.add(name, data_type, True)
        schema = to_arrow_schema(struct, timezone="UTC")
    else:
        schema = _table_schema(target, framed_columns(framed, source, read_schema), framed)

    replace = delta_sink.ReplacePlan()
    if target.replace_ranges:
        delta_sink.plan_replace(target.store, "main", target.uri, target.replace_ranges, replace)
        if framed is not None and target.quarantine_uri:
            delta_sink.plan_replace(target.store, "quarantine", target.quarantine_uri, target.replace_ranges, replace)
        log.info("replace: removing %d files, rewriting %d partially replaced ones",
                 sum(len(r) for r in replace.remove.values()), len(replace.rewrite))
    chunks = chunk_ranges(readable, source.max_records_per_task)
    groups = direct_write.pack_chunks(chunks, source.max_records_per_task, context.defaultParallelism)
    units = [direct_write.WriteUnit(chunks=g) for g in groups] + [direct_write.WriteUnit(rewrite=f) for f in replace.rewrite]
    plan = direct_write.DirectWritePlan(
        uri=target.uri,
        partition_by=target.partition_by,
        token=uuid.uuid4().hex[:12],
        schema=schema,
        read_schema=read_schema,
        consumer_config=consumer_config(source.kafka_config, group_id, spec.egress.policy()),
        stall_timeout_s=source.stall_timeout_s,
        value_format=source.value_format,
        run_id=spec.run_id,
        replace_ranges=target.replace_ranges or {},
        store=target.store,
        framed=framed,
        quarantine_uri=target.quarantine_uri if framed is not None else None,
    )
    log.info("reading %d chunks of %d partitions in %d tasks, rewriting %d files", len(chunks), sum(len(p) for p in readable.values()), len(groups), len(replace.rewrite))
    began = time.monotonic()
    reports = direct_write.run_units(context, plan, units)
    state.process_s = time.monotonic() - began
    _merge_reports(reports, state)
    quarantine = framed.quarantine_schema if framed is not None and target.quarantine_uri else None
    notes = {f"inlet.{s.part}_schema": f"{s.subject} version {s.version} (schema id {s.schema.id})"
             for s in (framed.value, framed.key) if s is not None} if framed is not None else {}
    _commit_delta(DeltaCommit(target, spec.txn, reports, schema, quarantine, replace, notes), state)


def _framed(source: SourceSpec, read_schema: pa.Schema, egress: EgressPolicy) -> Framed:
    """The subjects this run reads, resolved on the driver once (``resolve``), for every task."""
    from spark_jobs.decode import Framed, quarantine_struct
    from spark_jobs.formats.wire import Part, RegistryFormat, SubjectSchema, resolve

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


def framed_columns(framed: Framed, source: SourceSpec, read_schema: pa.Schema) -> pa.Schema:
    from spark_jobs.decode import framed_schema

    return framed_schema(read_schema, source.value_format, source.key_format, framed.value, framed.key)


def _table_schema(target: DeltaTargetSpec, columns: pa.Schema, framed: Framed) -> pa.Schema:
    """The run's columns merged into the existing table's (``formats.evolution``), checked before
    anything is read: a field whose type changed fails the run, naming the subject's versions."""
    from spark_jobs.delta_sink import last_note
    from spark_jobs.formats.evolution import TypeChange, merge_schema

    if not target.store.is_delta_table(target.uri):
        return columns
    table = pa.schema(target.store.delta_table(target.uri).schema().to_arrow())
    try:
        return merge_schema(table, columns)
    except TypeChange as change:
        subject = framed.key if change.path == "key" or change.path.startswith("key.") else framed.value
        written = last_note(target.store, target.uri, f"inlet.{subject.part}_schema") if subject else None
        read = subject.describe() if subject else "this run"
        raise JobError("schema_incompatible", f"{read} cannot go into {target.uri}: {change}"
                                              + (f" (last written from {written})" if written else "")) from None


def _read(spark: SparkSession, spec: RunSpec, readable: Ranges, group_id: str, scratch: str) -> DataFrame:
    from spark_jobs.kafka_source import InletKafkaDataSource, ReadPlan, chunk_ranges, consumer_config
    from spark_jobs.plans import write_plan

    source = spec.source
    spark.dataSource.register(InletKafkaDataSource)
    chunks = chunk_ranges(readable, source.max_records_per_task)
    plan = write_plan(
        os.path.join(scratch, "read-plan.pickle"),
        ReadPlan(consumer_config(source.kafka_config, group_id, spec.egress.policy()), tuple(chunks), source.stall_timeout_s),
    )
    log.info("reading %d chunks of %d partitions", len(chunks), sum(len(p) for p in readable.values()))
    return (
        spark.read.format("inlet_kafka")
        .option("plan", plan)
        .option("include_headers", str(source.include_headers).lower())
        .load()
    )


def _to_delta(spark: SparkSession, spec: RunSpec, target: DeltaTargetSpec, records: DataFrame, scratch: str, state: _Run) -> None:
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import to_arrow_schema

    from spark_jobs import delta_sink
    from spark_jobs.columns import QUARANTINE_REASON
    from spark_jobs.decode import decode
    from spark_jobs.plans import read_reports, write_plan

    rows = decode(records, spec.source, spec.run_id)
    rows = _with_table_columns(rows, target)

    replace = delta_sink.ReplacePlan()
    if target.replace_ranges:
        delta_sink.plan_replace(target.store, "main", target.uri, target.replace_ranges, replace)
        if target.quarantine_uri:
            delta_sink.plan_replace(target.store, "quarantine", target.quarantine_uri, target.replace_ranges, replace)
        log.info(
            "replace: removing %d files, rewriting %d partially replaced ones",
            sum(len(r) for r in replace.remove.values()),
            len(replace.rewrite),
        )
        if replace.rewrite:
            rows = rows.withColumn(delta_sink.CARRIED, F.lit(None).cast("boolean"))
            rewrite = delta_sink.RewritePlan(tuple(replace.rewrite), target.replace_ranges, target.store)
            rewrite_path = write_plan(os.path.join(scratch, "rewrite-plan.pickle"), rewrite)
            spark.dataSource.register(delta_sink.InletDeltaRewriteDataSource)
            carried = spark.read.format("inlet_delta_rewrite").schema(rows.schema).option("plan", rewrite_path).load()
            rows = rows.unionByName(carried)

    writer_schema = to_arrow_schema(rows.schema, timezone="UTC")
    main_schema = pa.schema([f for f in writer_schema if f.name not in delta_sink.INTERNAL])
    has_quarantine = QUARANTINE_REASON in rows.columns

    began = time.monotonic()
    plan = delta_sink.DeltaWritePlan(
        uri=target.uri,
        quarantine_uri=target.quarantine_uri if has_quarantine else None,
        partition_by=target.partition_by,
        manifest=os.path.join(scratch, "manifest.pickle"),
        store=target.store,
    )
    spark.dataSource.register(delta_sink.InletDeltaDataSource)
    rows.write.format("inlet_delta").mode("append").option("plan", write_plan(os.path.join(scratch, "write-plan.pickle"), plan)).save()
    state.process_s = time.monotonic() - began

    reports = read_reports(plan.manifest)
    _merge_reports(reports, state)
    q_schema = delta_sink.quarantine_schema(writer_schema) if has_quarantine and target.quarantine_uri else None
    _commit_delta(DeltaCommit(target, spec.txn, reports, main_schema, q_schema, replace), state)


def _commit_delta(commit: DeltaCommit, state: _Run) -> None:
    """The reported files (and replace mode's removes) as one Delta commit per table, tagged with the txn."""
    from spark_jobs import delta_sink

    target, txn = commit.target, commit.txn
    main_files, quarantine_files = commit.files_of("main"), commit.files_of("quarantine")
    began = time.monotonic()
    q_committed = False
    try:
        state.check_cancelled("its Delta commit")
        # Quarantine first: if the main commit then fails, the retry skips the quarantine by its txn.
        if commit.quarantine_schema is not None and target.quarantine_uri:
            q_version = delta_sink.commit_files(
                target.store,
                target.quarantine_uri,
                quarantine_files,
                commit.quarantine_schema,
                [],
                txn,
                commit.replace.remove["quarantine"],
            )
            if q_version is None:
                delta_sink.delete_files(target.store, quarantine_files, target.uri, target.quarantine_uri)
            q_committed = q_version is not None
        state.delta_version = delta_sink.commit_files(
            target.store, target.uri, main_files, commit.main_schema, target.partition_by, txn, commit.replace.remove["main"],
            commit.notes,
        )
    except BaseException:
        delta_sink.delete_files(target.store, commit.files, target.uri, target.quarantine_uri)
        raise
    state.commit_s = time.monotonic() - began
    if state.delta_version is None:  # a concurrent duplicate of this run committed first
        delta_sink.delete_files(target.store, main_files, target.uri, target.quarantine_uri)
        state.already_committed = True
        state.stats = {}
        return
    # Counted from the Kafka records, not the files: replace mode also rewrites older rows.
    state.rows_quarantined = sum(r.quarantined for r in commit.reports)
    state.rows_written = sum(s.records for s in state.stats.values()) - state.rows_quarantined
    state.bytes_written = sum(f.size for f in main_files) + (sum(f.size for f in quarantine_files) if q_committed else 0)


def _to_kafka(spec: RunSpec, target: KafkaTargetSpec, records: DataFrame, scratch: str, state: _Run) -> None:
    from spark_jobs.kafka_sink import InletKafkaSinkDataSource, KafkaSinkPlan
    from spark_jobs.oauth import job_client_config
    from spark_jobs.plans import read_reports, write_plan

    plan = KafkaSinkPlan(
        kafka_config=job_client_config(target.kafka_config, spec.egress.policy()),
        topic=target.topic,
        run_id=spec.run_id,
        manifest=os.path.join(scratch, "manifest.pickle"),
    )
    records.sparkSession.dataSource.register(InletKafkaSinkDataSource)
    began = time.monotonic()
    records.write.format("inlet_kafka_sink").mode("append").option("plan", write_plan(os.path.join(scratch, "sink-plan.pickle"), plan)).save()
    state.process_s = time.monotonic() - began
    _merge_reports(read_reports(plan.manifest), state)
    state.rows_written = sum(s.records for s in state.stats.values())


def _with_table_columns(rows: DataFrame, target: DeltaTargetSpec) -> DataFrame:
    """Carry the existing table's columns that this run lacks, as nulls, so rewrites keep them."""
    from pyspark.sql import functions as F

    for name, data_type in _missing_table_columns(rows.columns, target):
        rows = rows.withColumn(name, F.lit(None).cast(data_type))
    return rows


def _missing_table_columns(columns: list[str], target: DeltaTargetSpec) -> list[tuple[str, DataType]]:
    """The existing table's columns (name, Spark type) that are not in ``columns``."""
    from pyspark.sql.pandas.types import from_arrow_type

    if not target.store.is_delta_table(target.uri):
        return []
    fields = pa.schema(target.store.delta_table(target.uri).schema().to_arrow())
    return [(f.name, from_arrow_type(_plain(f.type))) for f in fields if f.name not in columns]


def _plain(arrow_type: pa.DataType) -> pa.DataType:
    return pa.string() if arrow_type in (pa.large_string(), pa.string_view()) else pa.binary() if arrow_type in (pa.large_binary(), pa.binary_view()) else arrow_type


def _merge_reports(reports: list[TaskReport], state: _Run) -> None:
    from spark_jobs.plans import PartitionStats

    for report in reports:
        for key, stats in report.partitions.items():
            total = state.stats.setdefault(key, PartitionStats())
            total.merge(stats.records, stats.first_offset, stats.last_offset, stats.bytes)


def _failed_without_spec(run_id: str, message: str) -> RunResult:
    now = datetime.now(timezone.utc)
    return RunResult(
        run_id=run_id, status="failed", timings=Timings(started_at=now, finished_at=now), error=RunFailure(kind="invalid_spec", message=message)
    )


def failed_before_start(spec: RunSpec, exc: BaseException) -> RunResult:
    """The result of a run that failed before its first step: nothing was read or written."""
    return _Run(spec).result(classify(exc))


def _write_result(path: str, result: RunResult) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        f.write(result.to_json())
    os.replace(tmp, path)  # the launcher never sees a half-written result


def execute(spec: RunSpec, driver: Driver, cancelled: threading.Event | None = None) -> RunResult:
    """Run ``spec`` on ``driver`` to its result: every failure, a cancel included, ends in a failed one."""
    log.info(
        "run %s of pipeline %s: source %s, target %s",
        spec.run_id,
        spec.pipeline_id,
        json.dumps({**spec.source.model_dump(by_alias=True), "kafka_config": redacted_config(spec.source.kafka_config),
                    "registry": redacted_config(spec.source.registry.model_dump()) if spec.source.registry else None}),
        json.dumps(
            {**spec.target.model_dump(), "kafka_config": redacted_config(spec.target.kafka_config)}
            if isinstance(spec.target, KafkaTargetSpec)
            else {**spec.target.model_dump(), "storage_options": redacted_config(spec.target.storage_options)}
        ),
    )
    scratch = tempfile.mkdtemp(prefix="inlet-run-")
    state = _Run(spec, cancelled)
    try:
        run(spec, driver, scratch, state)
        return state.result()
    except BaseException as exc:  # noqa: BLE001 - every failure must end in a result
        error = classify(exc)
        log.error("run %s failed: %s: %s", spec.run_id, error.kind, redact(error.message, spec.secret_values()))
        if error.kind == "internal":  # unforeseen: the whole story, for whoever reads the run's log
            log.error("%s", redact(f"{type(exc).__name__}: {exc}", spec.secret_values()))
        return state.result(error)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def parse_spec(raw: bytes) -> RunSpec | RunResult:
    """The spec in ``raw``, or the failed result of a spec that is not valid."""
    try:
        return RunSpec.from_json(raw)
    except ValueError as exc:
        try:
            run_id = str(json.loads(raw).get("run_id", "unknown"))
        except (ValueError, AttributeError):
            run_id = "unknown"
        # pydantic's message quotes input values; only the locations and reasons are safe to keep.
        reasons = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in getattr(exc, "errors", lambda: [])()) or "not JSON"
        return _failed_without_spec(run_id, f"invalid spec: {reasons}")


def configure_logging() -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", required=True)
    parser.add_argument("--result", required=True)
    args = parser.parse_args(argv)
    configure_logging()
    with open(args.spec, "rb") as f:
        spec = parse_spec(f.read())
    result = spec if isinstance(spec, RunResult) else execute(spec, OneShot())
    _write_result(args.result, result)
    return 0 if result.status == "succeeded" else 1


if __name__ == "__main__":
    sys.exit(main())
