"""The pipeline form's expectations input: a rule a line, ``name action: predicate`` (``name:
predicate`` is warn), read into the pipeline's ``contract.expectations`` over what it had written, and
shown back the same way."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from api.pipelines.contract import PipelineContract
from api.portal.forms.base import Parts, put_unless_default

_EXPECTATION_AT = re.compile(r"^contract\.expectations\[(\d+)\]")


@dataclass(frozen=True)
class _Rule:
    """One line of the input: ``name action: predicate`` (the action left out: None)."""

    line: int
    name: str
    action: str | None
    predicate: str


def _rules(text: str) -> tuple[list[_Rule], list[int]]:
    """The input as rules, in order, and the numbers of its malformed lines (blank lines and ``#``
    comments skipped). What is not a name or an action goes to the API as typed (refused there)."""
    rules: list[_Rule] = []
    malformed: list[int] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        head, sep, predicate = line.partition(":")  # neither a name nor an action has a colon; a predicate may
        words = head.split()
        if not sep or len(words) not in (1, 2) or not predicate.strip():
            malformed.append(number)
            continue
        rules.append(_Rule(number, words[0], words[1] if len(words) == 2 else None, predicate.strip()))
    return rules, malformed


def _one_line(predicate: str) -> str:
    """A predicate as a line of the input shows it (one written with line breaks, through the API, is
    shown on one line)."""
    return " ".join(predicate.splitlines()).strip()


def expectations_text(contract: PipelineContract | None) -> str:
    """The input's text for a pipeline's contract."""
    return "\n".join(f"{e.name} {e.action}: {_one_line(e.predicate)}" for e in (contract.expectations if contract else []))


def contract_of(parts: Parts, text: str, written: Mapping[str, Any]) -> dict[str, Any]:
    """The contract: the input's rules over what the pipeline had written. A rule whose name stays keeps
    what the input cannot show (its alert thresholds; its predicate as written, unless the line changed
    it)."""
    contract = dict(written)
    rules, malformed = _rules(text)
    for number in malformed:
        parts.refuse("contract.expectations", f"Line {number}: write name action: predicate, such as "
                                              "positive_amount quarantine: amount > 0 (no action: warn)")
    before = {e.get("name"): e for e in written.get("expectations") or [] if isinstance(e, Mapping)}
    expectations: list[dict[str, Any]] = []
    for rule in rules:
        had: Mapping[str, Any] = before.get(rule.name) or {}
        kept = str(had.get("predicate", ""))
        expectation = {**had, "name": rule.name,
                       "predicate": kept if had and _one_line(kept) == rule.predicate else rule.predicate}
        expectation.pop("action", None)
        put_unless_default(expectation, "action", rule.action or "warn", "warn", had)
        expectations.append(expectation)
    put_unless_default(contract, "expectations", expectations, [], written)
    return contract


def numbered(errors: list[dict[str, Any]], text: str) -> list[dict[str, Any]]:
    """The API's errors of ``contract.expectations[i]…`` saying the line of the input that rule ``i`` is
    on (all the rules' errors sit beside the one input)."""
    lines = [rule.line for rule in _rules(text)[0]]
    out = []
    for error in errors:
        at = _EXPECTATION_AT.match(str(error.get("field", "")))
        if at is not None and int(at.group(1)) < len(lines):
            message = str(error.get("message", "invalid")).removeprefix("Value error, ")
            error = {**error, "message": f"Line {lines[int(at.group(1))]}: {message}"}
        out.append(error)
    return out
