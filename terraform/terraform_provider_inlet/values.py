"""Terraform values the provider's resources share: JSON documents compared by meaning, complete
states, and API failures turned into diagnostics."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from tf.schema import Attribute
from tf.types import NormalizedJson, Unknown
from tf.utils import Diagnostics

from terraform_provider_inlet.client import ApiError


def _canonical(value: Any) -> Any:
    """The meaning of a JSON value: RFC 3339 timestamps as instants (Inlet writes ``Z`` where a
    user may write ``+00:00``), everything else as is."""
    if isinstance(value, dict):
        return {k: _canonical(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    if isinstance(value, str) and len(value) >= 20 and value[4:5] == "-" and "T" in value:
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            return value
        if moment.tzinfo is not None:
            return ("instant", moment.timestamp())
    return value


_GO_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


class JsonDocument(NormalizedJson):
    """A JSON string attribute (``jsonencode({...})``) kept in state as the user wrote it: a value
    Inlet reads back with the same meaning does not replace the user's text, so no diff appears;
    any other value is a real change and shows as one."""

    def encode(self, value: Any) -> Any:
        """The text Terraform's ``jsonencode`` writes for the same value (sorted keys, no spaces, HTML
        characters escaped as Go does), so an imported document reads like the configuration's."""
        if value is None or value is Unknown:
            return value
        text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        for char, escaped in _GO_ESCAPES.items():
            text = text.replace(char, escaped)
        return text

    def semantically_equal(self, a_decoded: Any, b_decoded: Any) -> bool:
        if a_decoded is Unknown or b_decoded is Unknown:
            return a_decoded is b_decoded
        return _canonical(a_decoded) == _canonical(b_decoded)

    def decode(self, value: Any) -> Any:
        try:
            return super().decode(value)
        except ValueError as exc:
            raise ValueError(f"not a JSON document (write it with jsonencode): {exc}") from None


def parse_document(diags: Diagnostics, name: str, value: Any) -> dict[str, Any] | None:
    """The decoded document, or None with an error naming the attribute when it is not an object."""
    if value is None:
        return None
    if not isinstance(value, dict):
        diags.add_error(f"{name} must be a JSON object", f"Got {json.dumps(value)[:200]}", path=[name])
        return None
    return value


def option_texts(options: dict[str, Any] | None) -> dict[str, str]:
    """Client options as Terraform's map(string) holds them (``true``, ``5000``), whatever JSON type
    Inlet stored them with."""
    return {k: ("true" if v else "false") if isinstance(v, bool) else str(v) for k, v in (options or {}).items()}


def complete(attributes: list[Attribute], state: dict[str, Any]) -> dict[str, Any]:
    """``state`` with every attribute of the schema present (null where nothing is known)."""
    return {a.name: state.get(a.name) for a in attributes}


@contextmanager
def reported(diags: Diagnostics, action: str) -> Iterator[None]:
    """Turn an API failure into a Terraform error that carries Inlet's problem detail."""
    try:
        yield
    except ApiError as exc:
        diags.add_error(f"{action}: {exc.title}", exc.detail)


def not_found(diags: Diagnostics, kind: str, ident: str) -> None:
    diags.add_error(f"No {kind} {ident}", f"Inlet has no {kind} with this id for the provider's API key's tenant.")


def unknown_when_changed(planned: dict[str, Any], changed: set[str], *computed: str) -> dict[str, Any]:
    """Computed values an update will move (an ETag) are unknown in the plan, not stale."""
    if changed:
        for name in computed:
            planned[name] = Unknown
    return planned
