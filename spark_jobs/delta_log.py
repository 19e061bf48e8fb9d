"""What Inlet writes into a Delta log besides rows: partition values as the log spells them, the
statistics replace mode finds its files by, and the rewrite fence; and one commit's actions as the
log holds them (``commit_actions``), by which a writer finds its own commit.

The rewrite fence. A commit that removes files (a replace-mode replay's, a compaction's) was planned
on a snapshot of the table; if another writer removed some of the same files meanwhile, committing
anyway would be wrong: a compaction rewrites rows into new files, so a replay that removes the old
files after the compaction committed would leave the replaced rows alive in the compacted file
(duplicates), and a compaction that commits after a replay would bring them back.
delta-rs refuses the second case on its own (a compaction read files a data-changing commit removed:
``ConcurrentDeleteRead``), but not the first: a compaction's removes do not change data
(``dataChange=false``), and delta-rs ignores those when it checks a commit that removes the same files
(checked with delta-rs 1.6.6, tests/spark_jobs/test_maintenance_races.py). So every commit that removes
files carries one app transaction of its own, ``REWRITE_FENCE``: delta-rs refuses a commit whose app
transactions a concurrent commit also set (``ConcurrentTransaction``), so of two rewrites racing from
the same snapshot only the first commits. A rewrite planned on an older snapshot than the one it
commits from also checks that every file it removes is still in the table (``check_still_live``).
Appends carry no fence: they race with a compaction and both land.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from datetime import time as time_of_day
from typing import TYPE_CHECKING, Any

from spark_jobs.errors import JobError

if TYPE_CHECKING:
    from deltalake import DeltaTable
    from deltalake.transaction import Transaction

    from spark_jobs.storage import Store

STATS_COLUMNS = ("topic", "partition", "offset")  # with Delta statistics per file: replace mode finds its files by them
REWRITE_FENCE = "inlet-table-rewrite"  # the app id every commit that removes files sets (its version: the snapshot read)


def partition_string(value: object) -> str | None:
    """A partition value as a Delta add or remove action spells it."""
    if value is None:
        return None
    if isinstance(value, (datetime, time_of_day)):
        return value.strftime("%Y-%m-%d %H:%M:%S.%f")  # Delta's timestamp partition format
    return str(value).lower() if isinstance(value, bool) else str(value)


def rewrite_fence(read_version: int) -> Transaction:
    """The app transaction of a commit that removes files planned on snapshot ``read_version``."""
    from deltalake.transaction import Transaction

    return Transaction(REWRITE_FENCE, read_version)


def check_still_live(delta: DeltaTable, removed: Iterable[str]) -> None:
    """Refuse (``target_conflict``, retried) a commit that would remove files ``delta``'s snapshot no
    longer holds: another writer (a compaction) removed them after this one planned, and may hold
    their rows in files of its own. The attempt is tried again and plans anew."""
    import pyarrow as pa

    live = set(pa.table(delta.get_add_actions(flatten=True)).column("path").to_pylist())
    gone = sorted(path for path in removed if path not in live)
    if gone:
        raise JobError("target_conflict", f"{len(gone)} file(s) this run replaces were rewritten by another writer "
                                          f"(table maintenance) after it planned, e.g. {gone[0]}; it is retried "
                                          "and plans again")


def commit_actions(store: Store, uri: str, version: int) -> list[dict[str, Any]]:
    """The actions of the table's commit ``version`` (``{"add": ...}``, ``{"commitInfo": ...}``...), as
    its log entry holds them."""
    filesystem, root = store.filesystem(uri)
    with filesystem.open_input_stream(f"{root.rstrip('/')}/_delta_log/{version:020d}.json") as entry:
        return [json.loads(line) for line in entry.read().decode().splitlines() if line.strip()]
