"""Terraform tests: Inlet served over HTTP with its secrets in a real OpenBao server, a tenant with
an admin key, and the real terraform binary (tests/terraform/harness.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.core.config import Settings
from api.main import create_app
from tests.factories import Tenant, make_tenant
from tests.fixtures.database import truncate_all
from tests.fixtures.vault import TestVault, vault_backed
from tests.portal.helpers import RecordingDispatcher, serve
from tests.terraform.harness import Terraform


@pytest.fixture
def app(settings: Settings, vault: TestVault) -> Iterator[Any]:
    application = create_app(vault_backed(settings, vault), dispatcher=RecordingDispatcher())
    yield application
    truncate_all(application.state.engine)
    application.state.engine.dispose()


@pytest.fixture
def tenant(client: TestClient) -> Tenant:
    return make_tenant(client)


@pytest.fixture
def inlet_url(app: Any, client: TestClient) -> Iterator[str]:
    with serve(app) as base_url:
        yield base_url


@pytest.fixture
def terraform(tmp_path: Path, inlet_url: str, tenant: Tenant, record_property: Any) -> Iterator[Terraform]:
    tf = Terraform.prepare(tmp_path, endpoint=inlet_url, api_key=tenant.keys["admin"])
    yield tf
    record_property("terraform_seconds", tf.seconds_per_command())


def pytest_terminal_summary(terminalreporter: Any) -> None:
    spent: dict[str, list[float]] = {}
    for report in (r for reports in terminalreporter.stats.values() for r in reports):
        for name, value in getattr(report, "user_properties", ()):
            if name == "terraform_seconds" and getattr(report, "when", None) == "teardown":
                for command, seconds in value.items():
                    spent.setdefault(command, []).append(seconds)
    if spent:
        per = ", ".join(f"{c} {sum(s) / len(s):.2f}" for c, s in sorted(spent.items()))
        terminalreporter.write_line(f"terraform: seconds per command on this machine: {per}")
