"""Every operation of ``openapi.yaml`` fuzzed on the running app (uvicorn on loopback, the suite's
real database) by each kind of caller: a tenant's admin, editor and viewer keys, the operator token,
and no credentials. Half the cases name the tenant's real connection, pipeline, run and key.

Each response must be: no 5xx beyond the upstream errors an operation documents, every error an
RFC 9457 problem (type, title, status, detail), and every documented response true to its schema
and content type. Fixed seed, bounded examples: a few minutes at most on two workers.
``bench/fuzz_api.py`` runs the same harness larger and prints figures.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from api.core.config import Settings
from api.main import create_app
from tests.factories import ADMIN_TOKEN
from tests.fixtures.database import truncate_all
from tests.fuzz import harness

SEED = 20260922
OPERATIONS = harness.operations(harness.load_schema())
CASES = [pytest.param(op, auth, id=f"{op.label}-{auth}") for op in OPERATIONS for auth in harness.AUTHS]
# Callers the operation refuses answer from the first dependency: fewer examples say all there is.
EXAMPLES_ALLOWED, EXAMPLES_REFUSED = 8, 3


def _may_call(operation: Any, auth: str) -> bool:
    path = operation.path
    if path in ("/healthz", "/readyz"):
        return True
    if path.startswith("/tenants") or path == "/metrics":
        return auth == "operator"
    return auth in ("admin", "editor", "viewer")


@pytest.fixture(scope="module")
def live(database_url: str, redis_server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("fuzz")
    settings = Settings(database_url=database_url, data_dir=tmp / "data", storage_root=str(tmp / "storage"),
                        admin_token=ADMIN_TOKEN, redis_url=f"{redis_server}/0", kafka_timeout_s=0.5,
                        auth_failures_per_minute=1_000_000)  # bad keys by design; the throttle's own test: hostile/
    app = create_app(settings, dispatcher=harness.NullDispatcher())
    try:
        with harness.serve(app) as base_url:
            yield base_url
    finally:
        truncate_all(app.state.engine)
        app.state.engine.dispose()


@pytest.fixture(scope="module")
def shared_world(live: str) -> harness.World:
    return harness.seed_world(live, ADMIN_TOKEN)


@pytest.mark.parametrize(("operation", "auth"), CASES)
def test_operation_keeps_its_contract(operation: Any, auth: str, live: str, shared_world: harness.World) -> None:
    allowed = _may_call(operation, auth)
    # A caller that may change things gets objects of its own, so deletes cannot starve later tests.
    world = harness.seed_world(live, ADMIN_TOKEN) if allowed and operation.method.upper() != "GET" else shared_world
    result = harness.fuzz_operation(operation, auth, world, live, seed=SEED,
                                    max_examples=EXAMPLES_ALLOWED if allowed else EXAMPLES_REFUSED)
    assert result.cases > 0
    failures = result.distinct()
    assert not failures, f"{len(failures)} distinct contract failure(s):\n{harness.report(failures)}"


def test_every_operation_is_fuzzed_with_every_caller() -> None:
    assert len(OPERATIONS) >= 39 and len(CASES) == len(OPERATIONS) * len(harness.AUTHS)
