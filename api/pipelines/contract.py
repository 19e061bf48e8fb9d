"""A pipeline's data contract (``contract``): what its rows must be, and what becomes of those that are
not (docs/contracts.md).

Expectations are named rules on the decoded row, as Databricks' Lakeflow expectations: a predicate in a
closed subset of Spark SQL (``spark_jobs.contract.predicates``), parsed here when the pipeline is
written and evaluated by the run's executors on every decoded row, and an action for the rows it is
FALSE for: ``warn`` counts them, ``quarantine`` sends them to the quarantine table with the rule's
name as their reason, ``fail`` fails the run before its commit (nothing written, offsets unmoved).
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, field_validator

from api.core.errors import field_error
from api.pipelines.as_written import AsWritten
from spark_jobs.public import INLET_PREFIX, PredicateError, parse_predicate, predicate_columns

ExpectationAction = Literal["warn", "quarantine", "fail"]
MAX_EXPECTATIONS = 50


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
            parse_predicate(predicate)
        except PredicateError as exc:
            raise ValueError(str(exc)) from None
        return predicate


class PipelineContract(AsWritten):
    """What the pipeline's rows must be (docs/contracts.md)."""

    model_config = ConfigDict(extra="forbid")

    expectations: list[Expectation] = Field(
        default_factory=list, max_length=MAX_EXPECTATIONS,
        description="Rules on each decoded row, evaluated in the order given; a row that violates several "
                    "quarantine rules is quarantined with the first one's name")

    @field_validator("expectations")
    @classmethod
    def _distinct(cls, expectations: list[Expectation]) -> list[Expectation]:
        names = [e.name.lower() for e in expectations]
        if len(set(names)) != len(names):
            raise ValueError("expectation names must not repeat (in any case)")
        return expectations


NO_CONTRACT = PipelineContract()


def check_contract(contract: PipelineContract, *, decodes: bool, delta: bool, columns: list[str] | None) -> None:
    """The contract against the pipeline it is part of: expectations test the decoded rows of a Delta
    target (json values, or a registry format's); ``columns``: the row's columns where they are known
    before a run (a json schema's fields, Inlet's own), whose names the predicates' must be. A registry
    format's columns are known to its runs, which check the predicates against them before reading."""
    if not contract.expectations:
        return
    if not delta:
        raise field_error("contract.expectations", "expectations test the rows written to a Delta table: a Kafka "
                                                   "target's records are forwarded as they are")
    if not decodes:
        raise field_error("contract.expectations", "expectations test a decoded row's columns: value_format json or a "
                                                   "registry format (avro, protobuf, json_schema)")
    if columns is None:
        return
    known = {name.lower() for name in columns}
    for i, expectation in enumerate(contract.expectations):
        unknown = sorted(name for name in predicate_columns(parse_predicate(expectation.predicate))
                         if name.split(".")[0].lower() not in known and not name.startswith(INLET_PREFIX))
        if unknown:
            raise field_error(f"contract.expectations.{i}.predicate",
                              f"not columns of the table: {', '.join(unknown)}")
