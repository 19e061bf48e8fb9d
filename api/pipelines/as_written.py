"""The parts of a pipeline that are stored and read back as their client wrote them."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, SerializationInfo, SerializerFunctionWrapHandler, model_serializer


class AsWritten(BaseModel):
    """A part of a pipeline that is stored and read back as the client wrote it.

    Fields the client left out stay out (they take their documented defaults), so a client that
    compares what it sent with what it reads, Terraform first of all, sees no difference; a field
    someone else writes later shows up as a real change. Read back (``api.pipelines.definition``), a
    part is frozen, and a field left out reads as its default: the defaults are the ones below, only."""

    model_config = ConfigDict(frozen=True)

    # No return annotation: pydantic then documents the model's own schema in the OpenAPI document.
    @model_serializer(mode="wrap")
    def _as_written(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo):
        data = handler(self)
        fields = type(self).model_fields
        written = {(fields[name].alias or name) if info.by_alias else name for name in self.model_fields_set}
        return {key: value for key, value in data.items() if key in written}


def in_full(part: BaseModel) -> dict[str, Any]:
    """``part`` with every field, defaults written out (JSON-ready): what is in effect, not what was written."""
    return {name: in_full(value) if isinstance(value, BaseModel) else value
            for name, value in ((name, getattr(part, name)) for name in type(part).model_fields)}
