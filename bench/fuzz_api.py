"""Contract fuzzing, larger than the suite's: every operation of ``openapi.yaml`` by each kind of
caller (admin, editor, viewer, operator, none) on the app under uvicorn, with the harness of
``tests/fuzz``. Prints operations, cases, status counts, distinct failures and time.

    .venv/bin/python bench/fuzz_api.py [--examples 50] [--seed 1] [--database-url postgresql+psycopg://…]
        [--redis-url redis://127.0.0.1:6379/0]

Without --database-url a SQLite file in a temporary folder; without --redis-url a private
redis-server is started (so /readyz can answer 200) and stopped.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from api.core.config import Settings
from api.core.migrate import upgrade_to_head
from api.main import create_app
from cli.local_stack import LocalStack, wait_until
from tests.fuzz import harness

OPERATOR_TOKEN = "bench-operator-token-0123456789abcdef"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=50, help="cases per operation and caller")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--database-url")
    parser.add_argument("--redis-url")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="inlet-fuzz-"))
    stack = LocalStack(tmp / "stack")
    try:
        redis_url = args.redis_url or stack.start_redis()
        url = args.database_url or f"sqlite:///{tmp}/fuzz.db"
        upgrade_to_head(url)
        settings = Settings(database_url=url, data_dir=tmp / "data", storage_root=str(tmp / "storage"),
                            admin_token=OPERATOR_TOKEN, redis_url=redis_url, kafka_timeout_s=0.5,
                            auth_failures_per_minute=1_000_000)  # it sends bad keys by design
        app = create_app(settings, dispatcher=harness.NullDispatcher())
        operations = harness.operations(harness.load_schema())
        result = harness.FuzzResult()
        started = time.perf_counter()
        with harness.serve(app) as base_url:
            wait_until(lambda: _ready(base_url), 15, "Redis and the API", every_s=0.2)
            for operation in operations:
                for auth in harness.AUTHS:
                    world = harness.seed_world(base_url, OPERATOR_TOKEN)  # fresh objects: deletes starve nothing
                    harness.fuzz_operation(operation, auth, world, base_url, max_examples=args.examples,
                                           seed=args.seed, result=result)
        elapsed = time.perf_counter() - started
        app.state.engine.dispose()
    finally:
        stack.stop()

    failures = result.distinct()
    print(f"database        {url.split(':', 1)[0]}")
    print(f"operations      {len(operations)} x callers {len(harness.AUTHS)} = {len(operations) * len(harness.AUTHS)}")
    print(f"cases           {result.cases} (max {args.examples} per operation and caller, seed {args.seed})")
    print(f"statuses        {dict(sorted(result.statuses.items()))}")
    print(f"failures        {len(result.failures)} ({len(failures)} distinct)")
    print(f"time            {elapsed:.1f}s ({result.cases / elapsed:.0f} cases/s)")
    if failures:
        print(harness.report(failures, limit=50))
    return 1 if failures else 0


def _ready(base_url: str) -> bool:
    import httpx

    try:
        return httpx.get(f"{base_url}/readyz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


if __name__ == "__main__":
    raise SystemExit(main())
