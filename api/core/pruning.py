"""One batch of a retention prune, in the caller's short transaction: the next rows older than the cutoff
in the order of their age, of which those the table's owner lets go are locked (skipping any another
transaction holds) and deleted by primary key.

Each domain says what of its table may go (``pick``) and calls ``prune_batch``; ``api.retention``
runs the batches. A batch looks at one window of rows, oldest first from where the previous batch
stopped (a keyset on the age column and the primary key), through the table's index on the age
column: however many rows are kept (a pipeline's newest run, say), each is looked at once per pass and
a batch never sorts or filters the whole table.

Nothing here waits on a row a run or a request holds: a locked row is skipped (``FOR UPDATE SKIP
LOCKED`` on PostgreSQL; SQLite has one writer at a time, and a batch holds it only briefly), and on
PostgreSQL any other lock the delete needs (a cascade's) is given up after ``LOCK_TIMEOUT``, failing
the batch rather than holding up a writer behind it.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Row, Select, and_, bindparam, delete, func, select, text, tuple_
from sqlalchemy.dialects import postgresql
from sqlmodel import Session, SQLModel

LOCK_TIMEOUT = "2s"

# Rows deleted per tenant; None counts rows that belong to no tenant (idempotency records).
Pruned = Counter[uuid.UUID | None]
Resume = tuple[Any, ...] | None  # where a batch starts: after this (age, primary key); None: from the oldest
Pick = Callable[[ColumnElement[bool]], Select[*tuple[Any, ...]]]


@dataclass(frozen=True)
class Batch:
    """What a batch deleted, as picked, and where the next one starts (None: the cutoff is reached)."""

    rows: list[Row[Any]]
    resume_after: Resume

    def by_tenant(self) -> Pruned:
        return Counter(getattr(row, "tenant_id", None) for row in self.rows)


def prune_batch(
    session: Session, model: type[SQLModel], age: Any, *, before: datetime, after: Resume,
    limit: int, pick: Pick, dependents: Sequence[Callable[[list[Any]], None]] = (),
) -> Batch:
    """Look at the next ``limit`` rows of ``model`` whose ``age`` column is below ``before``, after the
    key ``after`` (``age`` then the primary key) and delete those ``pick`` selects among them.

    ``pick`` is given the condition "in this window" and returns a select of the rows to delete, its
    first columns the primary key. ``dependents`` delete first what other tables hold of those rows
    (given their keys, for a one-column primary key)."""
    table: Any = model.__table__  # type: ignore[attr-defined]  # every table model has one
    keys = list(table.primary_key.columns)
    order = [age, *keys]
    window = select(*order).where(age < before)
    if after is not None:  # the age bound lets the age index start where the previous batch stopped
        window = window.where(and_(age >= after[0], tuple_(*order) > tuple_(*after)))
    seen = session.execute(window.order_by(*order).limit(limit)).all()
    if not seen:
        return Batch([], None)
    postgres = session.get_bind().dialect.name == "postgresql"
    if postgres:
        session.execute(text(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'"))
    in_window = _keys_in(keys, [tuple(row[1:]) for row in seen], postgres=postgres)
    rows = list(session.execute(pick(in_window).with_for_update(skip_locked=True, of=model)).all())
    if rows:
        if len(keys) == 1:
            for dependent in dependents:
                dependent([row[0] for row in rows])
        session.execute(delete(table).where(_keys_in(keys, [tuple(row[:len(keys)]) for row in rows],
                                                    postgres=postgres)))
    return Batch(rows, tuple(seen[-1]) if len(seen) == limit else None)


def _keys_in(keys: list[Any], rows: list[tuple[Any, ...]], *, postgres: bool) -> ColumnElement[bool]:
    if len(keys) == 1:
        return keys[0].in_([row[0] for row in rows])
    if not postgres:
        return tuple_(*keys).in_(rows)
    # A composite key as one array a column, unnested: PostgreSQL plans ``(a, b) IN ((…), (…), …)`` as one
    # OR branch a row (a quarter of a second for a thousand), and a VALUES list is compiled anew each time.
    arrays = [bindparam(f"keys_{key.name}", [row[i] for row in rows], type_=postgresql.ARRAY(key.type))
              for i, key in enumerate(keys)]
    listed = func.unnest(*arrays).table_valued(*(key.name for key in keys)).render_derived()
    return tuple_(*keys).in_(select(*listed.c))
