"""The pipeline form's data contract inputs, an entry a line each: the expectations (``name action:
predicate``, ``name: predicate`` is warn) and the sensitive fields (``field action``), read into the
pipeline's ``contract.expectations`` and ``contract.sensitive`` over what it had written, shown back
the same way, and the API's refusal of an entry shown with the line it is on; and the schema
evolution policy, a choice, read into ``contract.evolution`` (add, the API's default, written only
where the pipeline had written it)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from api.pipelines.contract import NO_CONTRACT, PipelineContract
from api.portal.forms.base import Parts, put_unless_default

_ENTRY_AT = re.compile(r"^contract\.(\w+)\[(\d+)\]")

T = TypeVar("T")


@dataclass(frozen=True)
class _Rule:
    """A line of the expectations: ``name action: predicate`` (the action left out: None)."""

    name: str
    action: str | None
    predicate: str


@dataclass(frozen=True)
class _Sensitive:
    """A line of the sensitive fields: ``field action``."""

    field: str
    action: str


def _rule(line: str) -> _Rule | None:
    head, sep, predicate = line.partition(":")  # neither a name nor an action has a colon; a predicate may
    words = head.split()
    if not sep or len(words) not in (1, 2) or not predicate.strip():
        return None
    return _Rule(words[0], words[1] if len(words) == 2 else None, predicate.strip())


def _sensitive(line: str) -> _Sensitive | None:
    words = line.split()
    return _Sensitive(words[0], words[1]) if len(words) == 2 else None


# Each input by the contract's list it writes: how a line reads, and how a malformed one is refused.
_READERS: Mapping[str, Callable[[str], Any]] = {"expectations": _rule, "sensitive": _sensitive}
_HOW = {
    "expectations": "write name action: predicate, such as positive_amount quarantine: amount > 0 (no action: warn)",
    "sensitive": "write field action, such as customer.email hash (hash, redact or drop)",
}


def _entries(text: str, read: Callable[[str], T | None]) -> tuple[list[tuple[int, T]], list[int]]:
    """The input's entries, in order, each with the number of its line, and the numbers of its
    malformed lines (blank lines and ``#`` comments skipped). What is read but is not a name, a field
    or an action goes to the API as typed (refused there, beside the input, with its line)."""
    entries: list[tuple[int, T]] = []
    malformed: list[int] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        entry = read(line)
        if entry is None:
            malformed.append(number)
        else:
            entries.append((number, entry))
    return entries, malformed


def _read(parts: Parts, part: str, text: str, read: Callable[[str], T | None]) -> list[T]:
    """The entries of the input for ``contract.<part>``; its malformed lines refused there."""
    entries, malformed = _entries(text, read)
    for number in malformed:
        parts.refuse(f"contract.{part}", f"Line {number}: {_HOW[part]}")
    return [entry for _, entry in entries]


def _one_line(predicate: str) -> str:
    """A predicate as a line of the input shows it (one written with line breaks, through the API, is
    shown on one line)."""
    return " ".join(predicate.splitlines()).strip()


def expectations_text(contract: PipelineContract | None) -> str:
    """The expectations input's text for a pipeline's contract."""
    return "\n".join(f"{e.name} {e.action}: {_one_line(e.predicate)}"
                     for e in (contract.expectations if contract else []))


def sensitive_text(contract: PipelineContract | None) -> str:
    """The sensitive fields input's text for a pipeline's contract."""
    return "\n".join(f"{s.field} {s.action}" for s in (contract.sensitive if contract else []))


def evolution_choice(contract: PipelineContract | None) -> str:
    """The schema evolution select's choice for a pipeline's contract (none: add, the API's default)."""
    return (contract or NO_CONTRACT).evolution


def contract_of(parts: Parts, written: Mapping[str, Any], *, expectations: str, sensitive: str,
                evolution: str) -> dict[str, Any]:
    """The contract: the inputs' entries over what the pipeline had written. A rule whose name stays
    keeps what the input cannot show (its alert thresholds; its predicate as written, unless the line
    changed it), and so does a sensitive field whose name stays (in any case, as the API names it once).
    The evolution policy at add (or not chosen) is written only where the pipeline had written it;
    anything else goes as chosen (what is not a policy: refused by the API, beside the select)."""
    contract = dict(written)
    put_unless_default(contract, "expectations", _expectations(parts, expectations, written), [], written)
    put_unless_default(contract, "sensitive", _sensitive_fields(parts, sensitive, written), [], written)
    put_unless_default(contract, "evolution", evolution.strip() or "add", "add", written)
    return contract


def _expectations(parts: Parts, text: str, written: Mapping[str, Any]) -> list[dict[str, Any]]:
    before = {e.get("name"): e for e in written.get("expectations") or [] if isinstance(e, Mapping)}
    expectations: list[dict[str, Any]] = []
    for rule in _read(parts, "expectations", text, _rule):
        had: Mapping[str, Any] = before.get(rule.name) or {}
        kept = str(had.get("predicate", ""))
        expectation = {**had, "name": rule.name,
                       "predicate": kept if had and _one_line(kept) == rule.predicate else rule.predicate}
        expectation.pop("action", None)
        put_unless_default(expectation, "action", rule.action or "warn", "warn", had)
        expectations.append(expectation)
    return expectations


def _sensitive_fields(parts: Parts, text: str, written: Mapping[str, Any]) -> list[dict[str, Any]]:
    before = {str(s.get("field", "")).lower(): s for s in written.get("sensitive") or [] if isinstance(s, Mapping)}
    return [{**(before.get(entry.field.lower()) or {}), "field": entry.field, "action": entry.action}
            for entry in _read(parts, "sensitive", text, _sensitive)]


def numbered(errors: list[dict[str, Any]], inputs: Mapping[str, str]) -> list[dict[str, Any]]:
    """The API's errors of ``contract.<part>[i]…`` saying the line that entry ``i`` is on in
    ``inputs[part]`` (the text of the input for that part of the contract: every entry's errors sit
    beside the one input)."""
    lines = {part: [number for number, _ in _entries(text, _READERS[part])[0]] for part, text in inputs.items()}
    out = []
    for error in errors:
        at = _ENTRY_AT.match(str(error.get("field", "")))
        numbers = lines.get(at.group(1), []) if at is not None else []
        if at is not None and int(at.group(2)) < len(numbers):
            message = str(error.get("message", "invalid")).removeprefix("Value error, ")
            error = {**error, "message": f"Line {numbers[int(at.group(2))]}: {message}"}
        out.append(error)
    return out
