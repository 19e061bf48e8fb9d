"""The provider as users install it: make setup's filesystem mirror (the registry's packed layout:
this platform's zip and the SHA256SUMS) found by ``tofu init`` offline, the lock file pinned to the
mirror's hashes; then, on a CLI with write-only arguments (OpenTofu 1.12), one apply of a connection
and a pipeline reading through it, an empty second plan, and a state that holds no credential."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import zipfile
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tests.factories import Tenant
from tests.fixtures.terraform import MIRROR, Terraform, provider_version
from tests.fixtures.vault import TestVault

pytestmark = [pytest.mark.slow]

PASSWORD = "tf-write-only-Secret-2718"


def _zips() -> list[Path]:
    return sorted((MIRROR / "inlet.dev" / "inlet" / "inlet").glob("terraform-provider-inlet_*.zip"))


def _h1(archive: Path) -> str:
    """The CLI's h1: hash of a provider package: the dirhash of the files the zip holds."""
    with zipfile.ZipFile(archive) as z:
        lines = sorted(f"{hashlib.sha256(z.read(name)).hexdigest()}  {name}\n" for name in z.namelist())
    return "h1:" + base64.b64encode(hashlib.sha256("".join(lines).encode()).digest()).decode()


def test_the_mirror_has_a_registrys_layout() -> None:
    version = provider_version()
    [archive] = _zips()
    assert re.fullmatch(rf"terraform-provider-inlet_{re.escape(version)}_[a-z0-9]+_[a-z0-9]+\.zip", archive.name)
    sums = archive.parent / f"terraform-provider-inlet_{version}_SHA256SUMS"
    assert sums.read_text() == f"{hashlib.sha256(archive.read_bytes()).hexdigest()}  {archive.name}\n"
    with zipfile.ZipFile(archive) as z:
        [binary] = z.infolist()
    assert binary.filename == f"terraform-provider-inlet_v{version}" and (binary.external_attr >> 16) & 0o111


def test_init_installs_from_the_mirror_offline_and_locks_its_hashes(tmp_path: Path) -> None:
    terraform = Terraform.prepare(tmp_path, endpoint="http://127.0.0.1:1", api_key="unused")
    terraform.write("")
    result = terraform.run("init")
    assert f"Installing inlet.dev/inlet/inlet v{provider_version()}" in result.stdout
    lock = (terraform.workdir / ".terraform.lock.hcl").read_text()
    [archive] = _zips()
    assert 'provider "inlet.dev/inlet/inlet"' in lock
    assert f'"{_h1(archive)}"' in lock, lock  # the same hash on every machine building the same source
    # a second init checks the package against the lock and leaves the lock as it was
    terraform.run("init")
    assert (terraform.workdir / ".terraform.lock.hcl").read_text() == lock


CONFIG = f"""
variable "kafka_password" {{
  type      = string
  sensitive = true
  ephemeral = true
  default   = "{PASSWORD}"
}}

resource "inlet_connection" "c" {{
  name                   = "secure"
  bootstrap_servers      = "broker-1.example.com:9093"
  security_protocol      = "SASL_SSL"
  sasl_mechanism         = "SCRAM-SHA-512"
  sasl_username          = "ingest"
  sasl_password_wo       = var.kafka_password
  credentials_wo_version = 1
}}

resource "inlet_pipeline" "p" {{
  name   = "orders"
  state  = "paused"
  source = {{ connection_id = inlet_connection.c.id, topics = ["orders"] }}
  target = {{ delta = {{ path = "bronze/orders" }} }}
}}
"""


def test_one_apply_an_empty_plan_and_no_credential_in_state(
    tmp_path: Path, inlet_url: str, tenant: Tenant, client: TestClient, vault: TestVault,
) -> None:
    terraform = Terraform.prepare(tmp_path, endpoint=inlet_url, api_key=tenant.keys["admin"], cli="1.12.6")
    terraform.write(CONFIG)
    terraform.run("init")
    terraform.apply()  # the pipeline's source waits on the connection's id: still one apply
    terraform.assert_no_changes()
    [connection] = client.get("/connections", headers=tenant.admin).json()["items"]
    [pipeline] = client.get("/pipelines", headers=tenant.admin).json()["items"]
    assert pipeline["source"] == {"connection_id": connection["id"], "topics": ["orders"]}
    assert vault.read(f"tenants/{tenant.id}/connections/{connection['id']}")["credentials"]["password"] == PASSWORD
    state = terraform.run("state", "pull").stdout
    assert PASSWORD not in state
    values = next(r for r in json.loads(state)["resources"] if r["type"] == "inlet_connection")["instances"][0]
    assert values["attributes"]["sasl_password_wo"] is None
    terraform.run("destroy", "-auto-approve")
    assert [p for p in vault.paths() if p.startswith(f"tenants/{tenant.id}/")] == []
