"""How the worker runs a spec on Spark, one module per responsibility:

- ``submit``: the spark-submit command a job starts with, and ``SubmitLauncher``, a spark-submit of
  its own for every run (``INLET_RUN_ENGINE=submit``);
- ``warm``: ``WarmLauncher``, run after run on the worker process's warm engine, a resident Spark
  driver (``spark_jobs/engine.py``) started with that same command;
- ``processes``: what both do to a child process: its own process group that dies with the worker,
  private folders and files, its output read and redacted, its memory, its end.

Pure Python, no database: the runner (``worker.runner``) chooses the launcher from the settings and
owns the run's steps around it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from spark_jobs.public import RunResult, RunSpec
from worker.launch.submit import SparkSubmitSettings, SubmitLauncher
from worker.launch.warm import EngineLimits, WarmLauncher

__all__ = ["EngineLimits", "Launcher", "SparkSubmitSettings", "SubmitLauncher", "WarmLauncher"]


class Launcher(Protocol):
    """How the worker runs a spec: ``SubmitLauncher`` (spark-submit per run) or ``WarmLauncher`` (a
    resident driver). Both return a result, never raise."""

    def launch(self, spec: RunSpec, *, workdir: Path, timeout_s: float, on_log_line: Callable[[str], None] | None = None,
               cancel: threading.Event | None = None) -> RunResult: ...

    def close(self) -> None: ...
