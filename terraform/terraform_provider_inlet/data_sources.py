"""Data sources: a connection, a pipeline and a pipeline's offsets, read-only, by id or by name; and the
tenant's usage over a range."""

from __future__ import annotations

from typing import Any

from tf.iface import DataSource, ReadDataContext
from tf.schema import Attribute
from tf.types import Bool, Map, Number, String
from tf.utils import Diagnostics

from terraform_provider_inlet.base import Declared
from terraform_provider_inlet.client import InletClient, NotFound
from terraform_provider_inlet.values import JsonDocument, complete, option_texts, reported

_JSON = JsonDocument()


def _lookup(diags: Diagnostics, client: InletClient, collection: str, config: dict[str, Any]) -> dict[str, Any] | None:
    """One object by ``id``, or by exact ``name`` (the list endpoints filter by it)."""
    kind = collection.rstrip("s")
    if (config.get("id") is None) == (config.get("name") is None):
        diags.add_error(f"Give the {kind}'s id or its name (one of them)")
        return None
    if config.get("id") is not None:
        try:
            return client.get(f"/{collection}/{config['id']}").body
        except NotFound:
            diags.add_error(f"No {kind} {config['id']}", f"The API key's tenant has no {kind} with this id.")
            return None
    items = client.get(f"/{collection}", params={"name": config["name"], "limit": 2}).body["items"]
    if len(items) != 1:
        diags.add_error(f"No {kind} named {config['name']!r}", f"The API key's tenant has no {kind} with this name.")
        return None
    return items[0]


CONNECTION_ATTRIBUTES = [
    Attribute("id", String(), optional=True, computed=True),
    Attribute("name", String(), optional=True, computed=True),
    Attribute("bootstrap_servers", String(), computed=True),
    Attribute("security_protocol", String(), computed=True),
    Attribute("sasl_mechanism", String(), computed=True),
    Attribute("ssl_ca_pem", String(), computed=True),
    Attribute("ssl_certificate_pem", String(), computed=True),
    Attribute("ssl_endpoint_identification", String(), computed=True),
    Attribute("options", Map(String()), computed=True),
    Attribute("schema_registry_url", String(), computed=True, description="Null without a schema registry"),
    Attribute("schema_registry_auth", String(), computed=True, description="none, basic or bearer"),
    Attribute("has_credentials", Bool(), computed=True),
    Attribute("credentials_version", Number(), computed=True),
    Attribute("credentials_status", String(), computed=True),
]


class ConnectionDataSource(Declared, DataSource):
    name = "connection"
    attributes = CONNECTION_ATTRIBUTES
    description = "A connection, by id or name"

    def read(self, ctx: ReadDataContext, config: dict[str, Any]) -> dict[str, Any] | None:
        with reported(ctx.diagnostics, "Reading the connection"):
            found = _lookup(ctx.diagnostics, self.provider.client, "connections", config)
            if found is None:
                return None
            ssl = found.get("ssl") or {}
            registry = found.get("schema_registry") or {}
            return complete(CONNECTION_ATTRIBUTES, {
                **{k: found.get(k) for k in ("id", "name", "bootstrap_servers", "security_protocol",
                                             "sasl_mechanism", "has_credentials", "credentials_version",
                                             "credentials_status")},
                "ssl_ca_pem": ssl.get("ca_pem"), "ssl_certificate_pem": ssl.get("certificate_pem"),
                "ssl_endpoint_identification": ssl.get("endpoint_identification"),
                "options": option_texts(found["options"]),
                "schema_registry_url": registry.get("url"), "schema_registry_auth": registry.get("auth"),
            })
        return None


PIPELINE_ATTRIBUTES = [
    Attribute("id", String(), optional=True, computed=True),
    Attribute("name", String(), optional=True, computed=True),
    Attribute("source", String(), computed=True, description="JSON; jsondecode() it"),
    Attribute("target", String(), computed=True, description="JSON; jsondecode() it"),
    Attribute("schedule", String(), computed=True, description="JSON or null"),
    Attribute("state", String(), computed=True),
    Attribute("target_uri", String(), computed=True),
    Attribute("next_run_at", String(), computed=True),
]


