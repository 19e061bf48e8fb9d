"""The pipeline forms: the list's filters, and the create and edit form (source, target, schedule,
the contract's expectations, sensitive fields and schema evolution policy)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from api.core.errors import DomainError, ValidationFailed
from api.pipelines.contract import PipelineContract
from api.pipelines.schedules import ContinuousSchedule, CronSchedule, IntervalSchedule, Schedule
from api.pipelines.schemas import (
    REGISTRY_FORMATS,
    DeltaTarget,
    KafkaSource,
    KafkaTarget,
    PipelineRead,
    PipelineSpec,
    RegistrySchema,
)
from api.portal.forms.base import (
    FormInvalid,
    Parts,
    PortalForm,
    options_text,
    put_unless_default,
    settings_lines,
    utc_input,
    utc_moment,
)
from api.portal.forms.contract import contract_of, evolution_choice, expectations_text, numbered, sensitive_text
from api.portal.views import FormErrors


class PipelineFilters(BaseModel):
    """The pipeline list's filters (a GET form) and page number; anything unexpected means no filter."""

    name: str = ""
    state: str = ""
    page: str = "1"

    @property
    def name_contains(self) -> str:
        return self.name.strip()[:100]

    @property
    def chosen_state(self) -> str:
        return self.state if self.state in ("active", "paused") else ""

    @property
    def number(self) -> int:
        return int(self.page) if self.page.isdigit() and int(self.page) > 0 else 1

    def shown(self) -> dict[str, str]:
        return {"name": self.name_contains, "state": self.chosen_state}


def _given(out: dict[str, Any], key: str, text: str) -> None:
    """``out[key]``: the input's text, where it has any (an empty required input is "Field required")."""
    if text.strip():
        out[key] = text.strip()


def _written_version(chosen: RegistrySchema | None) -> str:
    """A registry schema's version as its input shows it: empty unless the pipeline wrote one."""
    return str(chosen.version) if chosen is not None and "version" in chosen.model_fields_set else ""


def _number(text: str, default: int) -> int | str:
    """A whole number input: empty is the default; anything else but digits goes to the API as typed (refused there)."""
    text = text.strip()
    return default if not text else int(text) if text.isdigit() else text


def _words(text: str) -> list[str]:
    return [word for word in re.split(r"[,\s]+", text.strip()) if word]


# The options a new pipeline's form writes even at their defaults (it always has); an edit writes what the
# pipeline had written, so that saving an unchanged form changes nothing.
_NEW_PIPELINE_WRITES: Mapping[str, Mapping[str, Any]] = {
    "source": {"value_format": True, "starting_offsets": True}, "target": {}, "schedule": {"timezone": True},
    "contract": {},
}


