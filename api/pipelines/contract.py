"""A pipeline's data contract (``contract``): what its rows must be, what becomes of those that are
not, and which of their fields are sensitive (docs/contracts.md).

Expectations are named rules on the decoded row, as Databricks' Lakeflow expectations: a predicate in a
closed subset of Spark SQL (``spark_jobs.contract.predicates``), parsed here when the pipeline is
written and evaluated by the run's executors on every decoded row, and an action for the rows it is
FALSE for: ``warn`` counts them, ``quarantine`` sends them to the quarantine table with the rule's
name as their reason, ``fail`` fails the run before its commit (nothing written, offsets unmoved).

Sensitive fields are hashed (HMAC-SHA-256 keyed with the tenant's field key, ``api.tenancy.field_keys``),
redacted or dropped in the executors before anything is written, and the quarantine's raw records of
such a pipeline are sealed (``spark_jobs.contract.sensitive``).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from api.core.errors import field_error
from api.pipelines.as_written import AsWritten
from spark_jobs.public import INLET_PREFIX, PredicateError, parse_predicate, predicate_columns

# Every read of a pipeline's definition validates its contract: a predicate is parsed once per process.
_parsed = lru_cache(maxsize=4096)(parse_predicate)
ExpectationAction = Literal["warn", "quarantine", "fail"]
SensitiveAction = Literal["hash", "redact", "drop"]
Evolution = Literal["add", "widen", "fail"]
MAX_EXPECTATIONS = 50
MAX_SENSITIVE = 100


class Expectation(AsWritten):
    """A rule every decoded row should pass, and what to do with the rows that do not."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$", examples=["positive_amount"],
                      description="Names the rule in the run's counts, the quarantine's reasons, metrics and webhooks")
    predicate: str = Field(
        min_length=1, max_length=2000, examples=["amount IS NOT NULL AND amount > 0"],
        description="A Spark SQL condition on the decoded row's columns (a closed subset: literals, columns and "
                    "struct fields, arithmetic, comparisons, IS NULL, IN, BETWEEN, LIKE, AND/OR/NOT, length, "
                    "lower, upper, trim, abs, coalesce). A row violates it when it is FALSE; NULL passes, as in "
                    "a Delta CHECK constraint")
    action: ExpectationAction = Field(
        default="warn",
        description="warn: count the violating rows and write them. quarantine: write them to the quarantine "
                    "table instead, with reason 'expectation <name>'. fail: fail the run before its commit; "
                    "nothing is written and the offsets do not move")
    alert_over_rows: int | None = Field(
        default=None, ge=1, le=10**15,
        description="Send pipeline.expectation_exceeded when a run has more violating rows than this")
    alert_over_ratio: float | None = Field(
        default=None, gt=0, le=1,
        description="Or when more than this share of a run's records violate it")

    @field_validator("predicate")
    @classmethod
    def _parses(cls, predicate: str) -> str:
        try:
            _parsed(predicate)
        except PredicateError as exc:
            raise ValueError(str(exc)) from None
        return predicate


class SensitiveField(AsWritten):
    """A field no file of the pipeline's may hold as it came."""

    model_config = ConfigDict(extra="forbid")

    field: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}(\.[A-Za-z_][A-Za-z0-9_]{0,127}){0,15}$",
                       examples=["customer.email"],
                       description="A column of the row, or a field of a struct column, dotted (hash and redact)")
    action: SensitiveAction = Field(
        description="hash: HMAC-SHA-256 keyed with the tenant's field key, 64 hex characters (the same value "
                    "hashes the same in every pipeline of the tenant, differently in another's). redact: the "
                    "mask REDACTED. drop: not written (a top-level column). hash and redact take STRING fields")

    @model_validator(mode="after")
    def _top_level_drop(self) -> SensitiveField:
        if self.action == "drop" and "." in self.field:
            raise field_error("field", "drop takes a top-level column; hash or redact a field of a struct")
        return self