class PipelineDataSource(Declared, DataSource):
    name = "pipeline"
    attributes = PIPELINE_ATTRIBUTES
    description = "A pipeline, by id or name"

    def read(self, ctx: ReadDataContext, config: dict[str, Any]) -> dict[str, Any] | None:
        with reported(ctx.diagnostics, "Reading the pipeline"):
            found = _lookup(ctx.diagnostics, self.provider.client, "pipelines", config)
            if found is None:
                return None
            status = found.get("status") or {}
            return complete(PIPELINE_ATTRIBUTES, {
                "id": found["id"], "name": found["name"], "state": found["state"],
                "source": _JSON.encode(found["source"]), "target": _JSON.encode(found["target"]),
                "schedule": _JSON.encode(found.get("schedule")),
                "target_uri": status.get("target_uri"), "next_run_at": status.get("next_run_at"),
            })
        return None


OFFSETS_ATTRIBUTES = [
    Attribute("pipeline_id", String(), required=True),
    Attribute("committed", Map(Number()), computed=True,
              description='Next offset to read, keyed "topic:partition" (partitions never read are absent)'),
    Attribute("earliest", Map(Number()), computed=True, description="Log start offsets (empty if the cluster "
                                                                     "was not reached)"),
    Attribute("latest", Map(Number()), computed=True, description="Last stable offsets"),
    Attribute("lag", Map(Number()), computed=True, description="Records between where the pipeline stands and latest"),
    Attribute("total_lag", Number(), computed=True),
    Attribute("cluster_status", String(), computed=True, description="ok, unreachable or error"),
]


class PipelineOffsetsDataSource(Declared, DataSource):
    name = "pipeline_offsets"
    attributes = OFFSETS_ATTRIBUTES
    description = "A pipeline's per-partition committed offsets, watermarks and lag"

    def read(self, ctx: ReadDataContext, config: dict[str, Any]) -> dict[str, Any] | None:
        with reported(ctx.diagnostics, "Reading the pipeline's offsets"):
            body = self.provider.client.get(f"/pipelines/{config['pipeline_id']}/offsets").body
            per = {name: {f"{p['topic']}:{p['partition']}": p[name] for p in body["partitions"] if p[name] is not None}
                   for name in ("committed", "earliest", "latest", "lag")}
            return complete(OFFSETS_ATTRIBUTES, {"pipeline_id": config["pipeline_id"], **per,
                                                 "total_lag": body.get("total_lag"),
                                                 "cluster_status": body["cluster"]["status"]})
        return None


USAGE_FIGURES = ("records_read", "rows_written", "rows_quarantined", "bytes_read", "bytes_written")
USAGE_ATTRIBUTES = [
    Attribute("pipeline_id", String(), optional=True, description="Only this pipeline (a deleted one too)"),
    Attribute("from", String(), optional=True, computed=True,
              description="RFC 3339 start, inclusive; default: a day (hour) or 30 days (day) before `to`"),
    Attribute("to", String(), optional=True, computed=True,
              description="RFC 3339 end, exclusive; default: the end of the current hour (or day)"),
    Attribute("granularity", String(), optional=True, computed=True, description="hour (the default) or day"),
    *(Attribute(name, Number(), computed=True, description="Over the range") for name in USAGE_FIGURES),
    Attribute("wall_seconds", Number(), computed=True),
    Attribute("engine_seconds", Number(), computed=True),
    Attribute("runs", Map(Number()), computed=True, description="Attempts by outcome: succeeded, failed, retried, "
                                                               "cancelled, skipped"),
    Attribute("buckets", String(), computed=True, description="JSON: GET /usage's items, one per pipeline and "
                                                              "hour (or day); jsondecode() it"),
]


class UsageDataSource(Declared, DataSource):
    name = "usage"
    attributes = USAGE_ATTRIBUTES
    description = "The tenant's usage over a range (GET /usage), summed, and per pipeline and hour or day"

    def read(self, ctx: ReadDataContext, config: dict[str, Any]) -> dict[str, Any] | None:
        with reported(ctx.diagnostics, "Reading the usage"):
            params = {name: config[name] for name in ("pipeline_id", "from", "to", "granularity")
                      if config.get(name) is not None}
            body = self.provider.client.get("/usage", params=params).body
            items = body["items"]
            runs = {outcome: sum(i["runs"][outcome] for i in items)
                    for outcome in ("succeeded", "failed", "retried", "cancelled", "skipped")}
            return complete(USAGE_ATTRIBUTES, {
                "pipeline_id": config.get("pipeline_id"), "from": body["from"], "to": body["to"],
                "granularity": body["granularity"],
                **{name: sum(i[name] for i in items) for name in (*USAGE_FIGURES, "wall_seconds", "engine_seconds")},
                "runs": runs, "buckets": _JSON.encode(items),
            })
        return None
