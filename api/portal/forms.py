"""The portal's forms: one pydantic model each, read with FastAPI's ``Form()`` (the pipeline list's
filters, the offset lookup and the history's page with ``Query()``), and how each becomes the body the
API itself takes.

A form model holds the text the browser sent, so reading one never fails: a refusal is shown on the
form's page, never as a JSON 422. Turning a form into the API's schema (``spec()``, ``to_patch()``)
raises ``ValidationFailed`` whose errors name fields as the API names them (``source.topics``,
``schedule.cron``). Where the API schema has a union (a schedule, credentials, a target), the form has
already chosen the member and validates that member on its own, so no error is ever named after
pydantic's label for a union member. Each form's ``FIELDS`` maps those API names, which the services'
own errors use too, to the form's inputs; rules of a form itself (choose a partition, enter a time)
raise ``FormInvalid``, keyed by the inputs directly. The CSRF token every form carries is checked by
``auth`` before a page reads its form (the sign-in form's, which has no session yet, excepted).

A form that changes or deletes something saved carries the ``etag`` of what its page showed, sent
as the API's If-Match: a change made by someone else in between is refused (412), never overwritten.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from api.connections.schemas import (
    ConnectionRead,
    ConnectionSpec,
    OAuthCredentials,
    RegistryBasicAuth,
    RegistryBearerAuth,
    SaslCredentials,
    SchemaRegistrySettings,
    SslSettings,
)
from api.core.errors import Conflict, DomainError, PreconditionFailed, ValidationFailed, validation_errors
from api.offsets.schemas import MAX_OFFSET, OffsetsPatch, PartitionOffsetRead
from api.pipelines.schemas import (
    REGISTRY_FORMATS,
    TOPIC_PATTERN,
    CronSchedule,
    DeltaTarget,
    IntervalSchedule,
    KafkaSource,
    KafkaTarget,
    PipelineRead,
    RegistrySchema,
    PipelineSpec,
)
from api.portal.views import FormErrors
from api.tenancy.schemas import ApiKeyCreate

M = TypeVar("M", bound=BaseModel)

_MINUTE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?\Z")


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
        out = route_errors([self.refined(error) for error in failure.errors or []],
                           self.FIELDS if fields is None else fields)
        if isinstance(failure, PreconditionFailed):
            out.add(None, "It was changed by someone else after this page was shown, and nothing was done: "
                          "look at it again and retry")
        elif isinstance(failure, Conflict) and self.CONFLICT_FIELD:
            out.add(self.CONFLICT_FIELD, failure.detail)
        elif not out:
            out.add(None, failure.detail)
        return out

    def refined(self, error: dict[str, Any]) -> dict[str, Any]:
        """``error`` named more precisely than its schema could name it (a form's rule of a whole part)."""
        return error


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


def _put(out: dict[str, Any], key: str, value: Any, default: Any, written: Mapping[str, Any]) -> None:
    """``out[key] = value``, unless ``value`` is the API's default and the definition did not write ``key``."""
    if value != default or key in written:
        out[key] = value


def _given(out: dict[str, Any], key: str, text: str) -> None:
    """``out[key]``: the input's text, where it has any (an empty required input is "Field required")."""
    if text.strip():
        out[key] = text.strip()


def _written_version(chosen: RegistrySchema | None) -> str:
    """A registry schema's version as its input shows it: empty unless the pipeline wrote one."""
    return str(chosen.version) if chosen is not None and "version" in chosen.model_fields_set else ""


def _words(text: str) -> list[str]:
    return [word for word in re.split(r"[,\s]+", text.strip()) if word]


def _utc_moment(text: str) -> str | None:
    """A datetime-local input's text (no zone, seconds optional; the forms say UTC) as an aware ISO time."""
    moment = text.strip()
    if not _MINUTE.match(moment):
        return None
    return moment + (":00" if moment.count(":") == 1 else "") + "+00:00"


def _utc_input(moment: datetime | None) -> str:
    """A time as a datetime-local input shows it, in UTC."""
    return "" if moment is None else moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")


# The options a new pipeline's form writes even at their defaults (it always has); an edit writes what the
# pipeline had written, so that saving an unchanged form changes nothing.
_NEW_PIPELINE_WRITES: Mapping[str, Mapping[str, Any]] = {
    "source": {"value_format": True, "starting_offsets": True}, "target": {}, "schedule": {"timezone": True},
}
# Rules of the whole source (pydantic names them "source"), by the start of their message, shown beside
# the input they concern rather than beside the topics.
_SOURCE_RULES = (
    ("value_format json needs a schema", "source.schema"), ("schema", "source.schema"),
    ("key_format is not used", "source.key_format"), ("key_schema", "source.key_schema.subject"),
    ("give starting_offsets or starting_timestamp", "source.starting_timestamp"),
    ("starting_offsets names topics", "source.starting_offsets"),
)


class PipelineForm(PortalForm):
    """The pipeline form, new and edit: a Kafka source (topics or a pattern, the value's and the key's
    formats, where new partitions start, limits), a Delta or a Kafka target, a schedule kind and its
    inputs, and the state.

    Inputs of a choice not taken (the interval of a cron schedule, the Kafka target's of a Delta one,
    the subject of a format without a registry: the page hides them) are not sent. An option at the
    API's default is written only where the pipeline had written it (``_NEW_PIPELINE_WRITES`` for a new
    one), so that an unchanged form saved is no change, and Terraform sees no drift."""

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
    target_connection_id: str = ""
    target_topic: str = ""
    create_topic: str = ""
    create_partitions: str = ""
    create_replication_factor: str = ""
    create_config: str = ""
    schedule_kind: str = "none"
    interval_seconds: str = ""
    cron: str = ""
    timezone: str = ""
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
        "target.topic": "target_topic", "target.create_topic": "create_partitions",
        "target.create_topic.partitions": "create_partitions",
        "target.create_topic.replication_factor": "create_replication_factor",
        "target.create_topic.config": "create_config",
        "schedule": "schedule", "schedule.cron": "cron", "schedule.timezone": "timezone",
        "schedule.interval_seconds": "interval_seconds",
    }
    CONFLICT_FIELD = "name"

    @classmethod
    def initial(cls) -> PipelineForm:
        return cls(topics_kind="topics", value_format="string", starting_offsets="earliest", target_type="delta",
                   schedule_kind="none", timezone="UTC", state="active", on_data_loss="fail",
                   starting_timestamp_strategy="error")

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
            "starting_timestamp": _utc_input(source.starting_timestamp),
            "starting_timestamp_strategy": source.starting_timestamp_strategy,
            "max_offsets_per_run": str(source.max_offsets_per_run or ""),
            "commit_to_group": source.commit_to_group or "",
            "include_headers": "on" if source.include_headers else "", "on_data_loss": source.on_data_loss,
            "target_type": target.type, "etag": etag,
            "schedule_kind": ("none" if schedule is None
                              else "cron" if isinstance(schedule, CronSchedule) else "interval"),
            "cron": schedule.cron if isinstance(schedule, CronSchedule) else "",
            "timezone": schedule.timezone if isinstance(schedule, CronSchedule) else "UTC",
            "interval_seconds": str(schedule.interval_seconds) if isinstance(schedule, IntervalSchedule) else "",
        }
        if isinstance(target, KafkaTarget):
            creation = target.create_topic
            values.update(target_connection_id=str(target.connection_id), target_topic=target.topic,
                          create_topic="on" if creation else "",
                          create_partitions=str(creation.partitions) if creation else "",
                          create_replication_factor=str(creation.replication_factor) if creation else "",
                          create_config=options_text(creation.config) if creation else "")
        else:
            values.update(target_path=target.path, partition_by=", ".join(target.partition_by))
        return cls.model_validate(values)

    def errors(self, failure: DomainError, fields: Mapping[str, str] | None = None) -> FormErrors:
        if fields is None and self.starting_offsets == "offsets":
            fields = {**self.FIELDS, "source.starting_offsets": "starting_offsets_json"}
        return super().errors(failure, fields)

    def refined(self, error: dict[str, Any]) -> dict[str, Any]:
        if error.get("field") != "source":
            return error
        message = str(error.get("message", "")).removeprefix("Value error, ")
        field = next((at for start, at in _SOURCE_RULES if message.startswith(start)), "source")
        return {**error, "field": field}

    def spec(self, stored: Mapping[str, Any] | None = None) -> PipelineSpec:
        """The pipeline the form describes, as the API takes it; ``stored``: the definition an edit
        changes (``{source, target, schedule}`` as stored), whose written options stay written."""
        written = _NEW_PIPELINE_WRITES
        if stored is not None:
            written = {part: stored.get(part) or {} for part in _NEW_PIPELINE_WRITES}
        parts = _Parts()
        source = parts.check(KafkaSource, self._source(parts, written["source"]), "source")
        return parts.whole(PipelineSpec, {"name": self.name.strip(), "source": source,
                                          "target": self._target(parts, written["target"]),
                                          "schedule": self._schedule(parts, written["schedule"]),
                                          "state": self.state.strip() or "active"},
                           "The pipeline is not valid")

    def _source(self, parts: _Parts, written: Mapping[str, Any]) -> dict[str, Any]:
        source: dict[str, Any] = {}
        _given(source, "connection_id", self.connection_id)
        if self.topics_kind.strip() == "pattern":
            source["topic_pattern"] = self.topic_pattern.strip() or None
        else:
            source["topics"] = _words(self.topics) or None
        value_format = self.value_format.strip() or "raw"
        _put(source, "value_format", value_format, "raw", written)
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
        _put(source, "include_headers", self.include_headers == "on", False, written)
        _put(source, "on_data_loss", self.on_data_loss.strip() or "fail", "fail", written)
        return source

    @staticmethod
    def _registry_schema(parts: _Parts, source: dict[str, Any], part: str, fmt: str, subject: str,
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

    def _start(self, parts: _Parts, source: dict[str, Any], written: Mapping[str, Any]) -> None:
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
            moment = _utc_moment(self.starting_timestamp)
            if moment is None:
                parts.refuse("source.starting_timestamp", "Enter a date and time (UTC)")
            else:
                source["starting_timestamp"] = moment
            _put(source, "starting_timestamp_strategy", self.starting_timestamp_strategy.strip() or "error", "error",
                 written)
        else:
            _put(source, "starting_offsets", start, "earliest", written)

    def _target(self, parts: _Parts, written: Mapping[str, Any]) -> DeltaTarget | KafkaTarget | None:
        if self.target_type.strip() == "kafka":
            target: dict[str, Any] = {"type": "kafka", "topic": self.target_topic.strip()}
            _given(target, "connection_id", self.target_connection_id)
            if self.create_topic == "on":
                made: Mapping[str, Any] = written.get("create_topic") or {}
                creation: dict[str, Any] = {}
                _given(creation, "partitions", self.create_partitions)
                factor = self.create_replication_factor.strip() or "-1"
                _put(creation, "replication_factor", -1 if factor == "-1" else factor, -1, made)
                _put(creation, "config", _settings_lines(self.create_config, parts, "target.create_topic.config",
                                                         "retention.ms=604800000"), {}, made)
                target["create_topic"] = creation
            return parts.check(KafkaTarget, target, "target")
        delta: dict[str, Any] = {"type": "delta", "path": self.target_path.strip()}
        _put(delta, "partition_by", _words(self.partition_by), [], written)
        return parts.check(DeltaTarget, delta, "target")

    def _schedule(self, parts: _Parts, written: Mapping[str, Any]) -> CronSchedule | IntervalSchedule | None:
        kind = self.schedule_kind.strip()
        if kind == "interval":
            return parts.check(IntervalSchedule, {"interval_seconds": self.interval_seconds.strip()}, "schedule")
        if kind == "cron":
            cron: dict[str, Any] = {"cron": self.cron.strip()}
            _put(cron, "timezone", self.timezone.strip() or "UTC", "UTC", written)
            return parts.check(CronSchedule, cron, "schedule")
        return None


SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
TLS_PROTOCOLS = ("SSL", "SASL_SSL")
_KEEP: Any = object()  # an edit's write-only input left empty: the stored value stays (the key is omitted)


def _option_value(text: str) -> str | int | bool:
    """A client option as the API stores it: true/false and whole numbers typed, the rest text."""
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    return int(text) if re.fullmatch(r"-?\d{1,18}", text) else text


def options_text(options: Mapping[str, str | int | bool]) -> str:
    """Client options as the form's text: one ``name=value`` a line."""
    return "\n".join(f"{name}={str(value).lower() if isinstance(value, bool) else value}"
                     for name, value in sorted(options.items()))


def _settings_lines(text: str, parts: _Parts, at: str, example: str) -> dict[str, str]:
    """``name=value`` lines (blank lines and ``#`` comments skipped); a malformed line is refused at ``at``."""
    out: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, value = line.partition("=")
        if not sep or not name.strip():
            parts.refuse(at, f"Line {number}: write name=value, such as {example}")
            continue
        out[name.strip()] = value.strip()
    return out


class _CredentialInputs(PortalForm):
    """The inputs of a connection's write-only credentials, the cluster's (a SASL username and password,
    or OAuth client credentials) and its schema registry's, shared by the connection form and the
    rotation form; none is ever sent back to the browser."""

    username: str = ""
    password: str = ""
    oauth_client_id: str = ""
    oauth_client_secret: str = ""
    oauth_token_endpoint_url: str = ""
    oauth_scope: str = ""
    registry_username: str = ""
    registry_password: str = ""
    registry_token: str = ""
    etag: str = ""

    NOT_SHOWN_BACK = frozenset({"password", "oauth_client_secret", "registry_password", "registry_token"})

    @property
    def oauth(self) -> bool:
        """Whether the cluster's credentials are OAuth's (their errors then sit beside the client id)."""
        return bool(self.oauth_client_id.strip() or self.oauth_token_endpoint_url.strip())

    def errors(self, failure: DomainError, fields: Mapping[str, str] | None = None) -> FormErrors:
        if fields is None and self.oauth:
            fields = {**self.FIELDS, "credentials": "oauth_client_id"}
        return super().errors(failure, fields)

    def _sasl_credentials(self) -> dict[str, Any]:
        return {"username": self.username.strip(), "password": self.password}

    def _oauth_credentials(self) -> dict[str, Any]:
        return {"client_id": self.oauth_client_id.strip(), "client_secret": self.oauth_client_secret,
                "token_endpoint_url": self.oauth_token_endpoint_url.strip(), "scope": self.oauth_scope.strip() or None}


class ConnectionForm(_CredentialInputs):
    """The connection form, new and edit: a security protocol and the inputs it uses (a SASL mechanism
    with a username and password or OAuth client credentials, TLS settings), client options, and an
    optional schema registry (basic auth or a bearer token).

    Inputs of parts the chosen protocol does not use (the page hides them) are not sent, as the
    pipeline form leaves out the subject of a format that has none. On an edit, write-only inputs left
    empty keep what is stored, as an omitted write-only field does on PUT; credentials of another kind
    (OAuth instead of a password) must be entered."""

    name: str = ""
    bootstrap_servers: str = ""
    security_protocol: str = ""
    sasl_mechanism: str = ""
    ca_pem: str = ""
    certificate_pem: str = ""
    key_pem: str = ""
    key_password: str = ""
    endpoint_identification: str = ""
    options: str = ""
    registry_url: str = ""
    registry_auth: str = ""
    registry_ca_pem: str = ""
    registry_endpoint_identification: str = ""

    FIELDS = {
        "name": "name", "bootstrap_servers": "bootstrap_servers", "security_protocol": "security_protocol",
        "sasl_mechanism": "sasl_mechanism", "credentials": "username", "credentials.username": "username",
        "credentials.password": "password", "credentials.client_id": "oauth_client_id",
        "credentials.client_secret": "oauth_client_secret",
        "credentials.token_endpoint_url": "oauth_token_endpoint_url", "credentials.scope": "oauth_scope",
        "ssl": "key_pem", "ssl.ca_pem": "ca_pem", "ssl.certificate_pem": "certificate_pem", "ssl.key_pem": "key_pem",
        "ssl.key_password": "key_password", "ssl.endpoint_identification": "endpoint_identification",
        "options": "options",
        "schema_registry": "registry_ca_pem", "schema_registry.url": "registry_url",
        "schema_registry.ca_pem": "registry_ca_pem", "schema_registry.credentials": "registry_auth",
        "schema_registry.credentials.username": "registry_username",
        "schema_registry.credentials.password": "registry_password",
        "schema_registry.credentials.token": "registry_token",
        "schema_registry.endpoint_identification": "registry_endpoint_identification",
    }
    CONFLICT_FIELD = "name"
    # Credentials are write-only: passwords, secrets, keys and tokens are never sent back, even into their own fields.
    NOT_SHOWN_BACK = _CredentialInputs.NOT_SHOWN_BACK | {"key_pem", "key_password"}

    @classmethod
    def initial(cls) -> ConnectionForm:
        return cls(security_protocol="PLAINTEXT", registry_auth="none")

    @classmethod
    def of(cls, conn: ConnectionRead, etag: str) -> ConnectionForm:
        """The edit form of a saved connection (write-only inputs empty: empty keeps them)."""
        ssl, registry = conn.ssl, conn.schema_registry
        return cls(
            name=conn.name, bootstrap_servers=conn.bootstrap_servers, security_protocol=conn.security_protocol,
            sasl_mechanism=conn.sasl_mechanism or "", options=options_text(conn.options),
            ca_pem=(ssl.ca_pem or "") if ssl else "", certificate_pem=(ssl.certificate_pem or "") if ssl else "",
            endpoint_identification=ssl.endpoint_identification if ssl else "https",
            registry_url=registry.url if registry else "", registry_auth=registry.auth if registry else "none",
            registry_ca_pem=(registry.ca_pem or "") if registry else "",
            registry_endpoint_identification=registry.endpoint_identification if registry else "https",
            etag=etag,
        )

    @property
    def oauth(self) -> bool:
        return self.sasl_mechanism.strip() == "OAUTHBEARER"

    def spec(self, stored: ConnectionRead | None = None) -> ConnectionSpec:
        """The connection the form describes, as the API takes it; ``stored``: the connection an edit
        changes (its write-only parts are kept where their inputs are empty)."""
        parts = _Parts()
        protocol = self.security_protocol.strip() or "PLAINTEXT"
        mechanism = self.sasl_mechanism.strip() if protocol in SASL_PROTOCOLS else ""
        if protocol in SASL_PROTOCOLS and not mechanism:
            parts.refuse("sasl_mechanism", f"security_protocol {protocol} needs a SASL mechanism")
        body: dict[str, Any] = {
            "name": self.name.strip(), "bootstrap_servers": self.bootstrap_servers.strip(),
            "security_protocol": protocol, "sasl_mechanism": mechanism or None,
            "options": {k: _option_value(v) for k, v in _settings_lines(self.options, parts, "options",
                                                                         "client.id=inlet").items()},
            "ssl": self._ssl(parts, stored) if protocol in TLS_PROTOCOLS else None,
            "schema_registry": self._registry(parts, stored),
        }
        credentials = self._credentials(parts, mechanism, stored)
        if credentials is not _KEEP:
            body["credentials"] = credentials
        return parts.whole(ConnectionSpec, body, "The connection is not valid")

    def _credentials(self, parts: _Parts, mechanism: str, stored: ConnectionRead | None) -> Any:
        """The cluster's credentials for ``mechanism``: None without SASL, ``_KEEP`` on an edit that
        leaves the stored ones of the same kind."""
        if not mechanism:
            return None
        oauth = mechanism == "OAUTHBEARER"
        given = ((self.oauth_client_id, self.oauth_client_secret, self.oauth_token_endpoint_url, self.oauth_scope)
                 if oauth else (self.username, self.password))
        if not any(value.strip() for value in given):
            same_kind = stored is not None and stored.sasl_mechanism is not None and stored.has_credentials \
                and (stored.sasl_mechanism == "OAUTHBEARER") == oauth
            return _KEEP if same_kind else None
        if oauth:
            return parts.check(OAuthCredentials, self._oauth_credentials(), "credentials")
        return parts.check(SaslCredentials, self._sasl_credentials(), "credentials")

    def _ssl(self, parts: _Parts, stored: ConnectionRead | None) -> SslSettings | None:
        """TLS settings where the form gives any (or the connection had them); an empty key input keeps
        the stored key while a client certificate is given, and removes it with the certificate."""
        ssl: dict[str, Any] = {"ca_pem": self.ca_pem.strip() or None,
                               "certificate_pem": self.certificate_pem.strip() or None,
                               "endpoint_identification": self.endpoint_identification.strip() or "https"}
        if self.key_pem.strip() or self.key_password:
            ssl.update(key_pem=self.key_pem.strip() or None, key_password=self.key_password or None)
        elif ssl["certificate_pem"] is None and stored is not None and stored.ssl is not None and stored.ssl.has_key:
            ssl.update(key_pem=None, key_password=None)
        had = stored is not None and stored.ssl is not None
        if not had and not any(ssl.get(k) for k in ("ca_pem", "certificate_pem", "key_pem")) \
                and ssl["endpoint_identification"] == "https":
            return None
        return parts.check(SslSettings, ssl, "ssl")

    def _registry(self, parts: _Parts, stored: ConnectionRead | None) -> SchemaRegistrySettings | None:
        """The schema registry, where the form names one (a URL, or anything else of the registry's)."""
        auth = self.registry_auth.strip() or "none"
        basic, bearer = (self.registry_username.strip(), self.registry_password), self.registry_token.strip()
        if not any((self.registry_url.strip(), *basic, bearer, self.registry_ca_pem.strip())):
            return None
        registry: dict[str, Any] = {"url": self.registry_url.strip(), "ca_pem": self.registry_ca_pem.strip() or None,
                                    "endpoint_identification": self.registry_endpoint_identification.strip() or "https"}
        kept = stored is not None and stored.schema_registry is not None and stored.schema_registry.auth == auth
        at = "schema_registry.credentials"
        if auth == "basic" and (any(basic) or not kept):
            registry["credentials"] = parts.check(RegistryBasicAuth, {"username": basic[0], "password": basic[1]}, at)
        elif auth == "bearer" and (bearer or not kept):
            registry["credentials"] = parts.check(RegistryBearerAuth, {"token": bearer}, at)
        elif auth == "none":
            registry["credentials"] = None
        elif auth not in ("basic", "bearer"):
            parts.refuse(at, "Choose none, basic (username and password) or bearer (a token)")
        return parts.check(SchemaRegistrySettings, registry, "schema_registry")


class RotationForm(_CredentialInputs):
    """New credentials for a saved connection: the cluster's (of its SASL mechanism's kind) and the
    schema registry's (of its kind), each optional; it becomes the JSON Merge Patch the API's PATCH
    takes, and the secret a new version."""

    FIELDS = {key: value for key, value in ConnectionForm.FIELDS.items()
              if key.startswith(("credentials", "schema_registry.credentials"))}

    def to_patch(self, conn: ConnectionRead) -> dict[str, Any]:
        """The merge patch that writes the new credentials of ``conn`` (secrets as typed: the service
        validates the patched connection with the API's schema)."""
        parts = _Parts()
        patch: dict[str, Any] = {}
        if conn.sasl_mechanism == "OAUTHBEARER":
            oauth = self._oauth_credentials()
            if any(oauth.values()) and parts.check(OAuthCredentials, oauth, "credentials") is not None:
                patch["credentials"] = oauth
        elif conn.sasl_mechanism is not None:
            sasl = self._sasl_credentials()
            if any(sasl.values()) and parts.check(SaslCredentials, sasl, "credentials") is not None:
                patch["credentials"] = sasl
        auth = conn.schema_registry.auth if conn.schema_registry else "none"
        registry: dict[str, Any] = {}
        if auth == "basic":
            registry = {"username": self.registry_username.strip(), "password": self.registry_password}
        elif auth == "bearer":
            registry = {"token": self.registry_token.strip()}
        model = RegistryBasicAuth if auth == "basic" else RegistryBearerAuth
        if any(registry.values()) and parts.check(model, registry, "schema_registry.credentials") is not None:
            patch["schema_registry"] = {"credentials": registry}
        if parts.errors:
            raise ValidationFailed("The new credentials are not valid", errors=parts.errors)
        if not patch:
            problems = FormErrors()
            problems.add(None, "Enter the new credentials: nothing was changed")
            raise FormInvalid(problems)
        return patch


# Every way the API moves offsets: explicit offsets, a reset (earliest, latest), a time, a duration back
# from now, a shift, and back to the pipeline's starting offsets (the API's DELETE of the offsets).
_REPLAY_MODES = ("offset", "earliest", "latest", "timestamp", "duration", "shift", "starting")


def _offset_input(topic: str, partition: int) -> str:
    return f"offset:{topic}|{partition}"


class ReplayForm(PortalForm):
    """The replay form: the partitions chosen (``tp``, "topic|partition"), where to move them, and on
    the confirmation step the previewed change itself (``patch``, ``etag``, ``action=apply``).

    The change is an ``OffsetsPatch``, or None for the ``starting`` mode: every partition back to the
    pipeline's starting offsets, which the API does as ``DELETE /pipelines/{id}/offsets``."""

    # Extra inputs are kept: one "offset:<topic>|<partition>" per partition of the pipeline.
    model_config = ConfigDict(extra="allow")

    tp: list[str] = []
    mode: str = ""
    replay_mode: str = "append"
    clamp: str = ""
    timestamp: str = ""
    duration: str = ""
    shift: str = ""
    action: str = ""
    patch: str = ""
    etag: str = ""

    FIELDS = {
        "offsets": "partitions", "topics": "partitions", "partitions": "partitions", "to_timestamp": "timestamp",
        "by_duration": "duration", "shift_by": "shift", "replay_mode": "replay_mode", "reset": "mode",
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
    def dry_run(self) -> bool:
        return not self.applies

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

    def to_patch(self) -> OffsetsPatch | None:
        """The change the form asks for: a dry run, or on the confirmation step the previewed change;
        None: back to the starting offsets (``dry_run`` says which step)."""
        body, problems = self._requested()
        if problems:
            raise FormInvalid(problems)
        if body is None:
            return None
        try:
            return OffsetsPatch.model_validate(body)
        except ValidationError as exc:
            raise ValidationFailed.of(exc, "The offsets change is not valid") from None

    @staticmethod
    def confirmation(patch: OffsetsPatch | None) -> str:
        """The previewed change, for the confirmation step's hidden input ("null": the starting offsets)."""
        if patch is None:
            return "null"
        return json.dumps(patch.model_dump(mode="json", exclude={"dry_run"}, exclude_none=True))

    def errors_beside(self, failure: DomainError, partitions: Iterable[PartitionOffsetRead]) -> FormErrors:
        """``errors`` with each partition's offset input known: the services name a partition
        ``offsets.<topic>[<partition>]``, the schema an entry of the change ``offsets[<i>]``."""
        fields = dict(self.FIELDS)
        fields.update({f"offsets.{p.topic}[{p.partition}]": _offset_input(p.topic, p.partition) for p in partitions})
        body, _ = self._requested()
        entries = (body or {}).get("offsets")
        for i, entry in enumerate(entries if isinstance(entries, list) else []):
            if isinstance(entry, dict):
                fields[f"offsets[{i}]"] = _offset_input(str(entry.get("topic")), entry.get("partition", ""))
        return self.errors(failure, fields)

    def _requested(self) -> tuple[dict[str, Any] | None, FormErrors]:
        """The OffsetsPatch body the form asks for (None: back to the starting offsets), and the
        problems of the form itself."""
        problems = FormErrors()
        if self.applies:
            try:
                confirmed = json.loads(self.patch)
            except ValueError:
                confirmed = []
            if confirmed is None:
                return None, problems
            if not isinstance(confirmed, dict):
                problems.add(None, "The change to apply could not be read; preview it again")
                return {}, problems
            return {**confirmed, "dry_run": False}, problems
        if self.mode == "starting":
            if self.replay_mode == "replace":
                problems.add("replay_mode", "Back to the starting offsets, records read again are appended: "
                                            "choose append")
            return None, problems
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
            moment = _utc_moment(self.timestamp)
            if moment is None:
                problems.add("timestamp", "Enter a date and time (UTC)")
            else:
                body["to_timestamp"] = moment
        elif self.mode == "duration":
            if not self.duration.strip():
                problems.add("duration", "Enter how far back, such as PT1H (an hour) or P1D (a day)")
            else:
                body["by_duration"] = self.duration.strip().upper()
        else:
            shift = self.shift.strip()
            if not re.fullmatch(r"-?\d+", shift):
                problems.add("shift", "Enter a whole number of offsets, negative to go back")
            else:
                body["shift_by"] = shift


class DeleteForm(PortalForm):
    """A delete's confirmation: the name typed again, and the ETag of what the confirmation page showed
    (a delete of something changed since is refused, as a DELETE with If-Match is)."""

    confirm_name: str = ""
    etag: str = ""

    FIELDS = {"confirm_name": "confirm_name"}

    def check(self, name: str) -> None:
        """``FormInvalid`` unless the name typed is ``name``."""
        if self.confirm_name.strip() != name:
            problems = FormErrors()
            problems.add("confirm_name", f"Type {name} to confirm")
            raise FormInvalid(problems)


class ApiKeyForm(PortalForm):
    """The new-API-key form: a name and a role, as ``POST /api-keys`` takes them."""

    name: str = ""
    role: str = ""

    FIELDS = {"name": "name", "role": "role"}

    @classmethod
    def initial(cls) -> ApiKeyForm:
        return cls(role="viewer")

    def spec(self) -> ApiKeyCreate:
        try:
            return ApiKeyCreate.model_validate({"name": self.name.strip(), "role": self.role.strip()})
        except ValidationError as exc:
            raise ValidationFailed.of(exc, "The API key is not valid") from None


class RevokeForm(BaseModel):
    """An API key's revocation: the ETag of the key as the list showed it."""

    etag: str = ""


class OffsetsQuery(BaseModel):
    """The offsets page's GET parameters: the "which run wrote this offset" question (a partition of the
    pipeline and an offset) and the history's page number."""

    topic: str = ""
    partition: str = ""
    offset: str = ""
    page: str = "1"

    @property
    def asked(self) -> bool:
        return bool(self.topic or self.partition or self.offset)

    @property
    def number(self) -> int:
        """The history's page; anything unexpected means the first."""
        return int(self.page) if self.page.isdigit() and 0 < int(self.page) < 10_000 else 1

    def question(self) -> tuple[str, int, int]:
        """(topic, partition, offset) as the lookup takes them; ``FormInvalid`` naming each input that is not."""
        problems = FormErrors()
        topic = self.topic.strip()
        if not re.fullmatch(TOPIC_PATTERN, topic):
            problems.add("topic", "Choose a topic")
        partition, offset = self.partition.strip(), self.offset.strip()
        if not partition.isdigit() or int(partition) > 1_000_000:
            problems.add("partition", "Enter a partition number (0, 1, …)")
        if not offset.isdigit() or int(offset) > MAX_OFFSET:
            problems.add("offset", "Enter an offset (0 or more)")
        if problems:
            raise FormInvalid(problems)
        return topic, int(partition), int(offset)
