"""The Parquet files of a run's rows, written by the executors straight into the table folders.

``FileSet`` is one task's open files, one per (table, partition values), with the Delta statistics
of their rows (rows of different ``group``s, which ``direct_write`` gives a large Kafka range, never
share one; a task's small ranges do); each task reports the files it wrote (``plans.TaskReport``), and the driver commits
them (``commit``); ``direct_write``'s tasks use ``FileSet``. What a failed run wrote is deleted by
name (``delete_files``) or, where its tasks could not report, by the attempt's token
(``delete_run_files``).
"""

from __future__ import annotations

import contextlib
import json
import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyarrow import fs as pafs

from spark_jobs.delta_log import STATS_COLUMNS, partition_string
from spark_jobs.parquet_layout import run_file_options
from spark_jobs.plans import DataFile, TableRole
from spark_jobs.storage import Store

# A task's rows reach its files in the batches it reads (up to 10,000 records, as few as one); they are
# held until a file has a row group's worth (or the task holds this many bytes), so that a file of many
# small batches is not a file of many tiny row groups, which readers pay for per group.
_ROW_GROUP_ROWS = 128 * 1024
_HELD_BYTES = 32 << 20
_HELD_PIECE_BYTES = 8 << 10  # what a held piece costs beyond its rows (pyarrow's objects): many tiny pieces add up


@dataclass
class _OpenFile:
    """A Parquet file a task is still writing, with the Delta statistics of its rows so far."""

    writer: pq.ParquetWriter
    path: str  # relative to the table root
    partition_values: dict[str, str | None]
    rows: int = 0
    min_values: dict[str, object] = field(default_factory=dict)
    max_values: dict[str, object] = field(default_factory=dict)
    held: list[pa.Table] = field(default_factory=list)  # rows not yet written: the next row group's
    held_rows: int = 0
    held_bytes: int = 0

    def hold(self, rows: pa.Table) -> int:
        """Keep ``rows`` for the next row group; the bytes that holds."""
        self.held.append(rows)
        self.held_rows += rows.num_rows
        self.rows += rows.num_rows
        self.held_bytes += (taken := rows.nbytes + _HELD_PIECE_BYTES)
        return taken

    def flush(self) -> int:
        """Write what is held as a row group; the bytes that frees."""
        freed = self.held_bytes
        if self.held:
            self.writer.write_table(pa.concat_tables(self.held))
            self.held, self.held_rows, self.held_bytes = [], 0, 0
        return freed


class FileSet:
    """One open Parquet file per (table, partition values) for the life of a task."""

    def __init__(self, table: TableRole, store: Store, root: str, schema: pa.Schema, partition_by: list[str], token: str = ""):
        self.table, self.partition_by = table, partition_by
        self.prefix = f"part-{token}-" if token else "part-"
        self.fs, self.root = store.filesystem(root)
        self.schema = pa.schema([f for f in schema if f.name not in partition_by])
        self.options = run_file_options(self.schema)
        self.open: dict[tuple[object, ...], _OpenFile] = {}
        self.closed: list[str] = []  # paths of the files closed, which ``discard`` deletes all the same
        self.held_bytes = 0

    def write(self, table: pa.Table, group: tuple[object, ...] = ()) -> None:
        """Append ``table``'s rows to the file of their partition values; rows of different ``group``s
        never share a file."""
        if table.num_rows == 0:
            return
        if not self.partition_by:
            self._append(group, {}, table)
            return
        for values in table.select(self.partition_by).group_by(self.partition_by).aggregate([]).to_pylist():
            mask = None
            for column, value in values.items():
                match = pc.is_null(table[column]) if value is None else pc.equal(table[column], value)
                mask = match if mask is None else pc.and_(mask, match)
            self._append((*group, *values.values()), values, table.filter(mask))

    def _append(self, key: tuple[object, ...], values: dict[str, object], rows: pa.Table) -> None:
        if key not in self.open:
            folder = "/".join(f"{c}={_path_safe(v)}" for c, v in values.items())
            relative = f"{folder}/" if folder else ""
            relative += f"{self.prefix}{uuid.uuid4().hex}.parquet"
            full = f"{self.root}/{relative}"
            if isinstance(self.fs, pafs.LocalFileSystem):  # object stores have no folders (pyarrow would add markers)
                self.fs.create_dir(full.rsplit("/", 1)[0], recursive=True)
            writer = pq.ParquetWriter(full, self.schema, filesystem=self.fs, **self.options)
            self.open[key] = _OpenFile(writer, relative, {c: partition_string(v) for c, v in values.items()})
        file = self.open[key]
        rows = rows.select(self.schema.names).cast(self.schema)
        self.held_bytes += file.hold(rows)
        if file.held_rows >= _ROW_GROUP_ROWS:
            self.held_bytes -= file.flush()
        elif self.held_bytes >= _HELD_BYTES:
            for each in self.open.values():
                self.held_bytes -= each.flush()
        for column in STATS_COLUMNS:
            if column in self.schema.names:
                low, high = pc.min_max(rows[column]).values()
                low, high = low.as_py(), high.as_py()
                if low is not None:
                    file.min_values[column] = min(low, file.min_values.get(column, low))
                    file.max_values[column] = max(high, file.max_values.get(column, high))

    def close(self) -> list[DataFile]:
        """Write what is held and close every file: what the task reports. A file that fails to close
        stays open, for ``discard``."""
        files = []
        for key, file in list(self.open.items()):
            self.held_bytes -= file.flush()
            file.writer.close()
            del self.open[key]
            self.closed.append(file.path)
            size = self.fs.get_file_info(f"{self.root}/{file.path}").size
            delta_stats = {"numRecords": file.rows, "minValues": file.min_values, "maxValues": file.max_values}
            files.append(DataFile(self.table, file.path, size, file.partition_values, file.rows, json.dumps(delta_stats)))
        return files

    def discard(self) -> None:
        """Delete every file of the set, open or closed (the task failed: it reports none)."""
        for file in self.open.values():
            with contextlib.suppress(Exception):  # deleted below, whatever kept it from closing
                file.writer.close()
        for path in [f.path for f in self.open.values()] + self.closed:
            try:
                self.fs.delete_file(f"{self.root}/{path}")
            except OSError:
                pass
        self.open.clear()
        self.closed.clear()
        self.held_bytes = 0


def delete_files(store: Store, files: Iterable[DataFile], uri: str, quarantine_uri: str | None) -> None:
    """Delete reported files of the main table at ``uri`` and of the quarantine table, if any."""
    for file in files:
        root = uri if file.table == "main" else quarantine_uri
        if root is None:  # no quarantine table, so no file of it either
            continue
        filesystem, base = store.filesystem(root)
        try:
            filesystem.delete_file(f"{base}/{file.path}")
        except OSError:
            pass


def delete_run_files(store: Store, root: str, token: str) -> int:
    """Delete the files named for one attempt of a run (``token``) anywhere under a table folder.

    For a failed job whose tasks cannot all be asked what they wrote; never after a commit.
    """
    return store.delete_files_named(root, f"part-{token}-")


def _path_safe(value: object) -> str:
    return "__HIVE_DEFAULT_PARTITION__" if value is None else re.sub(r"[^A-Za-z0-9._-]", "_", str(value))[:100]
