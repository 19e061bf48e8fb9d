"""The run state machine: every state change of a run goes through this one table."""

from api.core.states import TransitionTable

TERMINAL_STATES = frozenset({"succeeded", "failed", "cancelled", "skipped"})

RUN_STATES = TransitionTable(
    "run",
    {
        "queued": frozenset({"running", "cancelled", "skipped", "failed"}),
        # running → queued: a retry of the same plan (transient failure, or the worker's lease expired).
        "running": frozenset({"succeeded", "failed", "cancelled", "skipped", "queued"}),
    },
)
