"""Helpers for run tests: reading the Delta table and the committed offsets, waiting for runs."""

from __future__ import annotations

from typing import Any

from deltalake import DeltaTable
from sqlalchemy import create_engine, text

from api.runs.states import TERMINAL_STATES
from tests.fixtures.stack import Stack

TERMINAL = TERMINAL_STATES


def delta_coordinates(uri: str) -> list[tuple[str, int, int]]:
    """Every (topic, partition, offset) in the table, duplicates kept."""
    table = DeltaTable(uri).to_pyarrow_table(columns=["topic", "partition", "offset"]).to_pydict()
    return sorted(zip(table["topic"], table["partition"], table["offset"], strict=True))


def committed_offsets(database_url: str, pipeline_id: str) -> dict[tuple[str, int], int]:
    engine = create_engine(database_url)
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT topic, \"partition\", committed FROM partition_offsets WHERE "
                                 "pipeline_id = :p"), {"p": pipeline_id.replace("-", "") if "sqlite" in database_url
                                                       else pipeline_id}).all()
    engine.dispose()
    return {(t, p): c for t, p, c in rows}


def wait_for_run(stack: Stack, run_id: str, headers: dict[str, str], *, timeout_s: float = 240) -> dict[str, Any]:
    def finished() -> dict[str, Any] | None:
        body = stack.client.get(f"/runs/{run_id}", headers=headers).json()
        return body if body["state"] in TERMINAL else None

    return stack.wait_for(finished, timeout_s=timeout_s, what=f"run {run_id} to finish")  # type: ignore[return-value]


def run_succeeded(stack: Stack, tenant: Any, pipeline: dict[str, Any]) -> dict[str, Any]:
    """A run of ``pipeline`` triggered by ``tenant``'s editor, waited for, and asserted succeeded."""
    triggered = stack.client.post(f"/pipelines/{pipeline['id']}/runs", headers=tenant.editor)
    assert triggered.status_code == 202, triggered.text
    done = wait_for_run(stack, triggered.json()["id"], tenant.viewer)
    assert done["state"] == "succeeded", (done, stack.log_text())
    return done


def spark_job_pgids(run_id: str) -> set[int]:
    """Process groups running ``run_id``: its spark-submit job (found by its command line) or the warm
    engine running it (whose run thread is named ``run-<id>``, cut to the kernel's 15 bytes)."""
    import os
    from pathlib import Path

    thread_name = f"run-{run_id}"[:15]
    groups = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            running = "spark_jobs/ingest.py" in cmdline and run_id in cmdline
            if not running and "spark_jobs/engine.py" in cmdline:
                running = any((task / "comm").read_text().strip() == thread_name for task in (proc / "task").iterdir())
            if running:
                groups.add(os.getpgid(int(proc.name)))
        except (OSError, ProcessLookupError):
            continue
    return groups


def delta_txn_version(uri: str, pipeline_id: str) -> int | None:
    from api.runs.delta_state import committed_txn_version
    from spark_jobs.storage import Store

    try:
        return committed_txn_version(Store(), uri, pipeline_id)
    except Exception:  # noqa: BLE001 (the table is being created: not committed yet)
        return None


def txn_operations(uri: str, pipeline_id: str, version: int) -> list[str]:
    """The operations (WRITE, MERGE…) of the table's commits that carry the run ``version``'s app
    transaction, oldest first: one, however often the run was tried."""
    from api.runs.delta_state import app_id

    txn = f"{app_id(pipeline_id)}:{version}"
    return [c["operation"] for c in reversed(DeltaTable(uri).history()) if c.get("inlet.txn") == txn]
