"""The contract between the worker and the Spark job: one ``RunSpec`` in, one ``RunResult`` out.

Both travel as JSON files. The spec file is written 0600 because ``kafka_config`` holds the
client's secrets (SASL passwords, SSL keys) and ``storage_options`` the object store's credentials;
nothing else carries them. ``secret_values`` and
``redact`` let every component that logs job output scrub them.

Offset ranges are half-open ``[start, end)`` and keyed ``{topic: {partition: [start, end]}}`` with
the partition number as a string, because JSON object keys are strings.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from spark_jobs.contract.spec import ContractSpec, ExpectationAction
from spark_jobs.egress import DEFAULT_DENY, EgressPolicy
from spark_jobs.errors import JobErrorKind
from spark_jobs.read_budget import ReadBudget
from spark_jobs.registry import RegistryConfig
from spark_jobs.storage import Store

OffsetRange = tuple[int, int]
Ranges = dict[str, dict[str, OffsetRange]]

ValueFormat = Literal["raw", "string", "json", "avro", "protobuf", "json_schema"]
KeyFormat = Literal["raw", "string", "avro", "protobuf", "json_schema"]
REGISTRY_FORMATS = ("avro", "protobuf", "json_schema")

ErrorKind = Literal[
    JobErrorKind,
    # Set by the launcher when the job left no result.
    "timeout",
    "crashed",
    "resource_exhausted",  # its processes passed the run's memory bound (worker.launch.processes.MemoryWatch)
]

# Names whose values are credentials: librdkafka's (sasl.password, ssl.key.pem, sasl.oauthbearer.client.secret,
# ssl.keystore.password, sasl.jaas.config, ...) and the object stores' (AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN,
# AZURE_STORAGE_ACCOUNT_KEY / access_key, AZURE_STORAGE_SAS_TOKEN / sas_key, AZURE_CLIENT_SECRET,
# GOOGLE_SERVICE_ACCOUNT_KEY, GOOGLE_APPLICATION_CREDENTIALS).
_SECRET_KEY = re.compile(r"password|secret|token|credential|jaas|ssl\.key\.pem|ssl_key|private"
                         r"|(account|access|master|sas|service_account)_key$", re.IGNORECASE)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Txn(_Model):
    """Delta's idempotent-write marker: a run commits at most once per (app_id, version)."""

    app_id: str
    version: int = Field(ge=0)


def _check_ranges(ranges: Ranges) -> Ranges:
    for topic, partitions in ranges.items():
        for partition, (start, end) in partitions.items():
            if not partition.isdigit():
                raise ValueError(f"{topic}: partition key {partition!r} is not a partition number")
            if not 0 <= start <= end:
                raise ValueError(f"{topic}[{partition}]: range [{start}, {end}) is not 0 <= start <= end")
    return ranges


class RegistrySpec(_Model):
    """How the job reaches the connection's schema registry (``password`` and ``token`` are secrets): a
    ``RegistryConfig`` as the spec carries it, without the egress policy (``RunSpec.egress`` holds it
    once for every address the job connects to). ``of`` and ``config`` are the two ways between them."""

    url: str
    username: str | None = None
    password: str | None = None
    token: str | None = None
    ca_pem: str | None = None
    verify_hostname: bool = True

    @classmethod
    def of(cls, config: RegistryConfig) -> RegistrySpec:
        return cls(**{name: getattr(config, name) for name in cls.model_fields})

    def config(self, egress: EgressPolicy) -> RegistryConfig:
        return RegistryConfig(**self.model_dump(), egress=egress)


class Egress(_Model):
    """The operator's egress ranges (``spark_jobs.egress``), for the addresses the job connects to
    itself: the schema registry and OAuth token endpoints."""

    deny: tuple[str, ...] = DEFAULT_DENY
    allow: tuple[str, ...] = ()

    def policy(self) -> EgressPolicy:
        return EgressPolicy.of(self.deny, self.allow)


class SubjectRef(_Model):
    """A registry format's subject, and the version a run reads (``latest``: the newest one)."""

    subject: str
    version: int | Literal["latest"] = "latest"


