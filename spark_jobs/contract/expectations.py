"""A pipeline's expectations in the executors: each decoded batch's rows tested against every rule
(``contract.expectations`` of the pipeline; ``api.pipelines.contract``), counted per rule, and acted on
before anything is written.

The rules test the rows that decoded (a record already bound for the quarantine is not tested), in
the table's columns. ``warn`` counts; ``quarantine`` gives a violating row the reason ``expectation
<name>`` (the first such rule's), so ``decode.split_rows`` sends its record to the quarantine table;
``fail`` raises ``expectation_failed``, which fails the task, the Spark job and so the run, before its
commit. A keyed table's deletes carry only their key and are not tested.

Pickled to the tasks with their plan: no pydantic here (``spark_jobs.contract.spec`` only under TYPE_CHECKING).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import pyarrow as pa
import pyarrow.compute as pc

from spark_jobs.columns import DELETED
from spark_jobs.contract.predicates import Node, PredicateError, parse, violations
from spark_jobs.errors import JobError

if TYPE_CHECKING:
    from spark_jobs.contract.spec import ExpectationSpec

Action = Literal["warn", "quarantine", "fail"]
REASON = "expectation "  # + the rule's name: a quarantine row's reason


@dataclass(frozen=True)
class Rule:
    name: str
    action: Action
    predicate: Node


@dataclass(frozen=True)
class Expectations:
    """A pipeline's rules, parsed once on the driver and shipped to the tasks."""

    rules: tuple[Rule, ...]

    @classmethod
    def of(cls, specs: Sequence[ExpectationSpec]) -> Expectations | None:
        """The rules of a run's spec; None without any (the tasks then test nothing)."""
        if not specs:
            return None
        try:
            return cls(tuple(Rule(s.name, s.action, parse(s.predicate)) for s in specs))
        except PredicateError as exc:  # written through the API, which parsed it: only a hand-made spec
            raise JobError("invalid_spec", f"an expectation's predicate: {exc}") from None

    def check(self, schema: pa.Schema) -> None:
        """Each rule applies to rows of ``schema`` (its columns exist, its operators fit their types),
        on the driver before anything is read: ``invalid_spec`` naming the rule otherwise."""
        empty = schema.empty_table()
        for rule in self.rules:
            try:
                violations(rule.predicate, empty)
            except PredicateError as exc:
                raise JobError("invalid_spec", f"expectation {rule.name}: {exc}") from None

    def tally(self) -> Verdicts:
        return Verdicts(self)


@dataclass
class Verdicts:
    """One task's tests of its batches (``test``), and its counts: per rule, the rows that violated it,
    and the rows that violated at least one."""

    expectations: Expectations
    counts: dict[str, int] = field(default_factory=dict)
    rows_violating: int = 0

    def __post_init__(self) -> None:
        self.counts = {rule.name: 0 for rule in self.expectations.rules}

    def test(self, rows: pa.Table, reasons: pa.Array) -> pa.Array:
        """``reasons`` (per row: why its record goes to the quarantine; null: it does not) with the
        quarantine rules' reasons added; raises ``expectation_failed`` for a fail rule's violation."""
        tested = pc.is_null(reasons)
        if DELETED in rows.schema.names:  # a keyed table's delete: only its key
            tested = pc.and_(tested, pc.invert(rows.column(DELETED).combine_chunks()))
        any_violation = pa.repeat(pa.scalar(False), rows.num_rows)
        for rule in self.expectations.rules:
            try:
                violating = pc.and_(violations(rule.predicate, rows), tested)
            except PredicateError as exc:  # checked against the schema on the driver: a column of another type
                raise JobError("invalid_spec", f"expectation {rule.name}: {exc}") from None
            count = pc.sum(violating).as_py() or 0
            if not count:
                continue
            self.counts[rule.name] += count
            if rule.action == "fail":
                raise JobError("expectation_failed", f"expectation {rule.name} (action fail): {count} row(s) of a "
                                                     "batch violate it; the run commits nothing")
            any_violation = pc.or_(any_violation, violating)
            if rule.action == "quarantine":
                mark = pc.and_(violating, pc.is_null(reasons))
                reasons = pc.if_else(mark, pa.scalar(REASON + rule.name, pa.string()), reasons)
        self.rows_violating += pc.sum(any_violation).as_py() or 0
        return reasons
