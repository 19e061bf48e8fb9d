"""Pipelines as the API takes and shows them: a Kafka source, a target, a schedule, a state.

What a client writes reads back the same; values the server computes live apart, under ``status``.
"""

from __future__ import annotations

import re
import uuid
from datetime import datetime
from typing import Annotated, Literal

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    StrictInt,
    field_validator,
    model_serializer,
    model_validator,
)

from api.core.errors import field_error
from api.pipelines.as_written import AsWritten
from api.pipelines.contract import NO_CONTRACT, PipelineContract, check_contract
from api.pipelines.ddl import ddl_columns, ddl_field_names
from api.pipelines.delta_features import DeltaTableFeatures, check_table_features
from api.pipelines.maintenance_policy import MaintenancePolicy
from api.pipelines.schedules import Schedule
from api.pipelines.table_health import TableHealthSnapshot
from api.pipelines.topic_patterns import compile_topic_pattern
from spark_jobs.public import INLET_PREFIX, RESERVED_COLUMNS, WHOLE_VALUE, inlet_named, reserved_in

TOPIC_PATTERN = r"^[A-Za-z0-9._-]{1,249}$"
TopicName = Annotated[str, Field(pattern=TOPIC_PATTERN, description="A Kafka topic name")]
ColumnName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")]
PipelineState = Literal["active", "paused"]


def _check_topic(name: str) -> str:
    if name in {".", ".."}:
        raise ValueError("'.' and '..' are not legal topic names")
    return name


ValueFormat = Literal["raw", "string", "json", "avro", "protobuf", "json_schema"]
KeyFormat = Literal["raw", "string", "avro", "protobuf", "json_schema"]
REGISTRY_FORMATS = frozenset({"avro", "protobuf", "json_schema"})
# Where never-read partitions start: earliest, latest, or Spark's startingOffsets JSON per partition.
StartingOffsets = Literal["earliest", "latest"] | dict[TopicName, dict[str, int]]


class RegistrySchema(AsWritten):
    """Which schema of the connection's schema registry gives the columns of a registry format."""

    model_config = ConfigDict(extra="forbid")

    subject: str | None = Field(default=None, min_length=1, max_length=255,
                                description="Default: <topic>-value (<topic>-key for keys), for a pipeline of one topic")
    version: StrictInt | Literal["latest"] = Field(
        default="latest",
        description="latest: each run reads the subject's newest version and evolves the table to it; "
                    "a number pins that version (records of other versions are read as it)")

    @field_validator("version")
    @classmethod
    def _version(cls, version: int | str) -> int | str:
        if isinstance(version, int) and version < 1:
            raise ValueError("a schema version is a number from 1, or latest")
        return version


