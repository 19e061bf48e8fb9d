"""The run state table (``api.runs.states``): every state change of a run goes through it."""

from __future__ import annotations

from itertools import product
from typing import get_args

import pytest

from api.core.errors import InvalidTransition
from api.runs.states import ACTIVE_STATES, RUN_STATES, TERMINAL_STATES, RunState

STATES = get_args(RunState)

ALLOWED = {
    ("queued", "running"),  # claimed by a worker
    ("queued", "cancelled"),  # cancelled before it started
    ("running", "succeeded"),
    ("running", "failed"),
    ("running", "cancelled"),
    ("running", "skipped"),  # planned, nothing to read
    ("running", "queued"),  # a retry of the same plan, or a dead worker's lease taken over
}


def test_the_table_allows_exactly_these_changes() -> None:
    assert {(a, b) for a, b in product(STATES, STATES) if RUN_STATES.allowed(a, b)} == ALLOWED


def test_finished_runs_never_change_again() -> None:
    assert TERMINAL_STATES == {"succeeded", "failed", "cancelled", "skipped"}
    assert not any(RUN_STATES.allowed(done, to) for done in TERMINAL_STATES for to in STATES)


def test_active_and_terminal_states_split_every_state() -> None:
    assert set(ACTIVE_STATES) | TERMINAL_STATES == set(STATES)
    assert not set(ACTIVE_STATES) & TERMINAL_STATES


@pytest.mark.parametrize(("current", "target"), [("succeeded", "queued"), ("cancelled", "running"),
                                                 ("queued", "succeeded")])
def test_a_refused_change_is_a_409_naming_both_states(current: str, target: str) -> None:
    with pytest.raises(InvalidTransition) as refused:
        RUN_STATES.check(current, target)
    assert (refused.value.status, refused.value.detail) == (409, f"A run cannot go from {current} to {target}")
    assert refused.value.extra == {"current_state": current, "requested_state": target}
