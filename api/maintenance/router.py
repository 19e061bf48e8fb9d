"""``/pipelines/{id}/maintenance``: a Delta pipeline's table health, and its maintenance run now."""

from __future__ import annotations

import uuid

from fastapi import APIRouter

from api.core.deps import Editor, SessionDep, SettingsDep, Viewer
from api.maintenance import service
from api.maintenance.schemas import MaintenanceAccepted, MaintenanceRequest, MaintenanceStatus

router = APIRouter(prefix="/pipelines", tags=["pipelines"])


@router.get("/{pipeline_id}/maintenance", operation_id="get_table_maintenance", response_model=MaintenanceStatus)
def get_table_maintenance(pipeline_id: uuid.UUID, ctx: Viewer, session: SessionDep,
                          settings: SettingsDep) -> MaintenanceStatus:
    """The pipeline's Delta table: files, small files, bytes, and what its last compaction, vacuum and checkpoint did."""
    return service.get_status(session=session, ctx=ctx, pipeline_id=pipeline_id, settings=settings)


@router.post("/{pipeline_id}/maintenance", operation_id="maintain_table", status_code=202,
             response_model=MaintenanceAccepted)
def maintain_table(pipeline_id: uuid.UUID, body: MaintenanceRequest, ctx: Editor, session: SessionDep,
                   settings: SettingsDep) -> MaintenanceAccepted:
    """Maintain the pipeline's Delta table now (compaction, vacuum, checkpoint); a dry run says what it would do."""
    return service.request_maintenance(session=session, ctx=ctx, pipeline_id=pipeline_id, body=body,
                                       settings=settings)
