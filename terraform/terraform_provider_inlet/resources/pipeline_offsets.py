"""``inlet_pipeline_offsets``: where a paused pipeline reads next, set through the offsets API.

It records a change you ask for: explicit offsets (``"topic:partition" = offset``), a reset to
earliest, latest or the pipeline's starting offsets, or a move to a point in time. Applying it
moves the offsets once, under If-Match, and only while the pipeline is paused (Inlet's rule: it
answers 409 otherwise). Runs move the offsets forward afterwards; that is the pipeline working, not
drift. Changing the resource applies the new change; destroying it leaves the offsets where they
are. Kafka Connect's offsets API and Confluent's ``offsets`` blocks follow the same idea."""

from __future__ import annotations

from typing import Any

from tf.iface import CreateContext, DeleteContext, ImportContext, PlanContext, ReadContext, Resource, UpdateContext
from tf.schema import Attribute
from tf.types import Bool, List, Map, Number, String
from tf.utils import Diagnostics

from terraform_provider_inlet.base import Declared
from terraform_provider_inlet.values import complete, not_found, reported, unknown_when_changed

RESETS = ("earliest", "latest", "starting_offsets")
REPLAY_MODES = ("append", "replace")
MODES = ("offsets", "reset", "to_timestamp")

ATTRIBUTES = [
    Attribute("id", String(), computed=True, description="The pipeline's id"),
    Attribute("pipeline_id", String(), required=True, requires_replace=True),
    Attribute("offsets", Map(Number()), optional=True,
              description='The next offset to read per partition, keyed "topic:partition"'),
    Attribute("reset", String(), optional=True, description="earliest, latest or starting_offsets"),
    Attribute("to_timestamp", String(), optional=True,
              description="RFC 3339 time: each partition moves to its first record at or after it"),
    Attribute("topics", List(String()), optional=True,
              description="Limit reset or to_timestamp to these topics (default: all the pipeline reads)"),
    Attribute("replay_mode", String(), optional=True, computed=True, default="append",
              description="append: replayed records are written again; replace: they replace the rows already "
                          "written for those offsets (Delta targets)"),
    Attribute("clamp", Bool(), optional=True,
              description="Clamp targets outside [earliest, latest] instead of failing"),
    Attribute("committed", Map(Number()), computed=True,
              description='The offsets right after the change, keyed "topic:partition"'),
]


def _path(pipeline_id: str) -> str:
    return f"/pipelines/{pipeline_id}/offsets"


def _key(topic: str, partition: int) -> str:
    return f"{topic}:{partition}"


def partition_entries(diags: Diagnostics, offsets: dict[str, Any]) -> list[dict[str, Any]]:
    entries = []
    for key, offset in sorted(offsets.items()):
        topic, sep, partition = key.rpartition(":")
        if not sep or not topic or not partition.isdigit():
            diags.add_error(f'offsets key {key!r} is not "topic:partition"', path=["offsets"])
            continue
        if not isinstance(offset, (int, float)) or offset != int(offset):
            diags.add_error(f"offsets[{key!r}] is not a whole number", path=["offsets"])
            continue
        entries.append({"topic": topic, "partition": int(partition), "offset": int(offset)})
    return entries


def check_config(diags: Diagnostics, config: dict[str, Any]) -> None:
    given = [m for m in MODES if config.get(m) is not None]
    if len(given) > 1 or (not given and all(m in config for m in MODES)):
        diags.add_error("Give exactly one of offsets, reset or to_timestamp",
                        f"Got {', '.join(given) or 'none'}.")
    if isinstance(config.get("reset"), str) and config["reset"] not in RESETS:
        diags.add_error("reset must be earliest, latest or starting_offsets", path=["reset"])
    if isinstance(config.get("replay_mode"), str) and config["replay_mode"] not in REPLAY_MODES:
        diags.add_error("replay_mode must be append or replace", path=["replay_mode"])
    if config.get("topics") is not None and config.get("offsets") is not None:
        diags.add_error("topics limits reset or to_timestamp; explicit offsets name their partitions",
                        path=["topics"])
    if config.get("reset") == "starting_offsets" and (
            config.get("topics") is not None or config.get("clamp") or config.get("replay_mode") == "replace"):
        diags.add_error("reset = starting_offsets applies to every partition in append mode: "
                        "it takes no topics, clamp or replay_mode = replace")


