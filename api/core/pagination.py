"""One way to list: ``limit``/``offset``, a sort field from an allow-list with the id as tie-breaker,
and the response ``{items, total, limit, offset}``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from fastapi import Query, Request
from pydantic import BaseModel
from sqlalchemy import func
from sqlmodel import Session, select
from sqlmodel.sql.expression import SelectOfScalar

from api.core.errors import ValidationFailed

T = TypeVar("T")
M = TypeVar("M")


class Page(BaseModel, Generic[T]):
    items: list[T]
    total: int
    limit: int
    offset: int


@dataclass(frozen=True)
class PageParams:
    limit: int
    offset: int
    sort: str

    @property
    def descending(self) -> bool:
        return self.sort.startswith("-")

    @property
    def field(self) -> str:
        return self.sort.lstrip("-")


def page_params(sortable: Sequence[str], default: str = "created_at") -> Callable[..., PageParams]:
    """A dependency reading ``limit``, ``offset`` and ``sort`` (``field`` or ``-field``)."""
    allowed = ", ".join(sortable)

    def dependency(
        request: Request,
        limit: int = Query(50, ge=1, description="Page size"),
        offset: int = Query(0, ge=0, le=10_000_000),
        sort: str = Query(default, description=f"One of {allowed}; prefix '-' for descending"),
    ) -> PageParams:
        cap = request.app.state.settings.page_limit_max
        if limit > cap:
            raise ValidationFailed.field("query.limit", f"limit must be at most {cap}")
        if sort.lstrip("-") not in sortable:
            raise ValidationFailed.field("query.sort", f"sort must be one of {allowed} (optionally prefixed '-')")
        return PageParams(limit=limit, offset=offset, sort=sort)

    return dependency


def paginate(session: Session, stmt: SelectOfScalar[M], params: PageParams, model: Any) -> tuple[list[M], int]:
    """Rows of one page of ``stmt`` and the total count of ``stmt``."""
    total = session.exec(select(func.count()).select_from(stmt.order_by(None).subquery())).one()
    column = getattr(model, params.field)
    order = column.desc() if params.descending else column.asc()
    tie = model.id.desc() if params.descending else model.id.asc()
    rows = session.exec(stmt.order_by(order, tie).limit(params.limit).offset(params.offset)).all()
    return list(rows), int(total)
