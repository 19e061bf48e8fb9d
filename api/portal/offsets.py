"""The portal's offsets page of a pipeline: which run wrote a given offset of a partition, and the
history of its offsets changes (who, when, how, and each partition's offset before and after, from the
audit trail)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any

from fastapi import Query
from fastapi.responses import Response

from api.audit.models import AuditEvent
from api.core.pagination import PageParams
from api.offsets import service as offsets
from api.offsets.schemas import OffsetLookup
from api.portal import audit, pages, views
from api.portal.auth import Viewer, portal_router
from api.portal.forms import FormInvalid, OffsetsQuery
from api.portal.pipelines import pipeline_view
from api.portal.views import FormErrors

router = portal_router()

HISTORY_PAGE = 20


@dataclass(frozen=True)
class OffsetMoveRow:
    topic: str
    partition: int
    before: int | None
    after: int | None
    clamped: bool


@dataclass(frozen=True)
class OffsetsChange:
    """One change of the offsets as the history shows it."""

    at: datetime
    who: str
    how: str
    replay_mode: str
    moves: list[OffsetMoveRow]


def _committed(doc: dict[str, Any] | None) -> dict[tuple[str, int], int | None]:
    return {(o["topic"], o["partition"]): o.get("committed") for o in (doc or {}).get("offsets", [])}


def history_row(event: AuditEvent, who: str) -> OffsetsChange:
    """An offsets audit event (``api.offsets.service.change_offsets`` records them) as a history row."""
    before, after = _committed(event.before), _committed(event.after)
    clamped = {(c["topic"], c["partition"]) for c in (event.after or {}).get("clamped", [])}
    mode, replay_mode = (str((event.after or {}).get(key, "")) for key in ("mode", "replay_mode"))
    return OffsetsChange(
        at=event.created_at, who=who, how=views.moved(mode), replay_mode=replay_mode,
        moves=[OffsetMoveRow(topic=t, partition=p, before=before.get((t, p)), after=after.get((t, p)),
                             clamped=(t, p) in clamped)
               for t, p in sorted(before.keys() | after.keys())],
    )


@router.get("/pipelines/{pipeline_id}/offsets")
def offsets_page(caller: Viewer, pipeline_id: str, query: Annotated[OffsetsQuery, Query()]) -> Response:
    """Which run wrote an offset (with a link to it), and the history of the pipeline's offsets changes."""
    view = pipeline_view(caller, pages.parse_id(pipeline_id, "Pipeline"))
    answer: OffsetLookup | None = None
    errors, status = FormErrors(), 200
    if query.asked:
        try:
            topic, partition, offset = query.question()
        except FormInvalid as exc:
            errors, status = exc.fields, exc.status
        else:
            answer = offsets.lookup(session=caller.session, ctx=caller.ctx, pipeline_id=view.pipeline.id,
                                    topic=topic, partition=partition, offset=offset)
    page = PageParams(limit=HISTORY_PAGE, offset=(query.number - 1) * HISTORY_PAGE, sort="-created_at")
    events, total = offsets.history(session=caller.session, ctx=caller.ctx, pipeline_id=view.pipeline.id, page=page)
    names = audit.actor_names(caller, events)
    committed = {(p.topic, p.partition): p.committed for p in view.offsets.partitions}
    return caller.render(
        "offsets.html", status=status, **view.context(), query=query, errors=errors, answer=answer,
        answer_committed=committed.get((answer.topic, answer.partition)) if answer else None,
        topics=sorted({p.topic for p in view.offsets.partitions} | set(view.read.source.topics or [])),
        history=[history_row(e, names[e.actor]) for e in events], total=total, page=query.number,
        pages=max((total + HISTORY_PAGE - 1) // HISTORY_PAGE, 1),
    )
