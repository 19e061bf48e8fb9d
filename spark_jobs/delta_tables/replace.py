"""Replace mode: a replay's rows take the place of the rows a table holds for the same offset ranges.

Before the job, ``plan_replace`` finds the table's files that hold rows of the replaced ranges
(from their Delta statistics: topic, partition, offset bounds). Files holding nothing else are
removed outright; the others are read again (``carried_rows``, in a ``direct_write`` task), minus
the replaced rows, and rewritten by the same job. The commit that adds the new files carries the
``remove`` actions of all of them, so readers never see the old and new rows together, nor neither.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from spark_jobs.delta_log import STATS_COLUMNS, partition_string
from spark_jobs.delta_tables import Table
from spark_jobs.plans import TableRole
from spark_jobs.storage import Store

if TYPE_CHECKING:
    from deltalake.transaction import RemoveAction

    from spark_jobs.spec import Ranges  # pydantic costs every Python worker ~1 s to import


@dataclass(frozen=True)
class RewriteFile:
    """An existing table file holding rows of the replaced ranges and others, to be rewritten."""

    table: TableRole
    uri: str  # absolute
    partition_values: dict[str, object]  # as the table's add action holds them (typed, not strings)


@dataclass
class ReplacePlan:
    """What replace mode takes out of the tables: files removed outright, and files rewritten."""

    remove: dict[TableRole, list[RemoveAction]] = field(default_factory=lambda: {"main": [], "quarantine": []})
    rewrite: list[RewriteFile] = field(default_factory=list)


def plan_replace(table: Table, role: TableRole, ranges: Ranges, plan: ReplacePlan) -> None:
    """Add to ``plan`` the files of ``table`` (the run's ``role`` one) holding rows of ``ranges``."""
    from deltalake.transaction import RemoveAction

    if not table.exists():
        return
    wanted = [(t, int(p), s, e) for t, ps in ranges.items() for p, (s, e) in ps.items() if s < e]
    actions = pa.table(table.delta().get_add_actions(flatten=True)).to_pylist()
    now = int(time.time() * 1000)
    for action in actions:
        bounds = {}
        for column in STATS_COLUMNS:
            fixed = action.get(f"partition.{column}")
            bounds[column] = (fixed, fixed) if fixed is not None else (action.get(f"min.{column}"), action.get(f"max.{column}"))

        def within(column: str, low: object, high: object) -> bool:
            lo, hi = bounds[column]  # noqa: B023 - called only within this iteration
            return lo is None or hi is None or (lo < high and hi >= low if column == "offset" else lo <= low <= hi)

        overlapping = [r for r in wanted if within("topic", r[0], r[0]) and within("partition", r[1], r[1]) and within("offset", r[2], r[3])]
        if not overlapping:
            continue
        (t_lo, t_hi), (p_lo, p_hi), (o_lo, o_hi) = (bounds[c] for c in STATS_COLUMNS)
        covered = any(t_lo == t_hi == t and p_lo == p_hi == p and o_lo is not None and s <= o_lo and o_hi < e for t, p, s, e in overlapping)
        partition_values = {k[len("partition."):]: v for k, v in action.items() if k.startswith("partition.")}
        plan.remove[role].append(
            RemoveAction(
                action["path"], True, now, action["size_bytes"], {k: partition_string(v) for k, v in partition_values.items()}
            )
        )
        if not covered:
            plan.rewrite.append(RewriteFile(role, f"{table.uri.rstrip('/')}/{action['path']}", partition_values))


def carried_rows(store: Store, file: RewriteFile, ranges: Ranges, schema: pa.Schema) -> pa.Table:
    """The rows of an existing table file outside ``ranges``, in ``schema`` (missing columns null)."""
    filesystem, path = store.filesystem(file.uri)
    rows = pq.read_table(path, filesystem=filesystem)
    for column, value in file.partition_values.items():
        rows = rows.append_column(column, pa.array([value] * rows.num_rows))
    rows = rows.filter(pc.invert(in_ranges(rows, ranges)))
    columns = [rows[f.name].cast(f.type) if f.name in rows.column_names else pa.nulls(rows.num_rows, f.type) for f in schema]
    return pa.Table.from_arrays(columns, schema=schema)


def in_ranges(rows: pa.Table, ranges: Ranges) -> pa.ChunkedArray:
    mask = pa.chunked_array([pa.array([False] * rows.num_rows, pa.bool_())])
    for topic, partitions in ranges.items():
        for partition, (start, end) in partitions.items():
            hit = pc.and_(
                pc.and_(pc.equal(rows["topic"], topic), pc.equal(rows["partition"], int(partition))),
                pc.and_(pc.greater_equal(rows["offset"], start), pc.less(rows["offset"], end)),
            )
            mask = pc.or_(mask, pc.fill_null(hit, False))
    return mask
