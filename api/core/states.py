"""State machines as data: every state change of a pipeline or run is checked against one table."""

from __future__ import annotations

from collections.abc import Mapping

from api.core.errors import InvalidTransition


class TransitionTable:
    def __init__(self, entity: str, transitions: Mapping[str, frozenset[str]]) -> None:
        self.entity = entity
        self.transitions = transitions

    def allowed(self, current: str, target: str) -> bool:
        return target in self.transitions.get(current, frozenset())

    def check(self, current: str, target: str, *, reason: str | None = None) -> None:
        if not self.allowed(current, target):
            raise InvalidTransition(
                reason or f"A {self.entity} cannot go from {current} to {target}",
                current_state=current, requested_state=target,
            )