class PipelineContract(AsWritten):
    """What the pipeline's rows must be (docs/contracts.md)."""

    model_config = ConfigDict(extra="forbid")

    expectations: list[Expectation] = Field(
        default_factory=list, max_length=MAX_EXPECTATIONS,
        description="Rules on each decoded row, evaluated in the order given; a row that violates several "
                    "quarantine rules is quarantined with the first one's name")
    evolution: Evolution = Field(
        default="add",
        description="What a run does when the source's fields differ from the table's columns (a registry "
                    "subject's new version, or a json schema changed): add: new fields become nullable columns, "
                    "a changed type fails the run (schema_incompatible). widen: as add, and a type that widens "
                    "(TINYINT to SMALLINT to INT to BIGINT; FLOAT, or an integer up to INT, to DOUBLE; a DECIMAL's "
                    "precision up at the same scale) widens the column by Delta's type widening (append tables; not "
                    "Protobuf's types); any other change fails. fail: "
                    "any new field or changed type fails the run")
    sensitive: list[SensitiveField] = Field(
        default_factory=list, max_length=MAX_SENSITIVE,
        description="Fields protected in the run's tasks before anything is written, after the expectations "
                    "tested the row; the quarantine's raw key and value of such a pipeline are sealed "
                    "(AES-256-GCM, the tenant's key)")

    @field_validator("expectations")
    @classmethod
    def _distinct(cls, expectations: list[Expectation]) -> list[Expectation]:
        names = [e.name.lower() for e in expectations]
        if len(set(names)) != len(names):
            raise ValueError("expectation names must not repeat (in any case)")
        return expectations

    @field_validator("sensitive")
    @classmethod
    def _once(cls, sensitive: list[SensitiveField]) -> list[SensitiveField]:
        fields = [s.field.lower() for s in sensitive]
        if len(set(fields)) != len(fields):
            raise ValueError("a field is named once (in any case)")
        return sensitive


NO_CONTRACT = PipelineContract()


def check_contract(contract: PipelineContract, *, decodes: bool, delta: bool, keyed: bool, columns: list[str] | None,
                   protected: list[str], identifying: list[str]) -> None:
    """The contract against the pipeline it is part of: it applies to the decoded rows of a Delta target
    (json values, or a registry format's); ``columns``: the row's columns where they are known before a
    run (a json schema's fields, Inlet's own), whose names the predicates' must be; ``protected``: the
    columns a sensitive field may name (the schema's and the Kafka key's); ``identifying``: columns
    that find or place a row (a keyed table's key, partition and clustering columns), never dropped or
    redacted. A registry format's columns are known to its runs, which check both against them before
    reading."""
    for part in ("expectations", "sensitive", "evolution"):
        if not getattr(contract, part) or (part == "evolution" and contract.evolution == "add"):
            continue
        if not delta:
            raise field_error(f"contract.{part}", "a contract applies to the rows written to a Delta table: a Kafka "
                                                  "target's records are forwarded as they are")
        if not decodes:
            raise field_error(f"contract.{part}", "a contract applies to a decoded row's columns: value_format json "
                                                  "or a registry format (avro, protobuf, json_schema)")
    if contract.evolution == "widen" and keyed:
        raise field_error("contract.evolution", "widen applies to append tables: a keyed table's MERGE matches on "
                                                "columns whose type a widening would change (use add or fail)")
    _check_sensitive(contract, columns is not None, protected, identifying)
    if columns is None or not contract.expectations:
        return
    dropped = {s.field.lower() for s in contract.sensitive if s.action == "drop"}
    known = {name.lower() for name in columns} - dropped
    for i, expectation in enumerate(contract.expectations):
        unknown = sorted(name for name in predicate_columns(_parsed(expectation.predicate))
                         if name.split(".")[0].lower() not in known and not name.startswith(INLET_PREFIX))
        if unknown:
            raise field_error(f"contract.expectations.{i}.predicate",
                              f"not columns of the table (or dropped as sensitive): {', '.join(unknown)}")


def _check_sensitive(contract: PipelineContract, known: bool, protected: list[str], identifying: list[str]) -> None:
    names = {name.lower() for name in protected}
    keys = {name.lower() for name in identifying}
    for i, sensitive in enumerate(contract.sensitive):
        top = sensitive.field.split(".")[0].lower()
        if known and top not in names:
            raise field_error(f"contract.sensitive.{i}.field", "not a column of the table (a field of the value, "
                                                                "or key)")
        if top in keys and sensitive.action != "hash":
            raise field_error(f"contract.sensitive.{i}.action", "a key, partition or clustering column finds or "
                                                                 "places the row: hash it (the same value hashes "
                                                                 "the same), never drop or redact it")
