"""Which rows refer to a row through a foreign key that forbids its deletion, read from the schema.

A table that may not be deleted while others refer to it (a connection still used by pipelines)
asks this instead of querying the referring domain's table itself: the rule lives in the foreign
keys (``ondelete="RESTRICT"``), and the layers stay one-way.
"""

from __future__ import annotations

import uuid

from sqlalchemy import or_, select
from sqlmodel import Session, SQLModel


def restricting_references(
    session: Session, model: type[SQLModel], row_id: uuid.UUID, *, limit: int = 20
) -> dict[str, list[uuid.UUID]]:
    """``{referring table: [ids]}`` (at most ``limit`` ids each) of rows whose RESTRICT foreign keys
    point at ``model``'s row ``row_id``."""
    table = SQLModel.metadata.tables[str(model.__tablename__)]
    found: dict[str, list[uuid.UUID]] = {}
    for other in SQLModel.metadata.sorted_tables:
        columns = [fk.parent for fk in other.foreign_keys
                   if fk.column.table is table and (fk.ondelete or "").upper() == "RESTRICT"]
        if not columns or "id" not in other.c:
            continue
        ids = session.execute(select(other.c.id).where(or_(*(c == row_id for c in columns))).limit(limit)).scalars().all()
        if ids:
            found[other.name] = list(ids)
    return found
