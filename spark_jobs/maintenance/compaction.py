"""Compaction: a table's small files merged into files of about the target size, in ONE commit that
changes no data (``dataChange=false``: streaming readers skip it), fenced against replace-mode
replays (``spark_jobs.delta_log``).

Why not delta-rs's ``optimize.compact``: its commit carries no app transaction (it drops the ones it
is given), and a replay that removes the files it compacted commits without a conflict, leaving the
replaced rows alive in the compacted file (checked with delta-rs 1.6.6; see docs/maintenance.md).
The rewrite here is what optimize does (bins of small files per table partition, up to the target
size; a bin of one file is left alone), committed with delta-rs's own write transaction from the
snapshot it planned on, so delta-rs refuses it if a replay removed any of its files first, and
refuses the replay if the compaction committed first.

Rows are sorted inside each bin: by ``z_order_by`` (a Z-order curve over the columns' ranks), else
by topic, partition and offset, so that a compacted file covers few Kafka partitions and offsets and
a replay of one partition's range rewrites few files.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from spark_jobs.delta_log import STATS_COLUMNS, partition_string, rewrite_fence
from spark_jobs.maintenance.health import LiveFile, live_files
from spark_jobs.parquet_layout import delta_encoded, leaves
from spark_jobs.storage import Store
from spark_jobs.table_features import has_deletion_vectors

if TYPE_CHECKING:
    from deltalake import DeltaTable

_STRING_STATS_MAX = 32  # longer strings get no min/max (a truncated max would be wrong)
TOKEN_KEY = "inlet.compaction"  # a compaction's commit metadata: the token its files are named for


@dataclass(frozen=True)
class CompactionPlan:
    read_version: int
    bins: tuple[tuple[LiveFile, ...], ...]  # each of two files or more, all of one table partition

    @property
    def files(self) -> int:
        return sum(len(b) for b in self.bins)

    @property
    def bytes(self) -> int:
        return sum(f.size for b in self.bins for f in b)


@dataclass(frozen=True)
class Rewritten:
    """A file compaction wrote, as its add action will name it."""

    path: str
    size: int
    partition: dict[str, str | None]
    rows: int
    stats: str


def plan_compaction(delta: DeltaTable, *, target_bytes: int, small_bytes: int) -> CompactionPlan:
    """The small files of ``delta``'s snapshot in bins: oldest first, per table partition, each bin up
    to ``target_bytes``; bins of one file are dropped (nothing to merge). A file that carries a
    deletion vector is left as it is: its raw rows include deleted ones, and delta-rs's remove
    could not name its vector (``table_features``)."""
    groups: dict[tuple[tuple[str, str | None], ...], list[LiveFile]] = defaultdict(list)
    with_vectors = has_deletion_vectors(delta)
    for live in live_files(delta):
        if live.size < small_bytes and live.path not in with_vectors:
            groups[tuple(sorted((k, partition_string(v)) for k, v in live.partition.items()))].append(live)
    bins: list[tuple[LiveFile, ...]] = []
    for _, members in sorted(groups.items(), key=lambda group: repr(group[0])):
        current: list[LiveFile] = []
        for live in sorted(members, key=lambda f: (f.modified, f.path)):
            if current and sum(f.size for f in current) + live.size > target_bytes:
                bins.append(tuple(current))
                current = []
            current.append(live)
        bins.append(tuple(current))
    return CompactionPlan(delta.version(), tuple(b for b in bins if len(b) >= 2))


@dataclass(frozen=True)
class BinWriter:
    """Writes one bin's rows, sorted, into new files of about ``target_bytes`` beside its old ones:
    in the maintenance worker (``rewrite``), or in a Spark task per bin (``spark_jobs/compact.py``),
    to which it travels pickled, the store's options with it."""

    store: Store
    uri: str
    schema: pa.Schema  # the table's columns but its partition columns, in its order
    target_bytes: int
    z_order_by: tuple[str, ...]
    token: str  # names the files ``compacted-<token>-*``

    @classmethod
    def of(cls, store: Store, uri: str, delta: DeltaTable, *, target_bytes: int, z_order_by: Sequence[str] = (),
           token: str) -> BinWriter:
        partition_by = list(delta.metadata().partition_columns)
        schema = pa.schema([f for f in pa.schema(delta.schema().to_arrow()) if f.name not in partition_by])
        unknown = sorted(set(z_order_by) - set(schema.names))
        if unknown:
            raise ValueError(f"z_order_by names columns the table does not have: {', '.join(unknown)}")
        return cls(store, uri, schema, target_bytes, tuple(z_order_by), token)

    @property
    def prefix(self) -> str:
        return file_prefix(self.token)

    def __call__(self, members: Sequence[LiveFile]) -> list[Rewritten]:
        filesystem, root = self.store.filesystem(self.uri)
        options = _write_options(self.schema)
        rows = pa.concat_tables([_conform(pq.read_table(f"{root}/{f.path}", filesystem=filesystem), self.schema)
                                 for f in members])
        rows = rows.take(_order(rows, self.z_order_by))
        folder = members[0].path.rsplit("/", 1)[0] + "/" if "/" in members[0].path else ""
        partition = {k: partition_string(v) for k, v in members[0].partition.items()}
        per_file = max(1, rows.num_rows * self.target_bytes // max(sum(f.size for f in members), 1))
        written: list[Rewritten] = []
        try:
            for start in range(0, rows.num_rows, per_file):
                piece = rows.slice(start, per_file)
                path = f"{folder}{self.prefix}{uuid.uuid4().hex}.parquet"
                pq.write_table(piece, f"{root}/{path}", filesystem=filesystem, **options)
                size = filesystem.get_file_info(f"{root}/{path}").size
                written.append(Rewritten(path, size, partition, piece.num_rows, _stats(piece)))
        except BaseException:
            discard(self.store, self.uri, written)
            raise
        return written


def file_prefix(token: str) -> str:
    """How the name of every file a compaction's attempt (``token``) writes begins."""
    return f"compacted-{token}-"


def rewrite(writer: BinWriter, plan: CompactionPlan) -> list[Rewritten]:
    """Every bin of ``plan`` rewritten by ``writer`` in this process, one bin in memory at a time."""
    written: list[Rewritten] = []
    try:
        for members in plan.bins:
            written += writer(members)
    except BaseException:
        discard(writer.store, writer.uri, written)
        raise
    return written


def _write_options(schema: pa.Schema) -> dict[str, Any]:
    """zstd, as delta-rs's own writer and its optimize write (half snappy's size on Inlet's tables), and
    the offset and timestamp delta-encoded (``parquet_layout``); every other column (each leaf of a
    nested one) keeps its dictionary."""
    delta = delta_encoded(schema)
    return {"compression": "zstd", "use_dictionary": [leaf.path for leaf in leaves(schema) if leaf.path not in delta],
            "column_encoding": dict.fromkeys(delta, "DELTA_BINARY_PACKED")}


def commit(delta: DeltaTable, plan: CompactionPlan, written: Sequence[Rewritten], notes: dict[str, str]) -> int | None:
    """The rewrite as one commit from the snapshot ``plan`` was made on; the table's new version (None
    if the table could not be read again after the commit: it holds the files all the same).
    delta-rs raises ``CommitFailedError`` when a concurrent commit removed a file of the plan (a
    replay) or set the rewrite fence (another compaction, a replay)."""
    from deltalake.transaction import AddAction, CommitProperties, RemoveAction

    assert delta.version() == plan.read_version, "commit from the snapshot the plan was made on"
    now = int(time.time() * 1000)
    actions: list[Any] = [AddAction(w.path, w.size, w.partition, now, False, w.stats) for w in written]
    actions += [RemoveAction(f.path, False, now, f.size, {k: partition_string(v) for k, v in f.partition.items()})
                for b in plan.bins for f in b]
    delta.create_write_transaction(
        actions, mode="append", schema=delta.schema(), partition_by=list(delta.metadata().partition_columns),
        commit_properties=CommitProperties(app_transactions=[rewrite_fence(plan.read_version)],
                                           custom_metadata={"inlet.maintenance": "compact", **notes}))
    try:
        delta.update_incremental()
    except Exception:  # noqa: BLE001 - committed: its files must stay, only its version is unknown
        return None
    return delta.version()


def discard(store: Store, uri: str, written: Sequence[Rewritten]) -> None:
    """Delete files a compaction wrote and did not commit."""
    filesystem, root = store.filesystem(uri)
    for file in written:
        try:
            filesystem.delete_file(f"{root}/{file.path}")
        except OSError:
            pass


def _conform(rows: pa.Table, schema: pa.Schema) -> pa.Table:
    """A file's rows in the table's columns: columns added since it was written are null."""
    return pa.Table.from_arrays([rows[f.name].cast(f.type) if f.name in rows.column_names else pa.nulls(rows.num_rows, f.type)
                                 for f in schema], schema=schema)


def _order(rows: pa.Table, z_order_by: Sequence[str]) -> pa.Array:
    if not z_order_by:
        keys = [(c, "ascending") for c in STATS_COLUMNS if c in rows.column_names]
        return pc.sort_indices(rows, sort_keys=keys) if keys else pa.array(np.arange(rows.num_rows))
    return pa.array(np.argsort(_z_values(rows, z_order_by), kind="stable"))


def _z_values(rows: pa.Table, columns: Sequence[str]) -> np.ndarray:
    """A Z-order (Morton) value per row: the bits of each column's dense rank, scaled to the same
    width, interleaved. Rows close in every column get close values."""
    bits = min(16, 63 // len(columns))
    scaled = []
    for name in columns:
        ranks = pc.rank(rows[name].combine_chunks(), sort_keys="ascending", null_placement="at_end",
                        tiebreaker="dense").to_numpy().astype(np.uint64) - np.uint64(1)
        top = int(ranks.max()) if len(ranks) else 0
        scaled.append(ranks * np.uint64((1 << bits) - 1) // np.uint64(max(top, 1)))
    z = np.zeros(rows.num_rows, dtype=np.uint64)
    for bit in range(bits):
        for i, values in enumerate(scaled):
            z |= ((values >> np.uint64(bit)) & np.uint64(1)) << np.uint64(bit * len(scaled) + i)
    return z


def _stats(rows: pa.Table) -> str:
    """Delta statistics of a compacted file: its row count, and min, max and null count of the
    columns readers prune by (integers, dates, short strings)."""
    low: dict[str, Any] = {}
    high: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    for column in rows.schema:
        kind = column.type
        if not (pa.types.is_integer(kind) or pa.types.is_date(kind) or pa.types.is_string(kind)
                or pa.types.is_large_string(kind)):
            continue
        values = rows[column.name]
        nulls[column.name] = values.null_count
        least, most = (v.as_py() for v in pc.min_max(values).values())
        if least is None:
            continue
        if pa.types.is_date(kind):
            least, most = least.isoformat(), most.isoformat()
        if isinstance(least, str) and max(len(least), len(most)) > _STRING_STATS_MAX:
            continue
        low[column.name], high[column.name] = least, most
    return json.dumps({"numRecords": rows.num_rows, "minValues": low, "maxValues": high, "nullCount": nulls})
