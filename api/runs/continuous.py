"""A continuous pipeline's loop: once a run of it ends, or a look at its topics found nothing, when
it looks again (docs/runs.md, "Continuous pipelines").

The loop is a chain of ``continue_pipeline`` messages, one at a time per pipeline: each sets the
pipeline's slot (``next_run_at``) to the moment it is due and is sent with that delay; the message
fires only if the slot is still the one it names (``api.pipelines.scheduling.claim_slot``), so a
scheduler that took an overdue slot over, or an edit that moved it, ends the older chain. A run
that ends continues the chain at once; a look that found nothing waits ``idle_wait_ms`` first; a
failure waits for the scheduler's hold (``CONTINUOUS_HOLD_S``), so a broken pipeline is tried
twice a minute, not in a loop.
"""

from __future__ import annotations

import uuid

from sqlmodel import Session

from api.pipelines.definition import definition_of
from api.pipelines.models import Pipeline
from api.pipelines.schedules import ContinuousSchedule
from api.pipelines.scheduling import CONTINUOUS_HOLD_S, look_again
from api.runs import repository
from api.runs.models import Run

# What a run's end, or a slot that made no run, means for the next look. A run waiting for its retry
# (``queued``), a pipeline busy with a run or paused, and a message not ours to act on continue
# nothing: the run's own end continues the chain, and resuming the pipeline starts one.
_AT_ONCE = {"succeeded"}
_IDLE = {"skipped", "nothing-new", "cancelled"}
_HELD = {"failed", "plan-failed", "over-quota"}


def continue_after(session: Session, *, verdict: str, run_id: uuid.UUID | None = None,
                   pipeline_id: uuid.UUID | None = None) -> float | None:
    """Set up the pipeline's next look after ``verdict`` (of its run ``run_id``, or of a slot of
    ``pipeline_id`` that made no run): the delay it was sent with, None when the chain stops here."""
    if pipeline_id is None and run_id is not None:
        run = session.get(Run, run_id)
        pipeline_id = run.pipeline_id if run is not None else None
    if pipeline_id is None or verdict not in _AT_ONCE | _IDLE | _HELD:
        return None
    pipeline = session.get(Pipeline, pipeline_id)
    if pipeline is None or not isinstance(definition_of(pipeline).schedule, ContinuousSchedule):
        return None  # most runs' pipelines: no row lock taken for them
    session.refresh(pipeline, with_for_update=True)  # locked, and as it is now
    schedule = definition_of(pipeline).schedule
    if (pipeline.state != "active" or not isinstance(schedule, ContinuousSchedule)
            or repository.active_run(session, pipeline_id) is not None):
        return None
    delay = 0.0 if verdict in _AT_ONCE else schedule.idle_wait_ms / 1000 if verdict in _IDLE else CONTINUOUS_HOLD_S
    look_again(session, pipeline, delay_s=delay)
    return delay
