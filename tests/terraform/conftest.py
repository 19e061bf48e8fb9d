"""Terraform tests: Inlet served over HTTP with its secrets in a real OpenBao server, a tenant with
an admin key, and the real OpenTofu CLI with the provider from its mirror (tests/fixtures/terraform.py)."""

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
from tests.fixtures.dispatch import RecordingDispatcher
from tests.fixtures.terraform import Terraform
from tests.fixtures.vault import TestVault, vault_backed
from tests.portal.helpers import serve


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
