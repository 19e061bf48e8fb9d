"""The portal's forms: one pydantic model each, read with FastAPI's ``Form()`` (the pipeline list's
filters with ``Query()``), and how each becomes the body the API itself takes.

A form model holds the text the browser sent, so reading one never fails: a refusal is shown on the
form's page, never as a JSON 422. Turning a form into the API's schema (``spec()``, ``to_patch()``)
raises ``ValidationFailed`` whose errors name fields as the API names them (``source.topics``,
``schedule.cron``). Where the API schema has a union (a schedule, credentials, a target), the form has
already chosen the member and validates that member on its own, so no error is ever named after
pydantic's label for a union member. Each form's ``FIELDS`` maps those API names, which the services'
own errors use too, to the form's inputs; rules of a form itself (choose a partition, enter a time)
raise ``FormInvalid``, keyed by the inputs directly. The CSRF token every form carries is checked by
``auth`` before a page reads its form (the sign-in form's, which has no session yet, excepted).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from api.connections.schemas import (
    ConnectionSpec,
    RegistryBasicAuth,
    RegistryBearerAuth,
    SaslCredentials,
    SchemaRegistrySettings,
    SslSettings,
)
from api.core.errors import Conflict, DomainError, ValidationFailed, validation_errors
from api.offsets.schemas import OffsetsPatch, PartitionOffsetRead
from api.pipelines.schemas import (
    REGISTRY_FORMATS,
    CronSchedule,
    DeltaTarget,
    IntervalSchedule,
    KafkaSource,
    PipelineSpec,
)
from api.portal.views import FormErrors

M = TypeVar("M", bound=BaseModel)


class FormInvalid(ValidationFailed):
    """A form's own rules refused it before any API schema saw it; ``fields`` is keyed by its inputs."""

    def __init__(self, fields: FormErrors) -> None:
        super().__init__("The form is not complete")
        self.fields = fields


def route_errors(errors: Iterable[Mapping[str, Any]], fields: Mapping[str, str]) -> FormErrors:
    """Problem ``errors`` (``{field, message}``, fields named as the API names them) → form inputs via
    ``fields`` (API field → input; the longest matching prefix wins); the rest belong to no input."""
    out = FormErrors()
    for error in errors:
        name = str(error.get("field", ""))
        message = str(error.get("message", "invalid")).removeprefix("Value error, ")
        best = max((prefix for prefix in fields if name == prefix or name.startswith((prefix + ".", prefix + "["))),
                   key=len, default=None)
        out.add(fields[best] if best is not None else None, message)
    return out


class _Parts:
    """An API body validated part by part, its errors named as the API names its fields."""

    def __init__(self) -> None:
        self.errors: list[dict[str, Any]] = []
        self._failed: set[str] = set()

    def check(self, model: type[M], data: Mapping[str, Any], at: str) -> M | None:
        """``data`` as the part ``model`` at field ``at``; None once its errors are noted."""
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            self._failed.add(at)
            for error in validation_errors(exc.errors()):
                error["field"] = f"{at}.{error['field']}" if error["field"] else at
                self.errors.append(error)
            return None

    def refuse(self, at: str, message: str) -> None:
        """Note a form's own refusal of the part at field ``at``, named as the API names it."""
        self._failed.add(at)
        self.errors.append({"field": at, "message": message, "type": "value_error"})

    def whole(self, model: type[M], data: Mapping[str, Any], detail: str) -> M:
        """``data`` (holding the checked parts) as ``model``; ``ValidationFailed`` naming every error."""
        try:
            value = model.model_validate(data)
        except ValidationError as exc:
            for error in validation_errors(exc.errors()):
                # A refused part reaches the whole as None: its own errors are noted already, and the
                # whole's model checks would not have run (pydantic runs them on valid fields only).
                head = re.split(r"[.\[]", error["field"], maxsplit=1)[0]
                if head not in self._failed and not (head == "" and self._failed):
                    self.errors.append(error)
            raise ValidationFailed(detail, errors=self.errors) from None
        if self.errors:
            raise ValidationFailed(detail, errors=self.errors)
        return value


class PortalForm(BaseModel):
    """A form as the browser sends it: its inputs' text, the API field names they stand for, and how
    a refusal is shown beside them."""

    FIELDS: ClassVar[Mapping[str, str]] = {}
    CONFLICT_FIELD: ClassVar[str | None] = None  # the input a 409 concerns (a name already taken)
    NOT_SHOWN_BACK: ClassVar[frozenset[str]] = frozenset()

    def values(self) -> dict[str, Any]:
        """What the form shows again after a refusal."""
        return self.model_dump(by_alias=True, exclude=set(self.NOT_SHOWN_BACK))

    def errors(self, failure: DomainError, fields: Mapping[str, str] | None = None) -> FormErrors:
        """``failure``'s messages beside the inputs they concern, the rest above the form."""
        if isinstance(failure, FormInvalid):
            return failure.fields
        out = route_errors(failure.errors or [], self.FIELDS if fields is None else fields)
        if isinstance(failure, Conflict) and self.CONFLICT_FIELD:
            out.add(self.CONFLICT_FIELD, failure.detail)
        elif not out:
            out.add(None, failure.detail)
        return out


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


