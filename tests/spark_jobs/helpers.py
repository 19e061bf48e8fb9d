"""Shared helpers of the spark_jobs tests: spec building, launching, reading a Delta table back, and
where a job runs (``Placement``: local[2] with a folder, or the standalone cluster with S3)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable

from spark_jobs.spec import RunResult, RunSpec
from spark_jobs.storage import Store
from worker.launcher import SparkSubmitSettings, launch

# Two local cores as on CI; small driver memory keeps the suite's footprint down.
SETTINGS = SparkSubmitSettings(master="local[2]")
RUN_TIMEOUT_S = 240


def make_spec(
    bootstrap: str,
    ranges: dict[str, dict[str, tuple[int, int]]],
    target: dict[str, Any],
    *,
    version: int = 1,
    pipeline_id: str | None = None,
    **source: Any,
) -> RunSpec:
    pipeline_id = pipeline_id or uuid.uuid4().hex[:8]
    return RunSpec.model_validate(
        {
            "run_id": f"run-{uuid.uuid4().hex[:8]}",
            "pipeline_id": pipeline_id,
            "txn": {"app_id": f"inlet-pipeline-{pipeline_id}", "version": version},
            "source": {"kafka_config": {"bootstrap.servers": bootstrap}, "ranges": ranges, **source},
            "target": target,
        }
    )


@dataclass(frozen=True)
class Placement:
    """Where a job runs and its tables live."""

    settings: SparkSubmitSettings
    root: str
    store: Store = Store()

    def target(self, name: str, **options: Any) -> dict[str, Any]:
        """A Delta target named ``name`` under the root, reached with the placement's store."""
        return {"type": "delta", "uri": f"{self.root}/{name}", "storage_options": dict(self.store.options), **options}

    def table(self, uri: str) -> DeltaTable:
        return self.store.delta_table(uri)

    def read(self, uri: str) -> pa.Table:
        return self.table(uri).to_pyarrow_table()


def run_job(spec: RunSpec, workdir: Path, log: list[str] | None = None, settings: SparkSubmitSettings = SETTINGS) -> RunResult:
    lines = log if log is not None else []
    result = launch(spec, workdir=workdir, settings=settings, timeout_s=RUN_TIMEOUT_S, on_log_line=lines.append)
    if result.error and result.error.kind in ("crashed", "internal"):
        print("\n".join(lines[-60:]))  # shown by pytest on failure
    return result


def read_table(uri: str) -> pa.Table:
    return DeltaTable(uri).to_pyarrow_table()


def coordinates(table: pa.Table) -> list[tuple[int, int]]:
    return sorted(zip(table["partition"].to_pylist(), table["offset"].to_pylist()))
