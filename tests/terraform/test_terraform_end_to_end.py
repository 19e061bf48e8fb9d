"""The provider end to end, through the real OpenTofu CLI (the provider from make setup's filesystem mirror) against a running Inlet whose secrets
live in a real OpenBao server, reading a topic of the sandbox Kafka.

One configuration walks the lifecycle a platform team lives through: init offline, plan, apply, a
clean second plan, an update, drift made through the API, an object deleted outside Terraform,
imports, a replay on a paused pipeline, a stale ETag, and a destroy that leaves nothing behind."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.factories import Tenant
from tests.fixtures.kafka import SandboxKafka
from tests.fixtures.terraform import Terraform
from tests.fixtures.vault import TestVault

pytestmark = [pytest.mark.slow]

PASSWORD = "tf-sasl-Secret-4711"
ROTATED = "tf-sasl-Rotated-0815"


def config(*, bootstrap: str, topic: str, schedule: str = "{ interval_seconds = 300 }", state: str = "active",
           password: str = PASSWORD, extra: str = "") -> str:
    return f"""
variable "sasl_password" {{
  type    = string
  default = "{password}"
}}

resource "inlet_connection" "sandbox" {{
  name              = "sandbox"
  bootstrap_servers = "{bootstrap}"
}}

resource "inlet_connection" "secure" {{
  name              = "secure"
  bootstrap_servers = "broker-1.example.com:9093"
  security_protocol = "SASL_SSL"
  sasl_mechanism    = "SCRAM-SHA-512"
  sasl_username     = "ingest"
  sasl_password     = var.sasl_password
  options           = {{ "client.id" = "terraform" }}
}}

resource "inlet_pipeline" "orders" {{
  name   = "orders"
  source = {{
    connection_id = inlet_connection.sandbox.id
    topics        = ["{topic}"]
    value_format  = "string"
  }}
  target   = {{ delta = {{ path = "bronze/orders" }} }}
  schedule = {schedule}
  state    = "{state}"
}}

resource "inlet_api_key" "reader" {{
  name = "dashboards"
  role = "viewer"
}}

data "inlet_connection" "by_name" {{
  name       = "sandbox"
  depends_on = [inlet_connection.sandbox]
}}

output "reader_key" {{
  value     = inlet_api_key.reader.key
  sensitive = true
}}

output "sandbox_servers" {{
  value = data.inlet_connection.by_name.bootstrap_servers
}}

data "inlet_pipeline" "orders" {{
  id = inlet_pipeline.orders.id
}}

output "orders_target" {{
  value = data.inlet_pipeline.orders.target.delta.path
}}
{extra}"""


REPLAY = """
resource "inlet_pipeline_offsets" "replay" {{
  pipeline_id = inlet_pipeline.orders.id
  {change}
  depends_on  = [inlet_pipeline.orders]
}}

data "inlet_pipeline_offsets" "now" {{
  pipeline_id = inlet_pipeline.orders.id
  depends_on  = [inlet_pipeline_offsets.replay]
}}