class KafkaSource(AsWritten):
    model_config = ConfigDict(extra="forbid")

    connection_id: uuid.UUID
    topics: list[TopicName] | None = Field(default=None, min_length=1, max_length=100)
    topic_pattern: str | None = Field(default=None, min_length=1, max_length=1000,
                                      description="A regex; topics matching it are resolved at each run")
    starting_offsets: StartingOffsets = Field(
        default="earliest",
        description="Where partitions never read before start: earliest, latest, or per-partition offsets "
                    "as Spark's startingOffsets JSON (-2 earliest, -1 latest)",
    )
    starting_timestamp: AwareDatetime | None = Field(
        default=None,
        description="Where partitions never read before start instead: the first record at or after this time "
                    "(Spark's startingOffsetsByTimestamp), resolved by the broker on the first plan",
    )
    starting_timestamp_strategy: Literal["error", "latest"] = Field(
        default="error",
        description="A partition with no record at or after starting_timestamp: fail the plan, or start at latest",
    )
    max_offsets_per_run: int | None = Field(default=None, ge=1, le=10**12,
                                            description="Cap of records per run, split over partitions by backlog")
    commit_to_group: str | None = Field(
        default=None, min_length=1, max_length=249, pattern=r"^[A-Za-z0-9._-]+$",
        description="A Kafka consumer group to which Inlet copies the committed offsets after every change, so "
                    "kafka-consumer-groups.sh, Burrow or kafka-ui show the pipeline's lag. Inlet never joins the "
                    "group; its own offsets stay the source of truth",
    )
    value_format: ValueFormat = Field(
        default="raw",
        description="avro, protobuf and json_schema: the Confluent wire format, with schemas from the connection's "
                    "schema registry; the table's columns are the subject's fields")
    schema_: str | None = Field(default=None, alias="schema", max_length=65_536,
                                description="Spark DDL of the value, for value_format json")
    value_schema: RegistrySchema | None = Field(default=None, description="The value's subject and version, for registry formats")
    key_format: KeyFormat | None = Field(
        default=None, description="Default: raw keys for raw values, strings otherwise; a registry format decodes the "
                                  "key into a struct column key")
    key_schema: RegistrySchema | None = Field(default=None, description="The key's subject and version, for registry formats")
    include_headers: bool = False
    on_data_loss: Literal["fail", "skip"] = "fail"

    @field_validator("topics")
    @classmethod
    def _topics(cls, topics: list[str] | None) -> list[str] | None:
        if topics is not None:
            for topic in topics:
                _check_topic(topic)
            if len(set(topics)) != len(topics):
                raise ValueError("topics must not repeat")
        return topics

    @field_validator("topic_pattern")
    @classmethod
    def _pattern(cls, pattern: str | None) -> str | None:
        if pattern is not None:
            compile_topic_pattern(pattern)
        return pattern

    @field_validator("starting_offsets")
    @classmethod
    def _starting(cls, value: object) -> object:
        if isinstance(value, dict):
            if not value or len(value) > 100:
                raise ValueError("starting_offsets names 1 to 100 topics")
            for topic, partitions in value.items():
                _check_topic(topic)
                for partition, offset in partitions.items():
                    if not partition.isdigit() or int(partition) > 1_000_000:
                        raise ValueError(f"{topic}: partition {partition!r} is not a partition number")
                    if offset < -2:
                        raise ValueError(f"{topic}[{partition}]: offset must be >= 0, or -2 (earliest) / -1 (latest)")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> KafkaSource:
        if (self.topics is None) == (self.topic_pattern is None):
            raise field_error("topics", "give exactly one of topics or topic_pattern")
        if self.value_format == "json":
            if not self.schema_:
                raise field_error("schema", "value_format json needs a schema (Spark DDL)")
            try:
                columns = ddl_columns(self.schema_)
            except ValueError as exc:
                raise field_error("schema", f"schema: {exc}") from None
            # ``value VARIANT``: the record's whole value, in the column Spark's Kafka source names so.
            whole = {WHOLE_VALUE} & columns.variants
            if clashes := [c for c in reserved_in(columns.names) if c not in whole]:
                reserved = ", ".join(sorted(RESERVED_COLUMNS))
                raise field_error("schema", f"schema: fields {', '.join(clashes)} clash with the columns Inlet writes "
                                            f"beside the decoded ones ({reserved}, and every name starting with "
                                            f"{INLET_PREFIX}); rename them")
        elif self.schema_ is not None:
            raise field_error("schema", "schema is only used with value_format json")
        if self.key_format is not None and self.value_format == "json":
            raise field_error("key_format", "key_format is not used with value_format json, whose keys are strings")
        for part, fmt, chosen in (("value", self.value_format, self.value_schema), ("key", self.key_format, self.key_schema)):
            if fmt in REGISTRY_FORMATS:
                if (chosen is None or chosen.subject is None) and (self.topics is None or len(self.topics) != 1):
                    raise field_error(f"{part}_schema.subject", f"{part}_schema.subject: name the subject of the "
                                      f"{part}s; the default (<topic>-{part}) needs a pipeline of exactly one topic")
            elif chosen is not None:
                raise field_error(f"{part}_schema",
                                  f"{part}_schema is only used with {part}_format avro, protobuf or json_schema")
        if self.starting_timestamp is not None and self.starting_offsets != "earliest":
            raise field_error("starting_timestamp", "give starting_offsets or starting_timestamp, not both")
        if isinstance(self.starting_offsets, dict) and self.topics is not None:
            unknown = sorted(set(self.starting_offsets) - set(self.topics))
            if unknown:
                raise field_error("starting_offsets",
                                  f"starting_offsets names topics the pipeline does not read: {', '.join(unknown)}")
        return self


def registry_subject(source: KafkaSource, part: Literal["value", "key"]) -> tuple[str, int | Literal["latest"]] | None:
    """The (subject, version) a registry format of ``part`` reads, or None for other formats."""
    fmt, chosen = (source.value_format, source.value_schema) if part == "value" else (source.key_format, source.key_schema)
    if fmt not in REGISTRY_FORMATS:
        return None
    chosen = chosen or RegistrySchema()
    # Without a subject the pipeline reads exactly one topic (validated).
    return chosen.subject or f"{(source.topics or [''])[0]}-{part}", chosen.version


