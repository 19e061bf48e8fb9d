"""A run's states, and the one table every state change of a run goes through."""

from __future__ import annotations

from typing import Literal, get_args

from api.core.states import TransitionTable

RunState = Literal["queued", "running", "succeeded", "failed", "cancelled", "skipped"]
RunTrigger = Literal["manual", "schedule", "continuous", "reprocess"]  # reprocess: of the quarantine (api.quarantine)

ACTIVE_STATES: tuple[RunState, ...] = ("queued", "running")  # at most one per pipeline (a unique index)
TERMINAL_STATES = frozenset(get_args(RunState)) - frozenset(ACTIVE_STATES)
_BY_NAME: dict[str, RunState] = {state: state for state in get_args(RunState)}


def state_of(value: str) -> RunState:
    """A run row's ``state`` as the ``RunState`` it is (the column is text)."""
    try:
        return _BY_NAME[value]
    except KeyError:
        raise ValueError(f"{value!r} is not a run state") from None


RUN_STATES = TransitionTable(
    "run",
    {
        "queued": frozenset({"running", "cancelled"}),  # a run is planned, skipped or failed once claimed
        # running → queued: a retry of the same plan (transient failure, or the worker's lease expired).
        "running": frozenset({"succeeded", "failed", "cancelled", "skipped", "queued"}),
    },
)