output "lag" {{
  value = data.inlet_pipeline_offsets.now.total_lag
}}
"""


def _only(client: TestClient, tenant: Tenant, collection: str) -> list[dict[str, Any]]:
    return client.get(f"/{collection}", headers=tenant.admin).json()["items"]


def test_terraform_lifecycle(
    terraform: Terraform, client: TestClient, tenant: Tenant, vault: TestVault, sandbox_kafka: SandboxKafka, kafka_topic: Callable[..., str],
    produce_keyed: Callable[..., dict[int, list[int]]],
) -> None:
    topic = kafka_topic(partitions=2)
    produce_keyed(sandbox_kafka.bootstrap_servers, topic, 20)
    write = lambda **kw: terraform.write(config(bootstrap=sandbox_kafka.bootstrap_servers, topic=topic, **kw))  # noqa: E731

    # init offline, plan, apply, and a second plan that finds nothing to do
    write()
    terraform.run("init")
    assert terraform.plan_exit_code()[0] == 2
    terraform.apply()
    terraform.assert_no_changes()
    pipeline = _only(client, tenant, "pipelines")[0]
    assert pipeline["source"] == {"connection_id": pipeline["source"]["connection_id"], "topics": [topic],
                                  "value_format": "string"}  # as written: no injected defaults
    secure = next(c for c in _only(client, tenant, "connections") if c["name"] == "secure")
    assert vault.read(f"tenants/{tenant.id}/connections/{secure['id']}") == {
        "credentials": {"username": "ingest", "password": PASSWORD}}
    assert terraform.output("sandbox_servers") == sandbox_kafka.bootstrap_servers
    assert terraform.output("orders_target") == "bronze/orders"
    reader = client.get("/me", headers={"Authorization": f"Bearer {terraform.output('reader_key')}"})
    assert reader.status_code == 200 and reader.json()["role"] == "viewer"

    # an update goes out with If-Match and leaves a clean plan
    write(schedule='{ cron = "*/10 * * * *", timezone = "Europe/Paris" }')
    terraform.apply()
    assert client.get(f"/pipelines/{pipeline['id']}", headers=tenant.viewer).json()["schedule"] == {
        "cron": "*/10 * * * *", "timezone": "Europe/Paris"}
    terraform.assert_no_changes()

    # drift made through the API shows on the next plan, and apply puts the configuration back
    changed = client.patch(f"/pipelines/{pipeline['id']}", json={"source": {"max_offsets_per_run": 5}},
                           headers={**tenant.editor, "Content-Type": "application/merge-patch+json"})
    assert changed.status_code == 200, changed.text
    rotated = client.patch(f"/connections/{secure['id']}", json={"credentials": {"username": "x", "password": ROTATED}},
                           headers={**tenant.editor, "Content-Type": "application/merge-patch+json"})
    assert rotated.status_code == 200, rotated.text
    code, plan = terraform.plan_exit_code()
    assert code == 2
    assert "max_offsets_per_run" in plan and "inlet_connection.secure will be updated" in plan
    assert ROTATED not in plan and PASSWORD not in plan
    terraform.apply()
    assert "max_offsets_per_run" not in client.get(f"/pipelines/{pipeline['id']}", headers=tenant.viewer).json()["source"]
    assert vault.read(f"tenants/{tenant.id}/connections/{secure['id']}")["credentials"]["password"] == PASSWORD
    terraform.assert_no_changes()

    # rotation by changing the password: a new secret version, the same connection
    version = client.get(f"/connections/{secure['id']}", headers=tenant.viewer).json()["credentials_version"]
    write(password=ROTATED)
    terraform.apply()
    after = client.get(f"/connections/{secure['id']}", headers=tenant.viewer).json()
    assert after["credentials_version"] > version
    assert vault.read(f"tenants/{tenant.id}/connections/{secure['id']}")["credentials"]["password"] == ROTATED
    terraform.assert_no_changes()

    # deleted outside Terraform: planned for re-creation, and re-created
    assert client.delete(f"/pipelines/{pipeline['id']}", headers=tenant.editor).status_code == 204
    code, plan = terraform.plan_exit_code()
    assert code == 2 and "inlet_pipeline.orders will be created" in plan
    terraform.apply()
    [pipeline] = _only(client, tenant, "pipelines")
    assert terraform.resource("inlet_pipeline.orders")["id"] == pipeline["id"]

    # import by id round-trips with no changes, write-only credentials included
    key_id = terraform.resource("inlet_api_key.reader")["id"]
    terraform.run("state", "rm", "inlet_pipeline.orders", "inlet_connection.secure", "inlet_api_key.reader")
    terraform.run("import", "inlet_pipeline.orders", pipeline["id"])
    terraform.run("import", "inlet_api_key.reader", key_id)
    terraform.run("import", "inlet_connection.secure", secure["id"], env={
        "INLET_IMPORT_CREDENTIALS": json.dumps({"sasl_username": "ingest", "sasl_password": ROTATED})})
    terraform.assert_no_changes()
    assert len(_only(client, tenant, "pipelines")) == 1 and len(_only(client, tenant, "connections")) == 2

    # a replay is refused while the pipeline runs, with Inlet's own words
    replay = REPLAY.format(change=f'offsets = {{ "{topic}:0" = 2, "{topic}:1" = 0 }}')
    write(password=ROTATED, extra=replay)
    refused = terraform.run("apply", "-auto-approve", check=False)
    assert refused.code == 1 and "409" in refused.output and "paused" in refused.output

    # ... and applied once the pipeline is paused (explicit offsets, under If-Match)
    write(password=ROTATED, state="paused", extra=replay)
    terraform.apply()
    offsets = client.get(f"/pipelines/{pipeline['id']}/offsets", headers=tenant.viewer).json()
    committed = {(p["topic"], p["partition"]): p["committed"] for p in offsets["partitions"]}
    assert committed == {(topic, 0): 2, (topic, 1): 0}
    assert terraform.resource("inlet_pipeline_offsets.replay")["committed"] == {f"{topic}:0": 2, f"{topic}:1": 0}
    assert terraform.output("lag") == offsets["total_lag"] > 0
    terraform.assert_no_changes()

    # another change to the resource is another move: back to earliest (replacing what was written),
    # to latest (a skip), then to the starting offsets; a move to a point in time needs a real broker
    # (test_terraform_real_broker.py)
    latest = {(p["topic"], p["partition"]): p["latest"] for p in offsets["partitions"]}
    assert sum(latest.values()) == 20
    start = {(topic, 0): 0, (topic, 1): 0}
    back = f'reset = "earliest"\n  topics = ["{topic}"]\n  replay_mode = "replace"'
    for change, expected in ((back, start), ('reset = "latest"', latest), ('reset = "starting_offsets"', start)):
        write(password=ROTATED, state="paused", extra=REPLAY.format(change=change))
        terraform.apply()
        now = client.get(f"/pipelines/{pipeline['id']}/offsets", headers=tenant.viewer).json()
        assert {(p["topic"], p["partition"]): p["committed"] for p in now["partitions"]} == expected, change
        terraform.assert_no_changes()
    history = client.get(f"/pipelines/{pipeline['id']}/offsets/history", headers=tenant.viewer).json()
    assert history["total"] == 4
    replay = REPLAY.format(change='reset = "starting_offsets"')

    # a plan made before someone else's change is refused at apply (412), not applied over it
    write(password=ROTATED, state="paused", schedule="{ interval_seconds = 600 }", extra=replay)
    terraform.run("plan", "-out", "stale.plan")
    renamed = client.patch(f"/pipelines/{pipeline['id']}", json={"schedule": {"interval_seconds": 900}},
                           headers={**tenant.editor, "Content-Type": "application/merge-patch+json"})
    assert renamed.status_code == 200
    stale = terraform.run("apply", "stale.plan", check=False)
    assert stale.code == 1 and "412" in stale.output and "changed since Terraform last read it" in stale.output
    assert client.get(f"/pipelines/{pipeline['id']}", headers=tenant.viewer).json()["schedule"] == {
        "interval_seconds": 900}
    terraform.apply()
    terraform.assert_no_changes()

    # destroy leaves nothing: no rows for the tenant, no secret in Vault, the issued key revoked
    key_id = terraform.resource("inlet_api_key.reader")["id"]
    terraform.run("destroy", "-auto-approve")
    assert _only(client, tenant, "pipelines") == [] and _only(client, tenant, "connections") == []
    assert [p for p in vault.paths() if p.startswith(f"tenants/{tenant.id}/")] == []
    assert client.get(f"/api-keys/{key_id}", headers=tenant.admin).json()["revoked_at"] is not None


KEYED = """
resource "inlet_pipeline" "customers" {{
  name   = "customers"
  source = {{
    connection_id = inlet_connection.sandbox.id
    topics        = ["{topic}"]
    value_format  = "json"
    schema        = "id BIGINT, name STRING, tier INT"
  }}
  target = {{
    delta = {{
      path        = "silver/customers"
      mode        = "upsert"
      key         = ["id"]
      sequence_by = "source.lsn"
      changes     = "debezium"
      deletes     = "soft"
    }}
  }}
  schedule = {{ interval_seconds = 300 }}
  state    = "paused"
}}
"""


def test_a_keyed_table_is_applied_as_written_and_imports_without_drift(
    terraform: Terraform, client: TestClient, tenant: Tenant, sandbox_kafka: SandboxKafka, kafka_topic: Callable[..., str],
) -> None:
    topic = kafka_topic(partitions=1)
    terraform.write(config(bootstrap=sandbox_kafka.bootstrap_servers, topic=topic, extra=KEYED.format(topic=topic)))
    terraform.run("init")
    terraform.apply()
    terraform.assert_no_changes()
    keyed = next(p for p in _only(client, tenant, "pipelines") if p["name"] == "customers")
    assert keyed["target"] == {"type": "delta", "path": "silver/customers", "mode": "upsert", "key": ["id"],
                               "sequence_by": "source.lsn", "changes": "debezium", "deletes": "soft"}  # as written: no drift to come

    terraform.run("state", "rm", "inlet_pipeline.customers")
    terraform.run("import", "inlet_pipeline.customers", keyed["id"])
    terraform.assert_no_changes()
    terraform.run("destroy", "-auto-approve")
    assert _only(client, tenant, "pipelines") == []
