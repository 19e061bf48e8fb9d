"""``inlet_api_key``: another API key for the tenant (the provider's key needs the admin role).

The key itself is shown once, when it is created: it lands in state as a sensitive value and is
never read back. Revoking it outside Terraform is drift: the next apply issues a new one."""

from __future__ import annotations

from typing import Any

from tf.iface import CreateContext, DeleteContext, ImportContext, ReadContext, Resource, UpdateContext
from tf.schema import Attribute
from tf.types import String
from tf.utils import Diagnostics

from terraform_provider_inlet.base import Declared
from terraform_provider_inlet.values import complete, not_found, reported

ROLES = ("viewer", "editor", "admin")

ATTRIBUTES = [
    Attribute("id", String(), computed=True),
    Attribute("name", String(), required=True, requires_replace=True),
    Attribute("role", String(), required=True, requires_replace=True, description="viewer, editor or admin"),
    Attribute("prefix", String(), computed=True, description="The key's first characters, to recognise it"),
    Attribute("key", String(), computed=True, sensitive=True,
              description="The API key; known only to the apply that created it (null after an import)"),
    Attribute("created_at", String(), computed=True),
]


def _state(answer: dict[str, Any], key: str | None) -> dict[str, Any]:
    return complete(ATTRIBUTES, {"id": answer["id"], "name": answer["name"], "role": answer["role"],
                                 "prefix": answer["prefix"], "key": key, "created_at": answer["created_at"]})


class ApiKeyResource(Declared, Resource):
    name = "api_key"
    attributes = ATTRIBUTES
    description = "An API key of the provider's tenant"

    def validate(self, diags: Diagnostics, type_name: str, config: dict[str, Any]) -> None:
        super().validate(diags, type_name, config)
        if isinstance(config.get("role"), str) and config["role"] not in ROLES:
            diags.add_error("role must be viewer, editor or admin", path=["role"])

    def create(self, ctx: CreateContext, planned: dict[str, Any]) -> dict[str, Any] | None:
        with reported(ctx.diagnostics, "Issuing the API key"):
            answer = self.provider.client.create("/api-keys", {"name": planned["name"], "role": planned["role"]})
            if answer.body.get("key") is None:  # a replay of a create whose answer was lost: the key is not stored
                self.provider.client.delete(f"/api-keys/{answer.body['id']}")
                ctx.diagnostics.add_error("The new API key was lost on its way back",
                                          "Inlet issued it but the answer did not arrive; it has been revoked. "
                                          "Apply again to issue another.")
                return None
            return _state(answer.body, answer.body["key"])
        return None

    def read(self, ctx: ReadContext, current: dict[str, Any]) -> dict[str, Any] | None:
        with reported(ctx.diagnostics, "Reading the API key"):
            answer = self.provider.client.find(f"/api-keys/{current['id']}")
            if answer is None:
                return None
            if answer.body.get("revoked_at") is not None:
                return None
            return _state(answer.body, current.get("key"))
        return current

    def update(self, ctx: UpdateContext, current: dict[str, Any], planned: dict[str, Any]) -> dict[str, Any] | None:
        return current  # every argument forces a new key

    def delete(self, ctx: DeleteContext, current: dict[str, Any]) -> None:
        with reported(ctx.diagnostics, "Revoking the API key"):
            self.provider.client.delete(f"/api-keys/{current['id']}")

    def import_(self, ctx: ImportContext, id: str) -> dict[str, Any] | None:
        with reported(ctx.diagnostics, "Importing the API key"):
            answer = self.provider.client.find(f"/api-keys/{id}")
            if answer is None:
                not_found(ctx.diagnostics, "API key", id)
                return None
            return _state(answer.body, None)
        return None
