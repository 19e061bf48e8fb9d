"""The pipeline state machine: the one table every pause, resume or state write goes through."""

from api.core.states import TransitionTable

PIPELINE_STATES = TransitionTable(
    "pipeline",
    {
        "active": frozenset({"paused"}),
        "paused": frozenset({"active"}),
    },
)
