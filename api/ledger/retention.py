"""What the offsets ledger still needs of old runs, so that retention (``api.retention``) keeps them, and
the run ranges that go with the runs it deletes.

"Which run wrote offset X" (``api.offsets.service.lookup``) is answered from ``run_ranges``; pruning a
run deletes its ranges. Kept whatever their age, the runs that:

- wrote the highest committed range of a partition (no range of the partition starts above theirs):
  who wrote each partition's newest records;
- wrote a range that overlaps a live replay window (``offset_replays``): the rows a replace-mode replay
  still has to replace, until its runs have read them again;
- are a partition's ``last_run_id`` (the run that last moved its committed offset, which the offsets
  API shows beside each partition).
"""

from __future__ import annotations

import uuid
from collections.abc import Collection
from typing import Any

from sqlalchemy import ColumnElement, and_, delete, exists, or_
from sqlalchemy.orm import aliased
from sqlmodel import Session, col

from api.ledger.models import OffsetReplay, PartitionOffset, RunRange


def still_needed(run_id: Any) -> ColumnElement[bool]:
    """True for a run (its id column ``run_id``) the ledger still needs, by the rules above."""
    mine, later = aliased(RunRange), aliased(RunRange)
    same_partition = and_(col(later.pipeline_id) == col(mine.pipeline_id), col(later.topic) == col(mine.topic),
                          col(later.partition) == col(mine.partition))
    highest = ~exists().where(same_partition, col(later.start) > col(mine.start))
    replaying = exists().where(
        col(OffsetReplay.pipeline_id) == col(mine.pipeline_id), col(OffsetReplay.topic) == col(mine.topic),
        col(OffsetReplay.partition) == col(mine.partition), col(OffsetReplay.start) < col(mine.end),
        col(OffsetReplay.end) > col(mine.start))
    holds = exists().where(col(mine.run_id) == run_id, or_(highest, replaying))
    last = exists().where(col(PartitionOffset.last_run_id) == run_id)
    return or_(holds, last)


def forget_ranges(session: Session, run_ids: Collection[uuid.UUID]) -> None:
    """Delete the committed ranges of runs being deleted (in the same transaction as the runs)."""
    if run_ids:
        session.execute(delete(RunRange).where(col(RunRange.run_id).in_(run_ids)))