class SourceSpec(_Model):
    kafka_config: dict[str, str]
    ranges: Ranges
    value_format: ValueFormat = "raw"
    schema_: str | None = Field(default=None, alias="schema")
    include_headers: bool = False
    registry: RegistrySpec | None = None
    value_subject: SubjectRef | None = None
    # None: raw keys for raw values, strings otherwise.
    key_format: KeyFormat | None = None
    key_subject: SubjectRef | None = None
    on_data_loss: Literal["fail", "skip"] = "fail"
    max_records_per_task: int = Field(default=200_000, gt=0)
    # A partition that makes no progress for this long fails the run as kafka_unavailable.
    stall_timeout_s: float = Field(default=120.0, gt=0)
    # A record's bytes and an Arrow batch's, once decompressed (spark_jobs.read_budget).
    max_record_bytes: int = Field(default=ReadBudget.max_record_bytes, gt=0)
    max_batch_bytes: int = Field(default=ReadBudget.max_batch_bytes, gt=0)

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @field_validator("ranges")
    @classmethod
    def _valid_ranges(cls, ranges: Ranges) -> Ranges:
        return _check_ranges(ranges)

    @model_validator(mode="after")
    def _json_needs_schema(self) -> SourceSpec:
        if "bootstrap.servers" not in self.kafka_config:
            raise ValueError("kafka_config needs bootstrap.servers")
        if self.value_format == "json" and not self.schema_:
            raise ValueError("value_format json needs a schema (Spark DDL)")
        if self.value_format == "json" and self.key_format is not None:
            raise ValueError("key_format is not used with value_format json, whose keys are strings")
        for part, fmt, subject in (("value", self.value_format, self.value_subject), ("key", self.key_format, self.key_subject)):
            if (fmt in REGISTRY_FORMATS) != (subject is not None):
                raise ValueError(f"{part}_subject goes with a registry {part}_format (avro, protobuf, json_schema), and only with one")
            if fmt in REGISTRY_FORMATS and self.registry is None:
                raise ValueError(f"{part}_format {fmt} needs the registry")
        return self

    @property
    def budget(self) -> ReadBudget:
        return ReadBudget(self.stall_timeout_s, self.max_record_bytes, self.max_batch_bytes)

    @property
    def decodes_framed(self) -> bool:
        """Whether values or keys are decoded per record on Arrow (``decode.decode_framed``): a
        registry format, or a key format chosen apart from the value's."""
        return self.value_format in REGISTRY_FORMATS or self.key_format is not None

    @property
    def quarantines(self) -> bool:
        """Whether a record can fail to decode, and go to the quarantine table instead: json values,
        and values or keys decoded per record (``decodes_framed``)."""
        return self.value_format == "json" or self.decodes_framed


class TableCreation(_Model):
    """The Delta features a pipeline's table is created with (none: delta-rs creates it at the first
    commit); created by delta-spark on the run's Spark (``delta_tables.create``)."""

    deletion_vectors: bool = False  # delta.enableDeletionVectors: a DELETE or UPDATE marks rows, not rewrites files
    cluster_by: tuple[str, ...] = ()  # liquid clustering: OPTIMIZE clusters the rows by these columns

    @property
    def needs_spark(self) -> bool:
        return self.deletion_vectors or bool(self.cluster_by)

    def properties(self) -> dict[str, str]:
        return {"delta.enableDeletionVectors": "true"} if self.deletion_vectors else {}


class DeltaTargetSpec(_Model):
    type: Literal["delta"] = "delta"
    uri: str
    partition_by: list[str] = []
    quarantine_uri: str | None = None
    # Replay: rows of these ranges are replaced in the same commit that adds the new rows.
    replace_ranges: Ranges | None = None
    # Object storage: endpoint and credentials for the driver and every executor (``storage.Store``).
    storage_options: dict[str, str] = {}
    # upsert: the table holds the latest change per key (``targets.delta_upsert``, docs/keyed-tables.md).
    mode: Literal["append", "upsert"] = "append"
    key: list[str] = []
    key_from: Literal["value", "kafka_key"] = "value"  # kafka_key: the Kafka key's text is the one key column
    sequence_by: str | None = None  # a dotted value field (the envelope's, for debezium); default: the offset
    changes: Literal["rows", "debezium"] = "rows"
    # 2: the table keeps every version of a key, valid from its sequence to the next (``delta_tables.history``).
    scd_type: Literal[1, 2] = 1
    # soft: a delete keeps its key's row as it was, flagged and timed (``delta_tables.commit.merge_changes``).
    deletes: Literal["mark", "soft"] = "mark"
    # A keyed table of this many bytes or more is merged by delta-spark on the run's Spark, not by
    # delta-rs on the driver (``delta_tables.spark_merge``); None: never. The platform's, not a pipeline's.
    merge_on_spark_bytes: int | None = Field(default=None, ge=0)
    # The Delta features the table is created with, if the run creates it.
    table_features: TableCreation = TableCreation()

    @property
    def store(self) -> Store:
        return Store(self.storage_options)

    @model_validator(mode="after")
    def _keyed(self) -> DeltaTargetSpec:
        if (self.mode == "upsert") != bool(self.key):
            raise ValueError("key goes with mode upsert, and mode upsert needs a key")
        if self.mode == "append" and (self.sequence_by is not None or self.changes != "rows" or self.scd_type != 1
                                      or self.deletes != "mark"):
            raise ValueError("sequence_by, changes, scd_type and deletes go with mode upsert")
        if self.deletes == "soft" and self.scd_type == 2:
            raise ValueError("soft deletes go with scd_type 1")
        return self

    @field_validator("replace_ranges")
    @classmethod
    def _valid_ranges(cls, ranges: Ranges | None) -> Ranges | None:
        return None if ranges is None else _check_ranges(ranges)