def change_request(diags: Diagnostics, planned: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """How Inlet's offsets API takes the change: DELETE (back to the starting offsets) or a PATCH body."""
    if planned.get("reset") == "starting_offsets":
        return "DELETE", {}
    body: dict[str, Any] = {"replay_mode": planned.get("replay_mode") or "append", "clamp": bool(planned.get("clamp"))}
    if planned.get("offsets") is not None:
        body["offsets"] = partition_entries(diags, planned["offsets"])
        if diags.has_errors():
            return None
    elif planned.get("reset") is not None:
        body["reset"] = planned["reset"]
    else:
        body["to_timestamp"] = planned["to_timestamp"]
    if planned.get("topics") is not None:
        body["topics"] = planned["topics"]
    return "PATCH", body


class PipelineOffsetsResource(Declared, Resource):
    name = "pipeline_offsets"
    attributes = ATTRIBUTES
    description = "Moves a paused pipeline's offsets (a replay or a skip), once per change"

    def validate(self, diags: Diagnostics, type_name: str, config: dict[str, Any]) -> None:
        super().validate(diags, type_name, config)
        if not diags.has_errors():
            check_config(diags, config)

    def plan(self, ctx: PlanContext, current: dict[str, Any] | None, planned: dict[str, Any]) -> dict[str, Any]:
        return unknown_when_changed(planned, ctx.changed_fields, "committed")

    def _apply(self, diags: Diagnostics, planned: dict[str, Any]) -> dict[str, Any] | None:
        """Read the offsets' ETag, then make the change under If-Match."""
        request = change_request(diags, planned)
        if request is None:
            return None
        method, body = request
        client = self.provider.client
        path = _path(planned["pipeline_id"])
        with reported(diags, "Moving the pipeline's offsets"):
            etag = client.get(path).etag
            if method == "DELETE":
                answer = client.delete(path, etag=etag, missing_ok=False)
                assert answer is not None
            else:
                answer = client.patch(path, body, etag=etag)
            committed = {_key(row["topic"], row["partition"]): row["after"] for row in answer.body["rows"]}
            return complete(ATTRIBUTES, planned | {"id": planned["pipeline_id"], "committed": committed,
                                                   "replay_mode": planned.get("replay_mode") or "append"})
        return None

    def create(self, ctx: CreateContext, planned: dict[str, Any]) -> dict[str, Any] | None:
        return self._apply(ctx.diagnostics, planned)

    def update(self, ctx: UpdateContext, current: dict[str, Any], planned: dict[str, Any]) -> dict[str, Any] | None:
        return self._apply(ctx.diagnostics, planned) or current

    def read(self, ctx: ReadContext, current: dict[str, Any]) -> dict[str, Any] | None:
        """The change stays as applied; only a deleted pipeline takes the resource with it."""
        with reported(ctx.diagnostics, "Reading the pipeline"):
            if self.provider.client.find(f"/pipelines/{current['pipeline_id']}") is None:
                return None
        return current

    def delete(self, ctx: DeleteContext, current: dict[str, Any]) -> None:
        """Offsets are the pipeline's: they stay where they are."""

    def import_(self, ctx: ImportContext, id: str) -> dict[str, Any] | None:
        """Import by pipeline id: the current committed offsets become ``offsets``."""
        with reported(ctx.diagnostics, "Importing the pipeline's offsets"):
            answer = self.provider.client.find(_path(id))
            if answer is None:
                not_found(ctx.diagnostics, "pipeline", id)
                return None
            committed = {_key(p["topic"], p["partition"]): p["committed"]
                         for p in answer.body["partitions"] if p["committed"] is not None}
            return complete(ATTRIBUTES, {"id": id, "pipeline_id": id, "offsets": committed,
                                         "replay_mode": "append", "committed": committed})
        return None
