"""The provider's acceptance tests (terraform/internal/provider/*_test.go, terraform-plugin-testing)
against a running Inlet: served over HTTP, its secrets in a real OpenBao server, reading a topic of the
sandbox Kafka. Each run drives the real OpenTofu CLI that make setup built from the Go module proxy.

The whole suite runs on OpenTofu 1.10 (the oldest CLI docs/terraform.md promises: no write-only
arguments, which its write-only tests see refused with a clear error, and no resource identities)
and on 1.12 (write-only arguments never in state, imports by identity). Afterwards the tenant has no
pipeline, connection, webhook or lag alert left, and no secret in OpenBao."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tests.factories import Tenant
from tests.fixtures.kafka import SandboxKafka
from tests.fixtures.terraform import GO_PROVIDER, opentofu
from tests.fixtures.vault import TestVault

pytestmark = [pytest.mark.slow]

# The machine's Go, else the one make setup put in .venv (as scripts/terraform.sh chooses).
GO = shutil.which("go") or str(GO_PROVIDER.parent / ".venv" / "bin" / "go")
# A Go test filter for a local loop: INLET_ACC_RUN=TestAccWebhook pytest tests/terraform/test_acceptance.py
RUN = os.environ.get("INLET_ACC_RUN", ".")


def _go_test(tmp_path: Path, env: dict[str, str], run: str) -> str:
    done = subprocess.run(
        [GO, "test", "-count=1", "-v", "-timeout=20m", "-run", run, "./..."], cwd=GO_PROVIDER,
        env={**os.environ, **env}, capture_output=True, text=True, timeout=1500, check=False)
    output = done.stdout + done.stderr
    (tmp_path / "go-test.log").write_text(output)
    assert done.returncode == 0, output[-20000:]
    return output


@pytest.mark.parametrize(("cli", "write_only"), [("1.10.10", False), ("1.12.6", True)], ids=["tofu-1.10", "tofu-1.12"])
def test_the_provider_passes_its_acceptance_tests(
    cli: str, write_only: bool, tmp_path: Path, inlet_url: str, tenant: Tenant, client: TestClient,
    vault: TestVault, sandbox_kafka: SandboxKafka, kafka_topic: Callable[..., str],
    produce_keyed: Callable[..., dict[int, list[int]]],
) -> None:
    topic = kafka_topic(partitions=2)
    produce_keyed(sandbox_kafka.bootstrap_servers, topic, 20)
    cli_config = tmp_path / "tofurc"
    cli_config.write_text("")  # this machine's own CLI configuration takes no part
    env = {
        "TF_ACC": "1", "TF_ACC_TERRAFORM_PATH": str(opentofu(cli)), "TF_ACC_PROVIDER_HOST": "registry.opentofu.org",
        "TF_CLI_CONFIG_FILE": str(cli_config), "CHECKPOINT_DISABLE": "1", "TF_IN_AUTOMATION": "1",
        "INLET_ENDPOINT": inlet_url, "INLET_API_KEY": tenant.keys["admin"],
        "INLET_ACC_BOOTSTRAP": sandbox_kafka.bootstrap_servers, "INLET_ACC_TOPIC": topic,
        "INLET_ACC_CLI_WRITE_ONLY": "1" if write_only else "",
    }
    output = _go_test(tmp_path, env, RUN)
    passed = re.findall(r"^--- PASS: (\S+)", output, re.MULTILINE)
    skipped = re.findall(r"^--- SKIP: (\S+)", output, re.MULTILINE)
    assert passed, output[-5000:]
    assert not skipped, f"acceptance tests skipped: {skipped}"

    # what the tests made, their destroys removed: no rows for the tenant, no secret in OpenBao
    for collection in ("pipelines", "connections", "webhooks"):
        assert client.get(f"/{collection}", headers=tenant.admin).json()["items"] == [], collection
    keys = client.get("/api-keys", headers=tenant.admin, params={"limit": 100}).json()["items"]
    assert all(k["revoked_at"] is not None for k in keys if k["name"].startswith("acc-")), keys
    assert [p for p in vault.paths() if p.startswith(f"tenants/{tenant.id}/")] == []