class LoginForm(BaseModel):
    """The sign-in form. It has no session yet: its CSRF token is the pre-session cookie's, checked here."""

    api_key: str = ""
    csrf_token: str = ""
    next: str = ""


class PipelineForm(PortalForm):
    """The new-pipeline form: a Kafka source, a Delta table path, a schedule kind and its inputs."""

    name: str = ""
    connection_id: str = ""
    topics: str = ""
    value_format: str = ""
    schema_: str = Field(default="", alias="schema")
    value_subject: str = ""
    value_version: str = ""
    starting_offsets: str = ""
    max_offsets_per_run: str = ""
    target_path: str = ""
    schedule_kind: str = "none"
    interval_seconds: str = ""
    cron: str = ""
    timezone: str = ""
    state: str = ""

    model_config = ConfigDict(populate_by_name=True)

    FIELDS = {
        "name": "name", "state": "state",
        "source": "topics", "source.topics": "topics", "source.connection_id": "connection_id",
        "source.value_format": "value_format", "source.schema": "schema",
        "source.value_schema": "value_subject", "source.value_schema.subject": "value_subject",
        "source.value_schema.version": "value_version",
        "source.max_offsets_per_run": "max_offsets_per_run", "source.starting_offsets": "starting_offsets",
        "target": "target_path", "target.path": "target_path",
        "schedule": "schedule", "schedule.cron": "cron", "schedule.timezone": "timezone",
        "schedule.interval_seconds": "interval_seconds",
    }
    CONFLICT_FIELD = "name"

    @classmethod
    def initial(cls) -> PipelineForm:
        return cls(value_format="string", starting_offsets="earliest", schedule_kind="none", timezone="UTC",
                   state="active")

    def spec(self) -> PipelineSpec:
        """The pipeline the form describes, as the API takes it."""
        parts = _Parts()
        source = parts.check(KafkaSource, self._source(parts), "source")
        target = parts.check(DeltaTarget, {"type": "delta", "path": self.target_path.strip()}, "target")
        kind = self.schedule_kind.strip()
        schedule: CronSchedule | IntervalSchedule | None = None
        if kind == "interval":
            schedule = parts.check(IntervalSchedule, {"interval_seconds": self.interval_seconds.strip()}, "schedule")
        elif kind == "cron":
            schedule = parts.check(CronSchedule, {"cron": self.cron.strip(), "timezone": self.timezone.strip() or "UTC"},
                                   "schedule")
        return parts.whole(PipelineSpec, {"name": self.name.strip(), "source": source, "target": target,
                                          "schedule": schedule, "state": self.state.strip() or "active"},
                           "The pipeline is not valid")

    def _source(self, parts: _Parts) -> dict[str, Any]:
        topics = [t for t in re.split(r"[,\s]+", self.topics.strip()) if t]
        source: dict[str, Any] = {"connection_id": self.connection_id.strip() or None, "topics": topics or None,
                                  "value_format": self.value_format.strip() or "raw",
                                  "starting_offsets": self.starting_offsets.strip() or "earliest"}
        if source["value_format"] == "json":
            source["schema"] = self.schema_.strip() or None
        if source["value_format"] in REGISTRY_FORMATS:
            value_schema: dict[str, Any] = {}
            if self.value_subject.strip():
                value_schema["subject"] = self.value_subject.strip()
            version = self.value_version.strip().lower()
            if version.isdigit() or version == "latest":
                value_schema["version"] = int(version) if version.isdigit() else version
            elif version:
                parts.refuse("source.value_schema.version", "Enter a version number (1, 2, …) or latest")
            if value_schema:
                source["value_schema"] = value_schema
        if self.max_offsets_per_run.strip():
            source["max_offsets_per_run"] = self.max_offsets_per_run.strip()
        return source