# A Delta target's settings of a keyed table (mode upsert; docs/keyed-tables.md).
KEYED_TABLE = ("mode", "key", "key_from", "sequence_by", "changes", "scd_type", "deletes")


class DeltaTarget(AsWritten):
    model_config = ConfigDict(extra="forbid")

    type: Literal["delta"]
    path: str = Field(min_length=1, max_length=512, description="Relative to the tenant's storage root")
    partition_by: list[ColumnName] = Field(default_factory=list, max_length=8)
    maintenance: MaintenancePolicy = Field(
        default_factory=MaintenancePolicy,
        description="Table maintenance: compaction, vacuum, checkpoints; on with its defaults when left out "
                    "(docs/maintenance.md). The table's health: status.table here, GET /pipelines/{id}/maintenance")
    table_features: DeltaTableFeatures = Field(
        default_factory=DeltaTableFeatures,
        description="The Delta features Inlet creates the table with, through delta-spark: deletion vectors, "
                    "liquid clustering (docs/maintenance.md). A table that exists keeps its own")
    mode: Literal["append", "upsert"] = Field(
        default="append",
        description="append: every record a row. upsert: a keyed table, the latest change per key or every version "
                    "(scd_type; json values, or avro, protobuf, json_schema through the registry; "
                    "docs/keyed-tables.md)")
    key: list[ColumnName] | None = Field(default=None, min_length=1, max_length=16,
                                         description="upsert: the columns that identify a row (see key_from)")
    key_from: Literal["value", "kafka_key"] = Field(
        default="value",
        description="upsert: value: the key columns are fields of the value. kafka_key: the record's Kafka key "
                    "(UTF-8 text) is the row's identity, in the one key column, which the value does not hold; a "
                    "tombstone deletes it (changes rows; without sequence_by: a tombstone has no sequence)")
    sequence_by: str | None = Field(
        default=None, max_length=512, pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$",
        examples=["source.lsn"],
        description="upsert: the value field (dotted; the envelope's for debezium) that orders a key's changes, an "
                    "integer, timestamp or date; default: the Kafka offset, for keys that stay in one partition")
    changes: Literal["rows", "debezium"] = Field(
        default="rows",
        description="upsert: rows: a value is the row, a tombstone deletes its key; debezium: a value is a Debezium "
                    "envelope (before/after/op/source), op d deletes")
    scd_type: Literal[1, 2] = Field(
        default=1,
        description="upsert: 1: the table holds the latest change per key. 2: it keeps every version of a key, valid "
                    "from its sequence to the key's next (_inlet_valid_from, _inlet_valid_to, _inlet_current), as "
                    "Databricks' STORED AS SCD TYPE 2 (docs/keyed-tables.md)")
    deletes: Literal["mark", "soft"] = Field(
        default="mark",
        description="upsert, scd_type 1: what a delete leaves of its key's row. mark: the key alone, its other columns "
                    "null, _inlet_deleted true. soft: the row as the key's last change set it, _inlet_deleted true and "
                    "_inlet_deleted_at the delete record's Kafka timestamp (docs/keyed-tables.md)")

    @model_validator(mode="after")
    def _keyed(self) -> DeltaTarget:
        if self.mode == "upsert" and not self.key:
            raise field_error("key", "mode upsert needs key: the columns that identify a row")
        if self.mode == "append":
            for name in KEYED_TABLE[1:]:
                if name in self.model_fields_set:
                    raise field_error(name, f"{name} is only used with mode upsert")
        if self.deletes == "soft" and self.scd_type == 2:
            raise field_error("deletes", "a delete that keeps its row's values goes with scd_type 1: an SCD type 2 "
                                         "table keeps a delete as a version of its own")
        if self.key and len(set(self.key)) != len(self.key):
            raise field_error("key", "key columns must not repeat")
        if self.key_from == "kafka_key" and self.key is not None and len(self.key) != 1:
            raise field_error("key", "a key taken from the Kafka key is one column: the key's text")
        if self.key_from == "kafka_key" and self.changes == "debezium":
            raise field_error("key_from", "a Debezium envelope holds its row's key: the Kafka key is taken with changes rows only")
        check_table_features(self)
        return self