class KafkaTargetSpec(_Model):
    type: Literal["kafka"] = "kafka"
    kafka_config: dict[str, str]
    topic: str


TargetSpec = Annotated[DeltaTargetSpec | KafkaTargetSpec, Field(discriminator="type")]


class ReprocessSpec(_Model):
    """A run that replays quarantined records into the table (``targets.reprocess``) instead of
    reading Kafka: those of ``ranges`` (every partition's when None) whose Kafka timestamp is in
    [``since``, ``until``); ``dry_run`` decodes and counts them, and writes nothing."""

    ranges: Ranges | None = None
    since: datetime | None = None
    until: datetime | None = None
    dry_run: bool = False


class RunSpec(_Model):
    run_id: str
    pipeline_id: str
    txn: Txn
    source: SourceSpec
    target: TargetSpec
    egress: Egress = Egress()
    contract: ContractSpec = ContractSpec()
    reprocess: ReprocessSpec | None = None

    @model_validator(mode="after")
    def _decoding_needs_delta_quarantine(self) -> RunSpec:
        decodes = self.source.value_format not in ("raw", "string") or self.source.key_format in REGISTRY_FORMATS
        if decodes and isinstance(self.target, DeltaTargetSpec) and not self.target.quarantine_uri:
            raise ValueError(f"a {self.source.value_format} pipeline into Delta needs target.quarantine_uri")
        if (isinstance(self.target, DeltaTargetSpec) and self.target.mode == "upsert"
                and self.source.value_format not in ("json", *REGISTRY_FORMATS)):
            raise ValueError("mode upsert reads json values or a registry format's (key columns are value fields)")
        if ((self.contract.expectations or self.contract.sensitive)
                and not (decodes and isinstance(self.target, DeltaTargetSpec))):
            raise ValueError("a contract applies to the decoded rows of a Delta target (json or a registry format)")
        if (self.contract.evolution == "widen" and isinstance(self.target, DeltaTargetSpec)
                and self.target.mode == "upsert"):
            raise ValueError("contract.evolution widen applies to append tables")
        if self.contract.sensitive and self.contract.field_key is None:
            raise ValueError("sensitive fields need contract.field_key")
        if self.contract.field_key is not None and not (self.contract.sensitive or self.reprocess):
            raise ValueError("contract.field_key goes with sensitive fields or a reprocess of the quarantine")
        if self.reprocess is not None and not (decodes and isinstance(self.target, DeltaTargetSpec)
                                               and self.target.mode == "append"):
            raise ValueError("a reprocess replays the quarantine of a Delta append table (json or a registry format)")
        if self.reprocess is not None and self.source.ranges:
            raise ValueError("a reprocess reads the quarantine, not Kafka: source.ranges must be empty")
        return self

    @property
    def writes_directly(self) -> bool:
        """Whether each task reads, decodes and writes its Parquet files itself (``direct_write``):
        every run into Delta, whatever its value format. The JVM then only schedules tasks; a run
        into Kafka goes through Spark SQL's DataFrames (``targets.kafka``)."""
        return isinstance(self.target, DeltaTargetSpec)

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True)

    @classmethod
    def from_json(cls, text: str | bytes) -> RunSpec:
        return cls.model_validate_json(text)

    def secret_values(self) -> list[str]:
        """Every credential in the spec, for redaction (multi-line values also line by line)."""
        configs = [self.source.kafka_config]
        if self.source.registry is not None:
            configs.append({k: v for k, v in self.source.registry.model_dump().items() if isinstance(v, str)})
        if isinstance(self.target, KafkaTargetSpec):
            configs.append(self.target.kafka_config)
        else:
            configs.append(self.target.storage_options)
        if self.contract.field_key is not None:
            configs.append({"field_key_secret": self.contract.field_key})
        return secrets_in(configs)


