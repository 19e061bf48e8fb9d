"""The ``inlet`` command: one entry point for every process Inlet runs."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def _api(args: argparse.Namespace) -> int:
    import uvicorn

    from api.core.config import get_settings
    from api.core.migrate import upgrade_to_head
    from api.main import create_app

    settings = get_settings()
    if not args.no_migrate:
        upgrade_to_head(settings.resolved_database_url)
    uvicorn.run(create_app(settings), host=args.host, port=args.port, log_level=args.log_level,
                workers=None, access_log=False)
    return 0


def _migrate(args: argparse.Namespace) -> int:
    from api.core.config import get_settings
    from api.core.migrate import upgrade_to_head

    upgrade_to_head(get_settings().resolved_database_url)
    print("database schema is at head")
    return 0


def _openapi(args: argparse.Namespace) -> int:
    from api.openapi import render_openapi

    text = render_openapi()
    if args.write:
        args.write.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


def _worker(args: argparse.Namespace) -> int:
    from worker.celery_app import app

    app.worker_main(["worker", f"--loglevel={args.log_level}", f"--concurrency={args.concurrency}",
                     "--queues=inlet", f"--hostname=inlet-worker-{os.getpid()}@%h", "--without-gossip",
                     "--without-mingle"])
    return 0


def _webhook_worker(args: argparse.Namespace) -> int:
    from api.core.dispatch import WEBHOOK_QUEUE
    from worker.celery_app import app

    # Threads: an attempt mostly waits on a receiver, and one that never answers holds only its thread.
    app.worker_main(["worker", f"--loglevel={args.log_level}", f"--concurrency={args.concurrency}", "--pool=threads",
                     f"--queues={WEBHOOK_QUEUE}", f"--hostname=inlet-webhooks-{os.getpid()}@%h", "--without-gossip",
                     "--without-mingle"])
    return 0


def _maintenance_worker(args: argparse.Namespace) -> int:
    from api.core.dispatch import MAINTENANCE_QUEUE
    from worker.celery_app import app

    # Threads: a task mostly waits on storage; each table is held by one task at a time (its lease).
    app.worker_main(["worker", f"--loglevel={args.log_level}", f"--concurrency={args.concurrency}", "--pool=threads",
                     f"--queues={MAINTENANCE_QUEUE}", f"--hostname=inlet-maintenance-{os.getpid()}@%h",
                     "--without-gossip", "--without-mingle"])
    return 0


def _scheduler(args: argparse.Namespace) -> int:
    import logging
    import signal
    import threading

    from api.core.config import get_settings
    from api.core.db import make_engine
    from api.core.dispatch import CeleryDispatcher
    from api.secrets.backends import build_secret_store
    from worker.scheduler import run_forever

    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = get_settings()
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    run_forever(make_engine(settings.resolved_database_url), CeleryDispatcher(settings.redis_url), settings, stop,
                build_secret_store(settings))
    return 0


def _secrets_sweep(args: argparse.Namespace) -> int:
    from api.connections.orphans import sweep_orphaned_secrets
    from api.core.config import get_settings
    from api.core.db import make_engine, unit_of_work
    from api.secrets.backends import build_secret_store

    settings = get_settings()
    grace_s = settings.secret_orphan_grace_s if args.grace_s is None else args.grace_s
    with unit_of_work(make_engine(settings.resolved_database_url)) as session:
        report = sweep_orphaned_secrets(session=session, secrets=build_secret_store(settings), grace_s=grace_s,
                                        dry_run=args.dry_run)
    verb = "would destroy" if args.dry_run else "destroyed"
    for path in report.destroyed:
        print(f"{verb} {path}")
    for path in report.too_young:
        print(f"kept {path}: changed within the last {grace_s:g}s (a create may be in flight)")
    print(f"{report.checked} secret(s) checked, {len(report.destroyed)} orphan(s) {verb}")
    return 0


def _sandbox_kafka(args: argparse.Namespace) -> int:
    from sandbox.cli import main as sandbox_main

    return sandbox_main(args.rest)


def _demo(args: argparse.Namespace) -> int:
    from cli.demo import main as demo_main

    return demo_main(args.rest)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="inlet", description="Inlet, the Kafka ingestion control plane")
    sub = parser.add_subparsers(dest="command", required=True)

    api = sub.add_parser("api", help="serve the REST API with uvicorn")
    api.add_argument("--host", default="127.0.0.1")
    api.add_argument("--port", type=int, default=8000)
    api.add_argument("--log-level", default="info")
    api.add_argument("--no-migrate", action="store_true", help="do not bring the schema to head first")
    api.set_defaults(func=_api)

    worker = sub.add_parser("worker", help="run a Celery worker that executes runs")
    worker.add_argument("--concurrency", type=int, default=1, help="runs at once (each worker process keeps its own warm engine)")
    worker.add_argument("--log-level", default="INFO")
    worker.set_defaults(func=_worker)

    webhook_worker = sub.add_parser("webhook-worker",
                                    help="run a Celery worker that delivers webhooks (from their own queue)")
    webhook_worker.add_argument("--concurrency", type=int, default=8, help="deliveries at once (threads)")
    webhook_worker.add_argument("--log-level", default="INFO")
    webhook_worker.set_defaults(func=_webhook_worker)

    maintenance_worker = sub.add_parser("maintenance-worker", help="run a Celery worker that maintains Delta "
                                        "tables: compaction, vacuum, checkpoints (from their own queue)")
    maintenance_worker.add_argument("--concurrency", type=int, default=2, help="tables at once (threads)")
    maintenance_worker.add_argument("--log-level", default="INFO")
    maintenance_worker.set_defaults(func=_maintenance_worker)

    scheduler = sub.add_parser("scheduler", help="fire scheduled pipelines, resend lost runs and deliveries, "
                                                 "evaluate lag alerts")
    scheduler.add_argument("--log-level", default="INFO")
    scheduler.set_defaults(func=_scheduler)

    secrets = sub.add_parser("secrets", help="the secret store behind connections and webhooks")
    secrets_sub = secrets.add_subparsers(dest="secrets_command", required=True)
    sweep = secrets_sub.add_parser("sweep", help="destroy secrets that belong to no connection or webhook "
                                                 "(the scheduler does it too)")
    sweep.add_argument("--dry-run", action="store_true", help="only list what would be destroyed")
    sweep.add_argument("--grace-s", type=float, help="keep secrets changed this recently (default: INLET_SECRET_ORPHAN_GRACE_S)")
    sweep.set_defaults(func=_secrets_sweep)

    migrate = sub.add_parser("migrate", help="bring the database schema to head (Alembic)")
    migrate.set_defaults(func=_migrate)

    openapi = sub.add_parser("openapi", help="print the OpenAPI document the app serves, as YAML")
    openapi.add_argument("--write", type=Path, help="write it to this file instead (e.g. openapi.yaml)")
    openapi.set_defaults(func=_openapi)

    sandbox = sub.add_parser("sandbox-kafka", help="run the sandbox Kafka cluster (see sandbox/)", add_help=False)
    sandbox.add_argument("rest", nargs=argparse.REMAINDER)
    sandbox.set_defaults(func=_sandbox_kafka)

    demo = sub.add_parser("demo", help="run the local stack and walk through Inlet's main job", add_help=False)
    demo.add_argument("rest", nargs=argparse.REMAINDER)
    demo.set_defaults(func=_demo)
    return parser


# Commands with their own argument parsers get the rest of the command line untouched
# (argparse's REMAINDER would refuse a leading --option).
_PASS_THROUGH = {"sandbox-kafka": _sandbox_kafka, "demo": _demo}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in _PASS_THROUGH:
        return _PASS_THROUGH[argv[0]](argparse.Namespace(rest=argv[1:]))
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
