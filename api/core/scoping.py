"""The tenant choke point: every query of a tenant-owned table starts here.

Another tenant's object is indistinguishable from a missing one (404), never a 403.
"""

from __future__ import annotations

import uuid
from typing import Any, TypeVar

from sqlmodel import Session, select
from sqlmodel.sql.expression import SelectOfScalar

from api.core.errors import NotFound

M = TypeVar("M")


def scoped_select(model: type[M], tenant_id: uuid.UUID) -> SelectOfScalar[M]:
    return select(model).where(model.tenant_id == tenant_id)  # type: ignore[attr-defined]  # M: a tenant-owned table, all have tenant_id


def get_scoped(
    session: Session, model: type[M], tenant_id: uuid.UUID, ident: uuid.UUID, *, resource: str, lock: bool = False
) -> M:
    stmt: Any = scoped_select(model, tenant_id).where(model.id == ident)  # type: ignore[attr-defined]  # and an id primary key
    if lock:
        stmt = stmt.with_for_update()
    found = session.exec(stmt).first()
    if found is None:
        raise NotFound(resource, ident)
    return found
