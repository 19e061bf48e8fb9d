"""No secret outlives its connection: the orphan sweep (api/connections/orphans.py), the scheduler and
``inlet secrets sweep`` that run it, and the race it exists for, reproduced on a real OpenBao server:
Vault frozen (SIGSTOP) through a create, so the compensating destroy can reach it before the
delayed write."""

from __future__ import annotations

import logging
import random
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from sqlmodel import Session

from api.connections.orphans import sweep_orphaned_secrets
from api.core.config import Settings
from api.models import metadata
from api.secrets.backends import build_secret_store
from tests.factories import PASSWORD, connection_body, create_connection
from tests.fixtures.vault import vault_backed, vault_env
from worker.scheduler import run_forever

REPO_ROOT = Path(__file__).resolve().parents[2]
CREDS = {"credentials": {"username": "ingest", "password": PASSWORD}}


@pytest.fixture(params=["local", "vault"])
def backend_settings(request: pytest.FixtureRequest, settings: Settings, tmp_path: Path) -> Settings:
    """The sweep is the store's business, whichever store: the local one and a real Vault."""
    if request.param == "local":
        return settings
    request.node.add_marker(pytest.mark.vault)  # counted in the summary's OpenBao line
    return vault_backed(settings, request.getfixturevalue("vault"))


def _orphan(store: Any, tenant_id: str | uuid.UUID) -> str:
    path = f"tenants/{tenant_id}/connections/{uuid.uuid4()}"
    store.write(path, CREDS)
    return path


def test_the_sweep_destroys_only_secrets_no_connection_refers_to(client, app, backend_settings, tenant, caplog) -> None:
    caplog.set_level(logging.INFO)
    store = app.state.secrets = build_secret_store(backend_settings)
    kept = create_connection(client, tenant)  # its secret is referenced by its row
    orphan = _orphan(store, tenant.id)
    foreign = _orphan(store, uuid.uuid4())  # another deployment's tenant, or this is the wrong database
    with Session(app.state.engine) as session:
        dry = sweep_orphaned_secrets(session=session, secrets=store, grace_s=0, dry_run=True)
        young = sweep_orphaned_secrets(session=session, secrets=store, grace_s=300)
        assert (dry.checked, dry.destroyed, young.destroyed, young.too_young) == (3, [orphan], [], [orphan])
        assert store.describe(orphan) is not None  # neither destroyed it
        swept = sweep_orphaned_secrets(session=session, secrets=store, grace_s=0)
    assert (swept.checked, swept.destroyed, swept.too_young, swept.foreign) == (3, [orphan], [], [foreign])
    assert store.describe(orphan) is None
    assert store.list_paths("tenants") == sorted([f"tenants/{tenant.id}/connections/{kept['id']}", foreign])
    assert f"orphaned secret at {orphan} destroyed: no connection refers to it" in caplog.text
    assert f"left 1 secret(s) alone under tenants this database does not know, e.g. {foreign}" in caplog.text
    assert PASSWORD not in caplog.text


def test_the_scheduler_sweeps_at_start_up(client, app, settings, tenant, vault) -> None:
    vault_settings = vault_backed(settings, vault, secret_orphan_grace_s=0)
    store = app.state.secrets = build_secret_store(vault_settings)
    kept = create_connection(client, tenant)
    orphan = _orphan(store, tenant.id)
    stop = threading.Event()

    class NoDispatch:
        def send_run(self, run_id: uuid.UUID) -> bool:
            return True

        def send_schedules(self, slots: Any) -> int:
            return 0

    scheduler = threading.Thread(target=run_forever, args=(app.state.engine, NoDispatch(), vault_settings, stop, store))
    scheduler.start()
    try:
        deadline = time.monotonic() + 10
        while store.describe(orphan) is not None and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        stop.set()
        scheduler.join(timeout=10)
    assert vault.paths() == [f"tenants/{tenant.id}/connections/{kept['id']}"]  # the live one stays