class TopicCreation(AsWritten):
    """How Inlet creates a Kafka target's topic that does not exist (the admin API's CreateTopics)."""

    model_config = ConfigDict(extra="forbid")

    partitions: int = Field(ge=1, le=10_000)
    replication_factor: int = Field(default=-1, ge=-1, le=32, description="-1: the broker's default.replication.factor")
    config: dict[str, str] = Field(default_factory=dict, max_length=50, examples=[{"retention.ms": "604800000"}],
                                   description="Topic configs, e.g. retention.ms or cleanup.policy")

    @field_validator("config")
    @classmethod
    def _config(cls, value: dict[str, str]) -> dict[str, str]:
        for name, setting in value.items():
            if not re.fullmatch(r"[a-z][a-z0-9.]{0,127}", name):
                raise ValueError("config names are Kafka topic config names, like retention.ms")
            if len(setting) > 1024:
                raise ValueError(f"config {name}: at most 1024 characters")
        return value


class KafkaTarget(AsWritten):
    model_config = ConfigDict(extra="forbid")

    type: Literal["kafka"]
    connection_id: uuid.UUID
    topic: TopicName
    create_topic: TopicCreation | None = Field(
        default=None, description="Create the topic like this if it does not exist; without it a missing topic fails the run")

    @field_validator("topic")
    @classmethod
    def _topic(cls, topic: str) -> str:
        return _check_topic(topic)


Target = Annotated[DeltaTarget | KafkaTarget, Field(discriminator="type")]


