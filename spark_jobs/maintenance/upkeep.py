"""The rest of a table's upkeep: its properties, vacuum, and checkpoints with log cleanup.

- Properties: ``delta.checkpointInterval`` (every writer's commit writes a checkpoint at that
  interval), ``delta.logRetentionDuration`` with ``delta.enableExpiredLogCleanup`` (log entries older
  than that, before the newest checkpoint, are deleted), ``delta.deletedFileRetentionDuration`` (the
  vacuum retention, which other engines' vacuums then honour too). Set only where they differ: each
  change is a metadata commit, which a concurrent run's commit meets and retries on top of.
- Vacuum: files the table no longer holds, removed (or written) longer ago than the retention, are
  deleted from storage. ``full``: the log's tombstones are not enough, because a checkpoint drops a
  tombstone once it is older than the retention, and a vacuum that ran after that checkpoint would
  never see the file (bench/table_health.py showed them piling up); a full vacuum lists the folder.
  A file a run is still writing is in no log yet, but younger than the retention (its modification
  time: checked with delta-rs 1.6.6), so it is kept: the retention's floor is what keeps it safe.
- Checkpoint: one written now, then the expired log entries deleted; a run's app transaction lives
  in the checkpoint, so a retried run is still recognised after the entries are gone.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import TYPE_CHECKING
from urllib.parse import unquote

from spark_jobs.maintenance.health import log_files
from spark_jobs.storage import Store
from spark_jobs.table_features import require

if TYPE_CHECKING:
    from deltalake import DeltaTable

DELETION_VECTOR_PREFIX = "deletion_vector_"  # how the Delta protocol names a deletion vector's file


def wanted_properties(*, checkpoint_interval: int, log_retention_days: int, vacuum_retention_hours: int) -> dict[str, str]:
    return {
        "delta.checkpointInterval": str(checkpoint_interval),
        "delta.logRetentionDuration": f"interval {log_retention_days} days",
        "delta.enableExpiredLogCleanup": "true",
        "delta.deletedFileRetentionDuration": f"interval {vacuum_retention_hours} hours",
    }


def properties_to_set(delta: DeltaTable, wanted: Mapping[str, str]) -> dict[str, str]:
    current = delta.metadata().configuration
    return {key: value for key, value in wanted.items() if current.get(key) != value}


def set_properties(delta: DeltaTable, wanted: Mapping[str, str]) -> dict[str, str]:
    """Set the properties that differ; those it set."""
    changed = properties_to_set(delta, wanted)
    if changed:
        delta.alter.set_table_properties(changed, raise_if_not_exists=False)
        delta.update_incremental()
    return changed


def vacuum(store: Store, uri: str, delta: DeltaTable, retention_hours: int, *, dry_run: bool) -> list[str]:
    """The files removed longer than ``retention_hours`` ago (deleted unless ``dry_run``). The floor
    on ``retention_hours`` is the control plane's (a setting); the table's own property is kept equal
    to it (``set_properties``), so delta-rs's check passes.

    A table with deletion vectors: delta-rs's full vacuum takes a ``deletion_vector_*.bin`` file the
    log still names for one it may delete (it knows only data files), so there Inlet deletes the
    data files it lists and keeps every deletion-vector file; delta-spark's VACUUM, which knows which
    vectors are live, deletes those no longer used."""
    if "deletionVectors" not in require(delta, "vacuum", uri).features:
        return delta.vacuum(retention_hours=retention_hours, dry_run=dry_run, enforce_retention_duration=False,
                            full=True)
    listed = delta.vacuum(retention_hours=retention_hours, dry_run=True, enforce_retention_duration=False, full=True)
    doomed = sorted({path for path in listed if not path.rsplit("/", 1)[-1].startswith(DELETION_VECTOR_PREFIX)})
    if dry_run:
        return doomed
    filesystem, root = store.filesystem(uri)
    deleted = []
    for path in doomed:  # as the log spells it (escaped), or as the file is named
        for name in dict.fromkeys((path, unquote(path))):
            with contextlib.suppress(FileNotFoundError):
                filesystem.delete_file(f"{root}/{name}")
                deleted.append(path)
                break
    return deleted


def checkpoint(store: Store, uri: str, delta: DeltaTable) -> tuple[int, int]:
    """A checkpoint at the current version, then expired log entries deleted: (version, entries deleted)."""
    before = _log_entries(store, uri)
    delta.create_checkpoint()
    delta.cleanup_metadata()
    return delta.version(), max(before - _log_entries(store, uri), 0)


def _log_entries(store: Store, uri: str) -> int:
    return sum(1 for name in log_files(store, uri) if name.endswith(".json"))