class PipelineForm(PortalForm):
    """The pipeline form, new and edit: a Kafka source (topics or a pattern, the value's and the key's
    formats, where new partitions start, limits), a Delta or a Kafka target, a schedule kind and its
    inputs, and the state.

    Inputs of a choice not taken (the interval of a cron schedule, the Kafka target's of a Delta one,
    the subject of a format without a registry: the page hides them) are not sent. An option at the
    API's default is written only where the pipeline had written it (``_NEW_PIPELINE_WRITES`` for a new
    one), so that an unchanged form saved is no change, and Terraform sees no drift.

    The contract's expectations are one input, a rule a line: ``name action: predicate`` (``name:
    predicate`` is warn); its sensitive fields another, ``field action`` a line; its schema evolution
    policy a select (add, widen, fail). A pipeline that had written no contract, whose inputs are
    empty and whose policy is add sends none."""

    name: str = ""
    connection_id: str = ""
    topics_kind: str = ""
    topics: str = ""
    topic_pattern: str = ""
    value_format: str = ""
    schema_: str = Field(default="", alias="schema")
    value_subject: str = ""
    value_version: str = ""
    key_format: str = ""
    key_subject: str = ""
    key_version: str = ""
    starting_offsets: str = ""
    starting_offsets_json: str = ""
    starting_timestamp: str = ""
    starting_timestamp_strategy: str = ""
    max_offsets_per_run: str = ""
    commit_to_group: str = ""
    include_headers: str = ""
    on_data_loss: str = ""
    target_type: str = ""
    target_path: str = ""
    partition_by: str = ""
    maintenance_off: str = ""
    target_file_mb: str = ""
    z_order_by: str = ""
    vacuum_retention_hours: str = ""
    delta_mode: str = ""
    key_fields: str = ""
    key_from: str = ""
    sequence_by: str = ""
    changes: str = ""
    scd_type: str = ""
    deletes: str = ""
    target_connection_id: str = ""
    target_topic: str = ""
    create_topic: str = ""
    create_partitions: str = ""
    create_replication_factor: str = ""
    create_config: str = ""
    schedule_kind: str = "none"
    interval_seconds: str = ""
    idle_wait_ms: str = ""
    continuous_max_offsets: str = ""
    cron: str = ""
    timezone: str = ""
    expectations: str = ""
    sensitive: str = ""
    evolution: str = ""
    state: str = ""
    etag: str = ""

    model_config = ConfigDict(populate_by_name=True)

    FIELDS = {
        "name": "name", "state": "state",
        "source": "topics", "source.topics": "topics", "source.topic_pattern": "topic_pattern",
        "source.connection_id": "connection_id",
        "source.value_format": "value_format", "source.schema": "schema",
        "source.value_schema": "value_subject", "source.value_schema.subject": "value_subject",
        "source.value_schema.version": "value_version",
        "source.key_format": "key_format", "source.key_schema": "key_subject",
        "source.key_schema.subject": "key_subject",
        "source.key_schema.version": "key_version",
        "source.max_offsets_per_run": "max_offsets_per_run", "source.starting_offsets": "starting_offsets",
        "source.starting_timestamp": "starting_timestamp",
        "source.starting_timestamp_strategy": "starting_timestamp_strategy",
        "source.commit_to_group": "commit_to_group", "source.include_headers": "include_headers",
        "source.on_data_loss": "on_data_loss",
        "target": "target_path", "target.type": "target_type", "target.path": "target_path",
        "target.partition_by": "partition_by", "target.connection_id": "target_connection_id",
        "target.maintenance.enabled": "maintenance_off",
        "target.maintenance.compaction.target_file_mb": "target_file_mb",
        "target.maintenance.compaction.z_order_by": "z_order_by",
        "target.maintenance.vacuum.retention_hours": "vacuum_retention_hours",
        "target.mode": "delta_mode", "target.key": "key_fields", "target.key_from": "key_from",
        "target.sequence_by": "sequence_by", "target.changes": "changes", "target.scd_type": "scd_type", "target.deletes": "deletes",
        "target.topic": "target_topic", "target.create_topic": "create_partitions",
        "target.create_topic.partitions": "create_partitions",
        "target.create_topic.replication_factor": "create_replication_factor",
        "target.create_topic.config": "create_config",
        "schedule": "schedule", "schedule.cron": "cron", "schedule.timezone": "timezone",
        "schedule.idle_wait_ms": "idle_wait_ms", "schedule.max_offsets_per_run": "continuous_max_offsets",
        "schedule.interval_seconds": "interval_seconds",
        "contract": "expectations", "contract.expectations": "expectations", "contract.sensitive": "sensitive",
        "contract.evolution": "evolution",
    }
    CONFLICT_FIELD = "name"

    @classmethod
    def initial(cls) -> PipelineForm:
        return cls(topics_kind="topics", value_format="string", starting_offsets="earliest", target_type="delta",
                   schedule_kind="none", timezone="UTC", state="active", on_data_loss="fail",
                   starting_timestamp_strategy="error", delta_mode="append", key_from="value", changes="rows",
                   scd_type="1", deletes="mark", evolution="add")

    @classmethod
    def of(cls, read: PipelineRead, etag: str) -> PipelineForm:
        """The edit form of a saved pipeline."""
        source, target, schedule = read.source, read.target, read.schedule
        value_schema, key_schema = source.value_schema, source.key_schema
        start = source.starting_offsets
        values: dict[str, Any] = {
            "name": read.name, "state": read.state, "connection_id": str(source.connection_id),
            "topics_kind": "pattern" if source.topic_pattern is not None else "topics",
            "topics": ", ".join(source.topics or []), "topic_pattern": source.topic_pattern or "",
            "value_format": source.value_format, "schema": source.schema_ or "",
            "value_subject": (value_schema.subject or "") if value_schema else "",
            "value_version": _written_version(value_schema),
            "key_format": source.key_format or "", "key_subject": (key_schema.subject or "") if key_schema else "",
            "key_version": _written_version(key_schema),
            "starting_offsets": ("timestamp" if source.starting_timestamp is not None
                                 else "offsets" if isinstance(start, dict) else start),
            "starting_offsets_json": json.dumps(start) if isinstance(start, dict) else "",
            "starting_timestamp": utc_input(source.starting_timestamp),
            "starting_timestamp_strategy": source.starting_timestamp_strategy,
            "max_offsets_per_run": str(source.max_offsets_per_run or ""),
            "commit_to_group": source.commit_to_group or "",
            "include_headers": "on" if source.include_headers else "", "on_data_loss": source.on_data_loss,
            "target_type": target.type, "etag": etag,
            "schedule_kind": ("none" if schedule is None else "cron" if isinstance(schedule, CronSchedule)
                              else "continuous" if isinstance(schedule, ContinuousSchedule) else "interval"),
            "cron": schedule.cron if isinstance(schedule, CronSchedule) else "",
            "timezone": schedule.timezone if isinstance(schedule, CronSchedule) else "UTC",
            "interval_seconds": str(schedule.interval_seconds) if isinstance(schedule, IntervalSchedule) else "",
            "idle_wait_ms": str(schedule.idle_wait_ms) if isinstance(schedule, ContinuousSchedule) else "",
            "continuous_max_offsets": (str(schedule.max_offsets_per_run) if isinstance(schedule, ContinuousSchedule)
                                       else ""),
            "expectations": expectations_text(read.contract), "sensitive": sensitive_text(read.contract),
            "evolution": evolution_choice(read.contract),
        }
        if isinstance(target, KafkaTarget):
            creation = target.create_topic
            values.update(target_connection_id=str(target.connection_id), target_topic=target.topic,
                          create_topic="on" if creation else "",
                          create_partitions=str(creation.partitions) if creation else "",
                          create_replication_factor=str(creation.replication_factor) if creation else "",
                          create_config=options_text(creation.config) if creation else "")
        else:
            policy = target.maintenance
            values.update(target_path=target.path, partition_by=", ".join(target.partition_by),
                          maintenance_off="" if policy.enabled else "on",
                          target_file_mb=str(policy.compaction.target_file_mb),
                          z_order_by=", ".join(policy.compaction.z_order_by),
                          vacuum_retention_hours=str(policy.vacuum.retention_hours),
                          delta_mode=target.mode, key_fields=", ".join(target.key or []), key_from=target.key_from,
                          sequence_by=target.sequence_by or "", changes=target.changes, scd_type=str(target.scd_type),
                          deletes=target.deletes)
        return cls.model_validate(values)

    def errors(self, failure: DomainError, fields: Mapping[str, str] | None = None) -> FormErrors:
        if fields is None and self.starting_offsets == "offsets":
            fields = {**self.FIELDS, "source.starting_offsets": "starting_offsets_json"}
        if isinstance(failure, ValidationFailed) and not isinstance(failure, FormInvalid) and failure.errors:
            failure = ValidationFailed(failure.detail, errors=numbered(
                failure.errors, {"expectations": self.expectations, "sensitive": self.sensitive}))
        return super().errors(failure, fields)

    def spec(self, stored: Mapping[str, Any] | None = None) -> PipelineSpec:
        """The pipeline the form describes, as the API takes it; ``stored``: the definition an edit
        changes (``{source, target, schedule, contract}`` as stored), whose written options stay written."""
        written = _NEW_PIPELINE_WRITES
        if stored is not None:
            written = {part: stored.get(part) or {} for part in _NEW_PIPELINE_WRITES}
        parts = Parts()
        source = parts.check(KafkaSource, self._source(parts, written["source"]), "source")
        spec: dict[str, Any] = {"name": self.name.strip(), "source": source,
                                "target": self._target(parts, written["target"]),
                                "schedule": self._schedule(parts, written["schedule"]),
                                "state": self.state.strip() or "active"}
        shown = self.target_type.strip() != "kafka"  # the page hides the contract's inputs for a Kafka target
        contract = contract_of(parts, written["contract"], expectations=self.expectations if shown else "",
                               sensitive=self.sensitive if shown else "", evolution=self.evolution if shown else "")
        if contract or (stored or {}).get("contract") is not None:  # none written, none asked for: none sent
            spec["contract"] = parts.check(PipelineContract, contract, "contract")
        return parts.whole(PipelineSpec, spec, "The pipeline is not valid")

    def _source(self, parts: Parts, written: Mapping[str, Any]) -> dict[str, Any]:
        source: dict[str, Any] = {}
        _given(source, "connection_id", self.connection_id)
        if self.topics_kind.strip() == "pattern":
            source["topic_pattern"] = self.topic_pattern.strip() or None
        else:
            source["topics"] = _words(self.topics) or None
        value_format = self.value_format.strip() or "raw"
        put_unless_default(source, "value_format", value_format, "raw", written)
        if value_format == "json":
            source["schema"] = self.schema_.strip() or None
        self._registry_schema(parts, source, "value", value_format, self.value_subject, self.value_version)
        if key_format := self.key_format.strip():
            source["key_format"] = key_format
            self._registry_schema(parts, source, "key", key_format, self.key_subject, self.key_version)
        self._start(parts, source, written)
        if self.max_offsets_per_run.strip():
            source["max_offsets_per_run"] = self.max_offsets_per_run.strip()
        if self.commit_to_group.strip():
            source["commit_to_group"] = self.commit_to_group.strip()
        put_unless_default(source, "include_headers", self.include_headers == "on", False, written)
        put_unless_default(source, "on_data_loss", self.on_data_loss.strip() or "fail", "fail", written)
        return source

    @staticmethod
    def _registry_schema(parts: Parts, source: dict[str, Any], part: str, fmt: str, subject: str,
                         version: str) -> None:
        """The subject and version of a registry format's ``part`` (value or key), where the form names either."""
        if fmt not in REGISTRY_FORMATS:
            return
        chosen: dict[str, Any] = {}
        if subject.strip():
            chosen["subject"] = subject.strip()
        wanted = version.strip().lower()
        if wanted.isdigit() or wanted == "latest":
            chosen["version"] = int(wanted) if wanted.isdigit() else wanted
        elif wanted:
            parts.refuse(f"source.{part}_schema.version", "Enter a version number (1, 2, …) or latest")
        if chosen:
            source[f"{part}_schema"] = chosen

    def _start(self, parts: Parts, source: dict[str, Any], written: Mapping[str, Any]) -> None:
        """Where partitions never read before start: earliest, latest, offsets per partition, or a time."""
        start = self.starting_offsets.strip() or "earliest"
        if start == "offsets":
            try:
                positions = json.loads(self.starting_offsets_json)
            except ValueError:
                positions = None
            if isinstance(positions, dict):
                source["starting_offsets"] = positions
            else:
                parts.refuse("source.starting_offsets", 'Enter JSON such as {"orders": {"0": 42, "1": -2}} '
                                                        "(-2: earliest, -1: latest)")
        elif start == "timestamp":
            moment = utc_moment(self.starting_timestamp)
            if moment is None:
                parts.refuse("source.starting_timestamp", "Enter a date and time (UTC)")
            else:
                source["starting_timestamp"] = moment
            put_unless_default(source, "starting_timestamp_strategy", self.starting_timestamp_strategy.strip() or "error", "error",
                 written)
        else:
            put_unless_default(source, "starting_offsets", start, "earliest", written)

    def _target(self, parts: Parts, written: Mapping[str, Any]) -> DeltaTarget | KafkaTarget | None:
        if self.target_type.strip() == "kafka":
            target: dict[str, Any] = {"type": "kafka", "topic": self.target_topic.strip()}
            _given(target, "connection_id", self.target_connection_id)
            if self.create_topic == "on":
                made: Mapping[str, Any] = written.get("create_topic") or {}
                creation: dict[str, Any] = {}
                _given(creation, "partitions", self.create_partitions)
                factor = self.create_replication_factor.strip() or "-1"
                put_unless_default(creation, "replication_factor", -1 if factor == "-1" else factor, -1, made)
                put_unless_default(creation, "config", settings_lines(self.create_config, parts, "target.create_topic.config",
                                                         "retention.ms=604800000"), {}, made)
                target["create_topic"] = creation
            return parts.check(KafkaTarget, target, "target")
        delta: dict[str, Any] = {"type": "delta", "path": self.target_path.strip()}
        self._keyed(delta, written)
        put_unless_default(delta, "partition_by", _words(self.partition_by), [], written)
        if maintenance := self._maintenance(written.get("maintenance") or {}):
            delta["maintenance"] = maintenance
        return parts.check(DeltaTarget, delta, "target")

    def _keyed(self, delta: dict[str, Any], written: Mapping[str, Any]) -> None:
        """A keyed table's settings (mode upsert; docs/keyed-tables.md). Those of an append table are not
        sent: the page hides them, and the API refuses them without upsert."""
        if self.delta_mode.strip() != "upsert":
            put_unless_default(delta, "mode", self.delta_mode.strip() or "append", "append", written)
            return
        delta["mode"] = "upsert"
        delta["key"] = _words(self.key_fields) or None  # none: the API's "mode upsert needs key", beside the input
        put_unless_default(delta, "key_from", self.key_from.strip() or "value", "value", written)
        put_unless_default(delta, "sequence_by", self.sequence_by.strip() or None, None, written)
        put_unless_default(delta, "changes", self.changes.strip() or "rows", "rows", written)
        chosen = self.scd_type.strip() or "1"  # what is not 1 or 2 goes as typed: the API's refusal, beside the input
        put_unless_default(delta, "scd_type", int(chosen) if chosen in ("1", "2") else chosen, 1, written)
        put_unless_default(delta, "deletes", self.deletes.strip() or "mark", "mark", written)

    def _maintenance(self, written: Mapping[str, Any]) -> dict[str, Any]:
        """The table maintenance policy: the form's few inputs over what the pipeline had written (the
        rest of the policy is the API's and Terraform's; an edit keeps it as it was)."""
        policy = {part: dict(value) if isinstance(value, Mapping) else value for part, value in written.items()}
        put_unless_default(policy, "enabled", self.maintenance_off != "on", True, written)  # a box left unticked is not sent
        compaction: dict[str, Any] = policy.get("compaction") or {}
        put_unless_default(compaction, "target_file_mb", _number(self.target_file_mb, 128), 128, written.get("compaction") or {})
        put_unless_default(compaction, "z_order_by", _words(self.z_order_by), [], written.get("compaction") or {})
        vacuum: dict[str, Any] = policy.get("vacuum") or {}
        put_unless_default(vacuum, "retention_hours", _number(self.vacuum_retention_hours, 168), 168, written.get("vacuum") or {})
        for part, chosen in (("compaction", compaction), ("vacuum", vacuum)):
            if chosen:
                policy[part] = chosen
        return policy

    def _schedule(self, parts: Parts, written: Mapping[str, Any]) -> Schedule | None:
        kind = self.schedule_kind.strip()
        if kind == "continuous":
            continuous: dict[str, Any] = {"continuous": True}
            put_unless_default(continuous, "idle_wait_ms", self.idle_wait_ms.strip() or "500", "500", written)
            put_unless_default(continuous, "max_offsets_per_run", self.continuous_max_offsets.strip() or "100000", "100000", written)
            return parts.check(ContinuousSchedule, continuous, "schedule")
        if kind == "interval":
            return parts.check(IntervalSchedule, {"interval_seconds": self.interval_seconds.strip()}, "schedule")
        if kind == "cron":
            cron: dict[str, Any] = {"cron": self.cron.strip()}
            put_unless_default(cron, "timezone", self.timezone.strip() or "UTC", "UTC", written)
            return parts.check(CronSchedule, cron, "schedule")
        return None