class PipelineSpec(BaseModel):
    """The writable shape of a pipeline (POST, PUT; PATCH merges into it)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    source: KafkaSource
    target: Target
    schedule: Schedule | None = None
    state: PipelineState = "active"
    contract: PipelineContract | None = Field(
        default=None, description="What the pipeline's rows must be: expectations on each decoded row (docs/contracts.md)")

    @model_validator(mode="after")
    def _contract(self) -> PipelineSpec:
        source, target = self.source, self.target
        fields = ddl_field_names(source.schema_ or "") if source.value_format == "json" else []
        identifying: list[str] = []
        if isinstance(target, DeltaTarget):
            if target.key_from == "kafka_key":
                fields += target.key or []
            identifying = [*(target.key or []), *target.partition_by, *target.table_features.cluster_by]
        if (self.contract and self.contract.sensitive and source.value_format == "json"
                and WHOLE_VALUE in ddl_columns(source.schema_ or "").variants):
            raise field_error("contract.sensitive", "sensitive fields are protected in the decoded columns, and the "
                                                    "whole value kept as a VARIANT (value VARIANT) keeps them as they "
                                                    "came: drop one of the two")
        check_contract(self.contract or NO_CONTRACT, decodes=source.value_format not in ("raw", "string"),
                       delta=isinstance(target, DeltaTarget),
                       keyed=isinstance(target, DeltaTarget) and target.mode == "upsert",
                       columns=[*RESERVED_COLUMNS, *fields] if source.value_format == "json" else None,
                       protected=["key", *fields], identifying=identifying)
        return self

    @model_validator(mode="after")
    def _clustered_columns(self) -> PipelineSpec:
        target, source = self.target, self.source
        if not isinstance(target, DeltaTarget) or source.value_format not in ("raw", "string", "json"):
            return self  # a registry format's columns are known to its runs, which check them
        names = RESERVED_COLUMNS | set(ddl_field_names(source.schema_ or "") if source.value_format == "json" else ())
        if unknown := [c for c in target.table_features.cluster_by if c not in names]:
            raise field_error("target.table_features.cluster_by", f"not columns of the table: {', '.join(unknown)}")
        variants = ddl_columns(source.schema_ or "").variants if source.value_format == "json" else frozenset()
        for at, chosen in (("target.partition_by", target.partition_by), ("target.table_features.cluster_by",
                                                                          target.table_features.cluster_by)):
            if shapeless := [c for c in chosen if c in variants]:
                raise field_error(at, f"VARIANT columns have no value to partition or cluster by: {', '.join(shapeless)}")
        return self

    @model_validator(mode="after")
    def _keyed_target(self) -> PipelineSpec:
        target, source = self.target, self.source
        if not isinstance(target, DeltaTarget) or target.mode != "upsert":
            return self
        if source.value_format not in ("json", *REGISTRY_FORMATS):
            raise field_error("target.mode", "a keyed table reads json values or a registry format's (avro, protobuf, "
                                             "json_schema), whose schema has its columns")
        root = (target.sequence_by or "").split(".")[0]
        if target.changes == "debezium" and root in ("before", "after", "op", "payload"):
            raise field_error("target.sequence_by", "sequence_by names a field of the envelope's source or ts_ms "
                                                    "(source.lsn, ts_ms), not of before, after, op or payload")
        if target.key_from == "kafka_key":
            if source.key_format in REGISTRY_FORMATS:
                raise field_error("target.key_from", "a key taken from the Kafka key is its UTF-8 text: leave "
                                                     "key_format unset or string, not a registry format")
            if inlet_named(target.key or []):
                raise field_error("target.key", f"the key column holds the Kafka key: name it apart from Inlet's "
                                                f"columns ({INLET_PREFIX}…)")
        if source.value_format == "json" and ddl_columns(source.schema_ or "").holds_variant:
            raise field_error("source.schema", "a keyed table's MERGE does not carry VARIANT values: land them in an "
                                               "append table (mode append), or read the field as STRING")
        if source.value_format != "json":
            # The registry's schema is read by each run, which checks the key, sequence_by and partition_by
            # fields against it (invalid_spec naming the field); here only what needs no schema.
            return self
        names = ddl_field_names(source.schema_ or "")  # checked by the source's validator (no _inlet_ names)
        if target.changes == "rows" and target.sequence_by and root not in names:
            raise field_error("target.sequence_by", "sequence_by: its first name is not a field of source.schema")
        if target.key_from == "kafka_key":
            column = (target.key or [""])[0]
            if column.lower() in {name.lower() for name in names}:
                raise field_error("target.key", "the key column holds the Kafka key: name it apart from "
                                                "source.schema's fields (in any case)")
            names = [column, *names]
        elif missing := [k for k in target.key or [] if k not in names]:
            raise field_error("target.key", f"{len(missing)} key column(s) are not fields of source.schema")
        if missing := [c for c in target.partition_by if c not in names]:
            raise field_error("target.partition_by", "a keyed table is partitioned by fields of source.schema")
        return self


class ConsumerGroupMirror(BaseModel):
    group: str
    state: Literal["ok", "failed"]
    partitions: int = Field(description="Partitions whose offsets were copied")
    error: str | None = Field(description="Why the last copy failed; it is retried with backoff")
    attempts: int = Field(description="Copies tried since the last success")
    at: datetime


class Freshness(BaseModel):
    """How old the newest committed record is, at the pipeline's worst partition (GET
    /pipelines/{id}/offsets has each partition's)."""

    newest_record_at: datetime | None = Field(description="The oldest of the partitions' newest committed records' "
                                                          "Kafka timestamps, as the last commit left them; null "
                                                          "until a run read a record")
    age_s: float | None = Field(description="Seconds from newest_record_at to now. On a partition that receives "
                                            "nothing it grows though nothing waits: the lag tells the two apart")


class PipelineStatus(BaseModel):
    """Values the server computes; never part of what a client writes."""

    next_run_at: datetime | None
    target_uri: str | None = Field(description="Where the Delta table lives (delta targets)")
    consumer_group: ConsumerGroupMirror | None = Field(
        default=None, description="The last copy of the committed offsets to source.commit_to_group")
    table: TableHealthSnapshot | None = Field(
        default=None, description="The Delta table's health as the last run's commit or maintenance task recorded it "
                                  "(GET /pipelines/{id}/maintenance has the rest); null for a Kafka target, or before "
                                  "either happened")
    freshness: Freshness | None = None


class PipelineRead(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    id: uuid.UUID
    name: str
    source: KafkaSource
    target: Target
    schedule: Schedule | None
    state: PipelineState
    contract: PipelineContract | None = Field(default=None, description="Left out when the pipeline has none")
    status: PipelineStatus
    created_at: datetime
    updated_at: datetime

    # No return annotation: pydantic then documents the model's own schema in the OpenAPI document.
    @model_serializer(mode="wrap")
    def _without_a_missing_contract(self, handler: SerializerFunctionWrapHandler):
        """A pipeline written without a contract reads back without one (not ``"contract": null``)."""
        data = handler(self)
        if self.contract is None:
            data.pop("contract", None)
        return data
