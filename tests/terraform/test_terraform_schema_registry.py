"""The ``schema_registry_*`` attributes of ``inlet_connection`` and a pipeline reading Avro values through it,
through the real OpenTofu CLI against a running Inlet whose secrets live in a real OpenBao server:
apply, a clean second plan, rotation, a switch from basic auth to a token, drift made through the API,
an import with the registry's credentials, the registry's removal, and a destroy."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.factories import Tenant
from tests.fixtures.terraform import Terraform
from tests.fixtures.vault import TestVault

pytestmark = [pytest.mark.slow]

PASSWORD = "tf-registry-Secret-1234"
ROTATED = "tf-registry-Rotated-5678"
TOKEN = "tf-registry-T0ken-9012"
MERGE = {"Content-Type": "application/merge-patch+json"}


BASIC = 'schema_registry_username = "inlet"\n  schema_registry_password = var.registry_secret'
AVRO = 'value_format = "avro"\n    value_schema  = { subject = "orders-value", version = 3 }'


def config(*, auth: str = BASIC, secret: str = PASSWORD, registry: bool = True, value: str = AVRO) -> str:
    registry_lines = f"""
  schema_registry_url = "https://registry.example.com:8081"
  {auth}""" if registry else ""
    return f"""
variable "registry_secret" {{
  type      = string
  default   = "{secret}"
  sensitive = true
}}

resource "inlet_connection" "events" {{
  name              = "events"
  bootstrap_servers = "broker-1.example.com:9092"{registry_lines}
}}

resource "inlet_pipeline" "orders" {{
  name   = "orders"
  source = {{
    connection_id = inlet_connection.events.id
    topics        = ["orders"]
    {value}
  }}
  target = {{ delta = {{ path = "bronze/orders" }} }}
  state  = "paused"
}}
"""


def _connection(client: TestClient, tenant: Tenant) -> dict[str, Any]:
    [conn] = client.get("/connections", headers=tenant.admin).json()["items"]
    return conn  # type: ignore[no-any-return]


def test_a_connections_schema_registry_through_terraform(terraform: Terraform, client: TestClient, tenant: Tenant,
                                                         vault: TestVault) -> None:
    terraform.write(config())
    terraform.run("init")
    terraform.apply()
    terraform.assert_no_changes()
    conn = _connection(client, tenant)
    path = f"tenants/{tenant.id}/connections/{conn['id']}"
    assert conn["schema_registry"] == {"url": "https://registry.example.com:8081", "ca_pem": None,
                                       "endpoint_identification": "https", "auth": "basic"}
    assert vault.read(path) == {"registry_credentials": {"username": "inlet", "password": PASSWORD}}
    [pipeline] = client.get("/pipelines", headers=tenant.admin).json()["items"]
    assert pipeline["source"] == {"connection_id": conn["id"], "topics": ["orders"], "value_format": "avro",
                                  "value_schema": {"subject": "orders-value", "version": 3}}
    shown = terraform.run("show").stdout
    assert PASSWORD not in shown and "schema_registry_password" in shown and "(sensitive value)" in shown

    # a new password is a new secret version; then a token instead, then back to a clean plan
    terraform.write(config(secret=ROTATED))
    terraform.apply()
    assert (_connection(client, tenant)["credentials_version"], vault.read(path)["registry_credentials"]["password"]) \
        == (2, ROTATED)
    terraform.assert_no_changes()
    terraform.write(config(auth=f'schema_registry_token = "{TOKEN}"'))
    terraform.apply()
    assert (_connection(client, tenant)["schema_registry"]["auth"], vault.read(path)) == (
        "bearer", {"registry_credentials": {"token": TOKEN}})
    terraform.assert_no_changes()

    # drift through the API (the URL; credentials rotated outside Terraform) shows, and apply puts it back
    url = f"/connections/{conn['id']}"
    moved = client.patch(url, json={"schema_registry": {"url": "https://elsewhere.example.com"}},
                         headers=tenant.editor | MERGE)
    assert moved.status_code == 200, moved.text
    rotated = client.patch(url, json={"schema_registry": {"credentials": {"username": "x", "password": ROTATED}}},
                           headers=tenant.editor | MERGE)
    assert rotated.status_code == 200, rotated.text
    code, plan = terraform.plan_exit_code()
    assert code == 2 and "inlet_connection.events will be updated" in plan and "elsewhere.example.com" in plan
    assert TOKEN not in plan and ROTATED not in plan
    terraform.apply()
    assert _connection(client, tenant)["schema_registry"] == {
        "url": "https://registry.example.com:8081", "ca_pem": None, "endpoint_identification": "https", "auth": "bearer"}
    assert vault.read(path) == {"registry_credentials": {"token": TOKEN}}
    terraform.assert_no_changes()

    # an import given the registry's token plans no change
    terraform.run("state", "rm", "inlet_connection.events")
    terraform.run("import", "inlet_connection.events", conn["id"], env={
        "INLET_IMPORT_CREDENTIALS": json.dumps({"schema_registry_token": TOKEN})})
    terraform.assert_no_changes()

    # without the attributes the registry and its credentials go (the pipeline reads strings again)
    terraform.write(config(registry=False, value='value_format = "string"'))
    terraform.apply()
    after = _connection(client, tenant)
    assert (after["schema_registry"], after["has_credentials"], vault.metadata(path)) == (None, False, None)
    terraform.assert_no_changes()

    terraform.run("destroy", "-auto-approve")
    assert client.get("/connections", headers=tenant.admin).json()["total"] == 0
