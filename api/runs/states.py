"""A run's states, and the one table every state change of a run goes through."""

from __future__ import annotations

from typing import Literal, get_args

from api.core.states import TransitionTable

RunState = Literal["queued", "running", "succeeded", "failed", "cancelled", "skipped"]
RunTrigger = Literal["manual", "schedule"]

ACTIVE_STATES: tuple[RunState, ...] = ("queued", "running")  # at most one per pipeline (a unique index)
TERMINAL_STATES = frozenset(get_args(RunState)) - frozenset(ACTIVE_STATES)

RUN_STATES = TransitionTable(
    "run",
    {
        "queued": frozenset({"running", "cancelled"}),  # a run is planned, skipped or failed once claimed
        # running → queued: a retry of the same plan (transient failure, or the worker's lease expired).
        "running": frozenset({"succeeded", "failed", "cancelled", "skipped", "queued"}),
    },
)
