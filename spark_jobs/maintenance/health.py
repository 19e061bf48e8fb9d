"""A Delta table's health as maintenance sees it: its live files (how many are small, how many bytes),
its version, the log entries a reader replays and the newest checkpoint, and the table properties
that govern checkpoints and log cleanup. Read with delta-rs and the table's filesystem, no Spark."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from spark_jobs.storage import Store
from spark_jobs.table_features import TableFeatures

if TYPE_CHECKING:
    from deltalake import DeltaTable


@dataclass(frozen=True)
class LiveFile:
    """A data file the table's snapshot holds."""

    path: str  # relative to the table root, as the add action names it
    size: int
    modified: int  # ms since the epoch
    partition: dict[str, Any] = field(default_factory=dict)  # typed values, as delta-rs reads them


@dataclass(frozen=True)
class TableHealth:
    version: int
    files: int
    small_files: int  # under the policy's small-file size
    bytes: int  # of the live files: what a full read reads
    small_bytes: int
    log_entries: int  # commit files (``_delta_log/*.json``) kept; a reader replays those after the newest checkpoint
    commits_since_checkpoint: int
    checkpoint_version: int | None
    properties: dict[str, str]  # the table's ``delta.*`` configuration
    features: TableFeatures | None = None  # its protocol, and which of Inlet's operations it refuses


def live_files(delta: DeltaTable) -> list[LiveFile]:
    actions = pa.table(delta.get_add_actions(flatten=False)).to_pylist()
    return [LiveFile(a["path"], a["size_bytes"], a["modification_time"], dict(a.get("partition") or {}))
            for a in actions]


def log_files(store: Store, uri: str) -> list[str]:
    """The names of the files in the table's ``_delta_log`` folder."""
    from pyarrow import fs as pafs

    filesystem, root = store.filesystem(uri)
    found = filesystem.get_file_info(pafs.FileSelector(f"{root}/_delta_log", allow_not_found=True))
    return [f.base_name for f in found if f.type == pafs.FileType.File]


def checkpoint_version(store: Store, uri: str) -> int | None:
    """The version of the newest checkpoint (``_delta_log/_last_checkpoint``), if there is one."""
    filesystem, root = store.filesystem(uri)
    try:
        with filesystem.open_input_stream(f"{root}/_delta_log/_last_checkpoint") as stream:
            return int(json.loads(stream.read())["version"])
    except (OSError, ValueError, KeyError):
        return None


def inspect(store: Store, uri: str, small_file_bytes: int) -> TableHealth | None:
    """The table's health now; None where there is no table yet."""
    if not store.is_delta_table(uri):
        return None
    delta = store.delta_table(uri)
    return health_of(store, uri, delta, small_file_bytes)


def health_of(store: Store, uri: str, delta: DeltaTable, small_file_bytes: int) -> TableHealth:
    files = live_files(delta)
    small = [f for f in files if f.size < small_file_bytes]
    version = delta.version()
    checkpoint = checkpoint_version(store, uri)
    return TableHealth(
        version=version, files=len(files), small_files=len(small), bytes=sum(f.size for f in files),
        small_bytes=sum(f.size for f in small),
        log_entries=sum(1 for name in log_files(store, uri) if name.endswith(".json") and name[:-5].isdigit()),
        commits_since_checkpoint=version - (checkpoint if checkpoint is not None else -1),
        checkpoint_version=checkpoint,
        properties={k: v for k, v in delta.metadata().configuration.items() if k.startswith("delta.")},
        features=TableFeatures.of(delta),
    )
