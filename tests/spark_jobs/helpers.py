"""Shared helpers of the spark_jobs tests: spec building, launching, reading a Delta table back, and
where a job runs (``Placement``: local[2] with a folder, or the standalone cluster with S3) and how
(``engine``: the warm engine, kept per test process and settings as a worker keeps it, or
spark-submit per run)."""

from __future__ import annotations

import atexit
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
from deltalake import DeltaTable

from spark_jobs.spec import RunResult, RunSpec
from spark_jobs.storage import Store
from worker.launch import Launcher, SparkSubmitSettings, SubmitLauncher, WarmLauncher

# Two local cores as on CI; small driver memory keeps the suite's footprint down.
SETTINGS = SparkSubmitSettings(master="local[2]")
RUN_TIMEOUT_S = 240

EngineMode = Literal["warm", "submit"]
_WARM: dict[str, WarmLauncher] = {}


def launcher(settings: SparkSubmitSettings, engine: EngineMode) -> Launcher:
    """spark-submit per run, or this test process's warm engine for ``settings``."""
    if engine == "submit":
        return SubmitLauncher(settings)
    if repr(settings) not in _WARM:
        _WARM[repr(settings)] = WarmLauncher(settings)
    return _WARM[repr(settings)]


@atexit.register
def _stop_engines() -> None:
    for warm in _WARM.values():
        warm.close()


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
    engine: EngineMode = "warm"

    def target(self, name: str, **options: Any) -> dict[str, Any]:
        """A Delta target named ``name`` under the root, reached with the placement's store."""
        return {"type": "delta", "uri": f"{self.root}/{name}", "storage_options": dict(self.store.options), **options}

    @property
    def on_disk(self) -> bool:
        """Whether the tables are in a local folder (not in an object store)."""
        return "://" not in self.root

    def run(self, spec: RunSpec, workdir: Path, log: list[str] | None = None) -> RunResult:
        return run_job(spec, workdir, log, self.settings, self.engine)

    def table(self, uri: str) -> DeltaTable:
        return self.store.delta_table(uri)

    def read(self, uri: str) -> pa.Table:
        return self.table(uri).to_pyarrow_table()


def run_job(spec: RunSpec, workdir: Path, log: list[str] | None = None, settings: SparkSubmitSettings = SETTINGS,
            engine: EngineMode = "warm") -> RunResult:
    lines = log if log is not None else []
    result = launcher(settings, engine).launch(spec, workdir=workdir, timeout_s=RUN_TIMEOUT_S, on_log_line=lines.append)
    if result.error and result.error.kind in ("crashed", "internal"):
        print("\n".join(lines[-60:]))  # shown by pytest on failure
    return result


def read_table(uri: str) -> pa.Table:
    return DeltaTable(uri).to_pyarrow_table()


def coordinates(table: pa.Table) -> list[tuple[int, int]]:
    return sorted(zip(table["partition"].to_pylist(), table["offset"].to_pylist(), strict=True))


def duckdb_connection(*extensions: str) -> Any:
    """A DuckDB connection with its delta extension (and ``extensions``) loaded from the duckdb_ext
    package's files: no download at test time."""
    import duckdb
    import duckdb_ext

    folder = Path(next(iter(duckdb_ext.__path__))) / "extensions" / f"v{duckdb.__version__}"
    connection = duckdb.connect(config={"allow_unsigned_extensions": "true", "autoinstall_known_extensions": "false",
                                        "autoload_known_extensions": "false"})
    for name in ("delta", *extensions):
        connection.execute(f"LOAD '{next(folder.glob(f'*/{name}.duckdb_extension'))}'")
    return connection