def test_inlet_secrets_sweep_lists_then_destroys(settings, tenant, vault, database_url) -> None:
    orphan = _orphan(build_secret_store(vault_backed(settings, vault)), tenant.id)
    env = vault_env(vault, INLET_DATABASE_URL=database_url, INLET_DATA_DIR=str(settings.data_dir), PATH="/usr/bin:/bin")

    def sweep(*args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "cli.main", "secrets", "sweep", *args], cwd=REPO_ROOT, env=env,
                              check=False, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert sweep("--dry-run", "--grace-s", "0") == f"would destroy {orphan}\n1 secret(s) checked, 1 orphan(s) would destroy\n"
    assert vault.paths() == [orphan]
    assert sweep() == (f"kept {orphan}: changed within the last 300s (a create may be in flight)\n"
                       "1 secret(s) checked, 0 orphan(s) destroyed\n")
    assert sweep("--grace-s", "0") == f"destroyed {orphan}\n1 secret(s) checked, 1 orphan(s) destroyed\n"
    assert vault.paths() == []


@pytest.mark.slow
def test_a_create_while_vault_stalls_leaves_no_secret_behind(settings, tenant, vault, caplog) -> None:
    """Vault frozen for longer than the timeout during POST /connections, then resumed at a varying
    moment: every try answers 503 with no row, and after the sweep no secret is left, whichever of
    the delayed write and the compensating destroy reached Vault first."""
    from fastapi.testclient import TestClient

    from api.main import create_app

    caplog.set_level(logging.INFO)
    stalling = vault_backed(settings, vault, vault_timeout_s=0.5, secret_orphan_grace_s=0)
    app = create_app(stalling)
    store = app.state.secrets
    rng = random.Random(20261123)
    left_by_the_race = 0
    tries = 24
    try:
        with TestClient(app, raise_server_exceptions=False) as client:
            for attempt in range(tries):
                vault.server.freeze()
                # Thawed after the write timed out: 0.5 s from when the request reaches Vault, which on
                # a loaded machine can be a few tens of milliseconds after the POST starts (at 0.55 s a
                # write once landed in time and answered 201), hence the 0.25 s margin.
                thaw = threading.Timer(rng.uniform(0.75, 1.5), vault.server.thaw)
                thaw.start()
                response = client.post("/connections", json=connection_body(name=f"stalled-{attempt}"),
                                       headers=tenant.editor)
                thaw.join()
                assert response.status_code == 503, response.text
                assert response.json()["detail"] == f"Vault at {vault.addr} did not answer within 0.5s; retry later"
                assert PASSWORD not in response.text
                time.sleep(0.3)  # a write Vault took in while frozen lands now, if it is going to
                with Session(app.state.engine) as session:
                    left_by_the_race += len(sweep_orphaned_secrets(session=session, secrets=store, grace_s=0).destroyed)
                assert vault.paths() == [], f"try {attempt}: an orphaned secret survived the sweep"
            assert client.get("/connections", headers=tenant.viewer).json()["total"] == 0
        time.sleep(0.5)
        assert vault.paths() == []
        with Session(app.state.engine) as session:
            for table in metadata.sorted_tables:
                assert PASSWORD not in str(session.execute(select(table)).all()), table.name
    finally:
        vault.server.thaw()
        app.state.engine.dispose()
    assert PASSWORD not in caplog.text
    # Every secret that outlived its request was named by path, with what became of it.
    assert caplog.text.count("orphaned secret at tenants/") == left_by_the_race
    print(f"\n{tries} stalled creates: {left_by_the_race} secret(s) outlived their request, 0 survived the sweep")


def test_a_tenants_field_key_is_made_once_and_kept_by_the_sweep(app, backend_settings, tenant) -> None:
    """Two runs needing the tenant's field key at once get the same key; the sweep keeps it, an owner's."""
    from api.secrets.store import field_key_path
    from api.tenancy.field_keys import field_key

    store = app.state.secrets = build_secret_store(backend_settings)
    tenant_id = uuid.UUID(tenant.id)
    keys: list[str] = []

    def needs_it() -> None:
        with Session(app.state.engine) as session:
            keys.append(field_key(session, tenant_id, store))
            session.commit()

    runs = [threading.Thread(target=needs_it) for _ in range(2)]
    for run in runs:
        run.start()
    for run in runs:
        run.join()
    with Session(app.state.engine) as session:
        again = field_key(session, tenant_id, store)
        swept = sweep_orphaned_secrets(session=session, secrets=store, grace_s=0)
    assert len(keys) == 2 and keys[0] == keys[1] == again
    assert swept.destroyed == [] and store.describe(field_key_path(tenant_id)) is not None