def secrets_in(configs: Iterable[Mapping[str, str]]) -> list[str]:
    """The credentials among ``configs``' values (by their keys' names), for ``redact``: multi-line
    values also line by line, a service account's private key also unescaped; longest first, so a
    secret that contains another is replaced whole."""
    found: set[str] = set()
    for config in configs:
        for key, value in config.items():
            if value and _SECRET_KEY.search(key):
                found.add(value)
                found.update(line.strip() for line in value.splitlines() if len(line.strip()) >= 8)
                found.update(_private_key_of(value))
    return sorted(found, key=len, reverse=True)


def _private_key_of(value: str) -> list[str]:
    """A service account's JSON key holds its private key escaped; a log may show it unescaped."""
    if not value.lstrip().startswith("{"):
        return []
    try:
        key = json.loads(value).get("private_key")
    except (ValueError, AttributeError):
        return []
    if not isinstance(key, str):
        return []
    return [key, *(line.strip() for line in key.splitlines() if len(line.strip()) >= 8 and "-----" not in line)]


def redact(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, "***")
    return text


def redacted_config(config: dict[str, Any]) -> dict[str, Any]:
    return {k: ("***" if _SECRET_KEY.search(k) else v) for k, v in config.items()}


class PartitionResult(_Model):
    topic: str
    partition: int
    start: int
    end: int
    records_read: int = 0
    first_offset: int | None = None
    last_offset: int | None = None
    newest_timestamp: datetime | None = None  # the latest Kafka timestamp among the records read
    # Offsets lost before they could be read (on_data_loss=skip): [from, to).
    gap: OffsetRange | None = None


class Timings(_Model):
    started_at: datetime
    finished_at: datetime
    session_start_s: float = 0.0
    process_s: float = 0.0
    commit_s: float = 0.0


class JobFailure(_Model):
    """Why the job failed, as its result reports it (the worker records it as the run's failure)."""

    kind: ErrorKind
    message: str
    topic: str | None = None
    partition: int | None = None


class ExpectationCount(_Model):
    """One expectation's outcome in a run: the decoded rows that violated it."""

    name: str
    action: ExpectationAction
    rows_violating: int = 0


class ReprocessCount(_Model):
    """What a reprocess of the quarantine did: of the quarantined records it chose, those that now
    decode (and pass the expectations) landed in the table and left the quarantine; the others stay.
    A dry run lands nothing: ``decoded`` is what would land."""

    dry_run: bool
    selected: int = 0
    decoded: int = 0
    still_quarantined: int = 0


class RunResult(_Model):
    run_id: str
    status: Literal["succeeded", "failed"]
    partitions: list[PartitionResult] = []
    rows_written: int = 0
    rows_quarantined: int = 0
    bytes_read: int = 0
    # Bytes of the Parquet files committed (quarantine included); None where the target does not tell (Kafka).
    bytes_written: int | None = None
    delta_version: int | None = None
    # Data files added to the main Delta table; None where the target does not tell (Kafka).
    files_written: int | None = None
    already_committed: bool = False
    # The pipeline's expectations, in its order; and the decoded rows that violated at least one.
    expectations: list[ExpectationCount] = []
    rows_violating: int = 0
    reprocessed: ReprocessCount | None = None  # a reprocess of the quarantine's
    timings: Timings
    error: JobFailure | None = None

    def to_json(self) -> str:
        return self.model_dump_json(indent=2)

    @classmethod
    def from_json(cls, text: str | bytes) -> RunResult:
        return cls.model_validate_json(text)


END_OF_OUTPUT = "inlet-engine: end of the output of launch "


def end_of_output(launch_id: str) -> str:
    """The line the warm engine writes after a run's last log line and before its result: its output
    reaches the worker through Spark's JVM, later than the result through the socket, so the worker
    hands the run's lines to its log until it reads this one. Named by the launch (a retry of a run
    may come to the same engine), never a log line of any run."""
    return END_OF_OUTPUT + launch_id