class ConnectionForm(PortalForm):
    """The new-connection form: SASL username and password only (OAuth and client certificates are the
    API's), an optional CA certificate, and an optional schema registry (basic auth or a bearer token)."""

    name: str = ""
    bootstrap_servers: str = ""
    security_protocol: str = ""
    sasl_mechanism: str = ""
    username: str = ""
    password: str = ""
    ca_pem: str = ""
    registry_url: str = ""
    registry_auth: str = ""
    registry_username: str = ""
    registry_password: str = ""
    registry_token: str = ""
    registry_ca_pem: str = ""

    FIELDS = {
        "name": "name", "bootstrap_servers": "bootstrap_servers", "security_protocol": "security_protocol",
        "sasl_mechanism": "sasl_mechanism", "credentials": "username", "credentials.username": "username",
        "credentials.password": "password", "ssl": "ca_pem",
        "schema_registry": "registry_ca_pem", "schema_registry.url": "registry_url",
        "schema_registry.ca_pem": "registry_ca_pem", "schema_registry.credentials": "registry_auth",
        "schema_registry.credentials.username": "registry_username",
        "schema_registry.credentials.password": "registry_password",
        "schema_registry.credentials.token": "registry_token",
    }
    CONFLICT_FIELD = "name"
    # Credentials are write-only: passwords and tokens are never sent back, even into their own fields.
    NOT_SHOWN_BACK = frozenset({"password", "registry_password", "registry_token"})

    @classmethod
    def initial(cls) -> ConnectionForm:
        return cls(security_protocol="PLAINTEXT", registry_auth="none")

    def spec(self) -> ConnectionSpec:
        """The connection the form describes, as the API takes it."""
        parts = _Parts()
        credentials = None
        if self.username.strip() or self.password:
            credentials = parts.check(SaslCredentials, {"username": self.username.strip(), "password": self.password},
                                      "credentials")
        ssl = parts.check(SslSettings, {"ca_pem": self.ca_pem.strip()}, "ssl") if self.ca_pem.strip() else None
        return parts.whole(ConnectionSpec, {
            "name": self.name.strip(), "bootstrap_servers": self.bootstrap_servers.strip(),
            "security_protocol": self.security_protocol.strip() or "PLAINTEXT",
            "sasl_mechanism": self.sasl_mechanism.strip() or None, "credentials": credentials, "ssl": ssl,
            "schema_registry": self._registry(parts),
        }, "The connection is not valid")

    def _registry(self, parts: _Parts) -> SchemaRegistrySettings | None:
        """The schema registry, where the form names one (a URL, or anything else of the registry's)."""
        auth = self.registry_auth.strip() or "none"
        given = (self.registry_url.strip(), self.registry_username.strip(), self.registry_password,
                 self.registry_token.strip(), self.registry_ca_pem.strip())
        if not any(given) and auth == "none":
            return None
        credentials: RegistryBasicAuth | RegistryBearerAuth | None = None
        at = "schema_registry.credentials"
        if auth == "basic":
            credentials = parts.check(RegistryBasicAuth, {"username": self.registry_username.strip(),
                                                          "password": self.registry_password}, at)
        elif auth == "bearer":
            credentials = parts.check(RegistryBearerAuth, {"token": self.registry_token.strip()}, at)
        elif auth != "none":
            parts.refuse(at, "Choose none, basic (username and password) or bearer (a token)")
        return parts.check(SchemaRegistrySettings, {"url": self.registry_url.strip(), "credentials": credentials,
                                                    "ca_pem": self.registry_ca_pem.strip() or None}, "schema_registry")


_REPLAY_MODES = ("offset", "earliest", "latest", "timestamp", "shift")
_MINUTE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?$")


def _offset_input(topic: str, partition: int) -> str:
    return f"offset:{topic}|{partition}"


