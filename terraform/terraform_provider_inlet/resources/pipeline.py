"""``inlet_pipeline``: a Kafka source, a target, a schedule and a state.

``source``, ``target`` and ``schedule`` are JSON documents (``jsonencode({...})``) in exactly the
shape of Inlet's API (see its OpenAPI document). Inlet stores and returns them as written, so a
field the configuration leaves out keeps its default without a diff, and a field changed through
the API or the portal shows as drift. A source reading Avro, Protobuf or JSON Schema values names
``value_format`` and, optionally, ``value_schema = { subject, version }`` (``key_format`` and
``key_schema`` alike), with schemas from its connection's schema registry."""

from __future__ import annotations

import json
from typing import Any

from tf.iface import CreateContext, DeleteContext, ImportContext, PlanContext, ReadContext, Resource, UpdateContext
from tf.schema import Attribute
from tf.types import String
from tf.utils import Diagnostics

from terraform_provider_inlet.base import Declared
from terraform_provider_inlet.values import (
    JsonDocument,
    complete,
    not_found,
    parse_document,
    reported,
    unknown_when_changed,
)

STATES = ("active", "paused")

ATTRIBUTES = [
    Attribute("id", String(), computed=True, description="The pipeline's id"),
    Attribute("name", String(), required=True),
    Attribute("source", JsonDocument(), required=True,
              description="jsonencode of the Kafka source: connection_id, topics or topic_pattern, starting_offsets, "
                          "value_format (raw, string, json, avro, protobuf, json_schema), value_schema…"),
    Attribute("target", JsonDocument(), required=True,
              description='jsonencode of the target: {type = "delta", path = …, maintenance = {…}} or '
                          '{type = "kafka", …}; maintenance: docs/maintenance.md'),
    Attribute("schedule", JsonDocument(), optional=True,
              description="jsonencode of {cron, timezone} or {interval_seconds}; none: runs only when triggered"),
    Attribute("state", String(), optional=True, computed=True, default="active", description="active or paused"),
    Attribute("target_uri", String(), computed=True, description="Where the Delta table lives (Delta targets)"),
    Attribute("etag", String(), computed=True, description="The ETag Terraform sends back as If-Match"),
]


def _path(ident: str) -> str:
    return f"/pipelines/{ident}"


def request_body(diags: Diagnostics, planned: dict[str, Any]) -> dict[str, Any] | None:
    source = parse_document(diags, "source", planned.get("source"))
    target = parse_document(diags, "target", planned.get("target"))
    schedule = parse_document(diags, "schedule", planned.get("schedule"))
    if source is not None:
        check_schema_versions(diags, source)
    if diags.has_errors():
        return None
    body = {"name": planned["name"], "source": source, "target": target, "schedule": schedule}
    if isinstance(planned.get("state"), str):
        body["state"] = planned["state"]
    return body


def check_schema_versions(diags: Diagnostics, source: dict[str, Any]) -> None:
    """A registry schema's version is a number or "latest". Inlet would take "3" and read it back as 3,
    a difference every plan would show again: refused here instead."""
    for part in ("value_schema", "key_schema"):
        chosen = source.get(part)
        version = chosen.get("version") if isinstance(chosen, dict) else None
        if isinstance(version, str) and version != "latest":
            diags.add_error(f"source.{part}.version must be a number or \"latest\"",
                            f"Write version = {version} (a number), not the string {json.dumps(version)}.",
                            path=["source"])


def state_from(answer: dict[str, Any], etag: str | None) -> dict[str, Any]:
    return {
        "id": answer["id"], "name": answer["name"], "source": answer["source"], "target": answer["target"],
        "schedule": answer.get("schedule"), "state": answer["state"],
        "target_uri": (answer.get("status") or {}).get("target_uri"), "etag": etag,
    }


class PipelineResource(Declared, Resource):
    name = "pipeline"
    attributes = ATTRIBUTES
    description = "An Inlet pipeline"

    def validate(self, diags: Diagnostics, type_name: str, config: dict[str, Any]) -> None:
        super().validate(diags, type_name, config)
        state = config.get("state")
        if isinstance(state, str) and state not in STATES:
            diags.add_error("state must be active or paused", path=["state"])

    def plan(self, ctx: PlanContext, current: dict[str, Any] | None, planned: dict[str, Any]) -> dict[str, Any]:
        planned = unknown_when_changed(planned, ctx.changed_fields, "etag")
        if "target" in ctx.changed_fields:
            planned = unknown_when_changed(planned, {"target"}, "target_uri")
        return planned

    def create(self, ctx: CreateContext, planned: dict[str, Any]) -> dict[str, Any] | None:
        body = request_body(ctx.diagnostics, planned)
        if body is None:
            return None
        with reported(ctx.diagnostics, "Creating the pipeline"):
            answer = self.provider.client.create("/pipelines", body)
            return complete(ATTRIBUTES, state_from(answer.body, answer.etag))
        return None

    def read(self, ctx: ReadContext, current: dict[str, Any]) -> dict[str, Any] | None:
        with reported(ctx.diagnostics, "Reading the pipeline"):
            answer = self.provider.client.find(_path(current["id"]))
            if answer is None:
                return None
            return complete(ATTRIBUTES, state_from(answer.body, answer.etag))
        return current

    def update(self, ctx: UpdateContext, current: dict[str, Any], planned: dict[str, Any]) -> dict[str, Any] | None:
        body = request_body(ctx.diagnostics, planned)
        if body is None:
            return current
        with reported(ctx.diagnostics, "Updating the pipeline"):
            answer = self.provider.client.put(_path(current["id"]), body, etag=current.get("etag"))
            return complete(ATTRIBUTES, state_from(answer.body, answer.etag))
        return current

    def delete(self, ctx: DeleteContext, current: dict[str, Any]) -> None:
        with reported(ctx.diagnostics, "Deleting the pipeline"):
            self.provider.client.delete(_path(current["id"]), etag=current.get("etag"))

    def import_(self, ctx: ImportContext, id: str) -> dict[str, Any] | None:
        with reported(ctx.diagnostics, "Importing the pipeline"):
            answer = self.provider.client.find(_path(id))
            if answer is None:
                not_found(ctx.diagnostics, "pipeline", id)
                return None
            return complete(ATTRIBUTES, state_from(answer.body, answer.etag))
        return None