class ReplayForm(PortalForm):
    """The replay form: the partitions chosen (``tp``, "topic|partition"), where to move them, and on
    the confirmation step the previewed change itself (``patch``, ``etag``, ``action=apply``)."""

    # Extra inputs are kept: one "offset:<topic>|<partition>" per partition of the pipeline.
    model_config = ConfigDict(extra="allow")

    tp: list[str] = []
    mode: str = ""
    replay_mode: str = "append"
    clamp: str = ""
    timestamp: str = ""
    shift: str = ""
    action: str = ""
    patch: str = ""
    etag: str = ""

    FIELDS = {
        "offsets": "partitions", "topics": "partitions", "partitions": "partitions", "to_timestamp": "timestamp",
        "by_duration": "timestamp", "shift_by": "shift", "replay_mode": "replay_mode", "reset": "mode",
        "clamp": "clamp",
    }

    @classmethod
    def initial(cls) -> ReplayForm:
        return cls(mode="earliest", replay_mode="append")

    @property
    def applies(self) -> bool:
        """The confirmation step: apply the change previewed before."""
        return self.action == "apply"

    @property
    def if_match(self) -> str | None:
        """The offsets' ETag the preview saw: applying fails if they moved since."""
        return self.etag if self.applies else None

    def values(self) -> dict[str, Any]:
        shown = self.model_dump(exclude={"tp", "patch", "etag", "action"})
        shown.pop("csrf_token", None)
        return shown

    def chosen(self) -> list[tuple[str, int]]:
        out = []
        for raw in self.tp:
            topic, sep, partition = raw.rpartition("|")
            if sep and topic and partition.isdigit():
                out.append((topic, int(partition)))
        return sorted(set(out))

    def offset(self, topic: str, partition: int) -> str:
        value = (self.model_extra or {}).get(_offset_input(topic, partition), "")
        return str(value[-1] if isinstance(value, list) else value).strip()

    def to_patch(self) -> OffsetsPatch:
        """The change the form asks for: a dry run, or on the confirmation step the previewed change."""
        body, problems = self._requested()
        if problems:
            raise FormInvalid(problems)
        try:
            return OffsetsPatch.model_validate(body)
        except ValidationError as exc:
            raise ValidationFailed.of(exc, "The offsets change is not valid") from None

    @staticmethod
    def confirmation(patch: OffsetsPatch) -> str:
        """The previewed change, for the confirmation step's hidden input."""
        return json.dumps(patch.model_dump(mode="json", exclude={"dry_run"}, exclude_none=True))

    def errors_beside(self, failure: DomainError, partitions: Iterable[PartitionOffsetRead]) -> FormErrors:
        """``errors`` with each partition's offset input known: the services name a partition
        ``offsets.<topic>[<partition>]``, the schema an entry of the change ``offsets[<i>]``."""
        fields = dict(self.FIELDS)
        fields.update({f"offsets.{p.topic}[{p.partition}]": _offset_input(p.topic, p.partition) for p in partitions})
        body, _ = self._requested()
        entries = body.get("offsets")
        for i, entry in enumerate(entries if isinstance(entries, list) else []):
            if isinstance(entry, dict):
                fields[f"offsets[{i}]"] = _offset_input(str(entry.get("topic")), entry.get("partition", ""))
        return self.errors(failure, fields)

    def _requested(self) -> tuple[dict[str, Any], FormErrors]:
        """The OffsetsPatch body the form asks for, and the problems of the form itself."""
        problems = FormErrors()
        if self.applies:
            try:
                confirmed = json.loads(self.patch or "{}")
            except ValueError:
                confirmed = None
            if not isinstance(confirmed, dict):
                problems.add(None, "The change to apply could not be read; preview it again")
                return {}, problems
            return {**confirmed, "dry_run": False}, problems
        chosen = self.chosen()
        if not chosen:
            problems.add("partitions", "Choose at least one partition")
        body: dict[str, Any] = {"replay_mode": self.replay_mode, "clamp": self.clamp == "on", "dry_run": True}
        if self.mode not in _REPLAY_MODES:
            problems.add("mode", "Choose how to move the offsets")
        elif self.mode == "offset":
            body["offsets"] = []
            for topic, partition in chosen:
                offset = self.offset(topic, partition)
                if not offset:
                    problems.add(_offset_input(topic, partition), "Enter the offset to move to")
                body["offsets"].append({"topic": topic, "partition": partition, "offset": offset or None})
        else:
            self._scope(chosen, body, problems)
            self._move(body, problems)
        return body, problems

    @staticmethod
    def _scope(chosen: list[tuple[str, int]], body: dict[str, Any], problems: FormErrors) -> None:
        by_topic: dict[str, set[int]] = {}
        for topic, partition in chosen:
            by_topic.setdefault(topic, set()).add(partition)
        # A mode's scope is topics × partitions: every topic must name the same partitions.
        if len({frozenset(p) for p in by_topic.values()}) > 1:
            problems.add("partitions", "For this mode choose the same partition numbers in every topic (or one "
                                       "topic at a time); the offset mode can name any partitions")
        if chosen:
            body["topics"] = sorted(by_topic)
            body["partitions"] = sorted(next(iter(by_topic.values())))

    def _move(self, body: dict[str, Any], problems: FormErrors) -> None:
        if self.mode in ("earliest", "latest"):
            body["reset"] = self.mode
        elif self.mode == "timestamp":
            moment = self.timestamp.strip()
            if not _MINUTE.match(moment):
                problems.add("timestamp", "Enter a date and time (UTC)")
            else:
                # The browser's datetime-local has no zone and may omit seconds; the form says UTC.
                body["to_timestamp"] = moment + (":00" if moment.count(":") == 1 else "") + "+00:00"
        else:
            shift = self.shift.strip()
            if not re.fullmatch(r"-?\d+", shift):
                problems.add("shift", "Enter a whole number of offsets, negative to go back")
            else:
                body["shift_by"] = shift
