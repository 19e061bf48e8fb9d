"""A compaction on the Spark cluster: a spark-submit of ``spark_jobs/compact.py`` for one table, with
the worker's Spark settings (its master, conf, memory and Python), for compactions of
``INLET_SPARK_COMPACT_MIN_MB`` or more (``spark_jobs.maintenance.Offload``).

The job, the store's credentials with it, reaches the job only through a 0600 file in a private
folder that goes when the job ends (or, after a worker was killed, at the next job); its output is
read and redacted of every credential, and logged. Once the job has ended it is settled from the
table (``CompactionJob.settle``): the files named for it that its commit did not add are deleted,
and a job that ended without its result (killed at ``INLET_SPARK_COMPACT_TIMEOUT_S``, crashed) is
``done`` if its commit landed, else ``failed``.
"""

from __future__ import annotations

import logging
import shutil
import time
from dataclasses import dataclass, replace

from spark_jobs.public import CompactionJob, CompactionResult, Store, TablePolicy, read_compaction_result, redact
from worker.launch.processes import (
    Output,
    private_folder,
    start_process,
    sweep_folders,
    terminate_group,
    write_private,
)
from worker.launch.submit import SparkSubmitSettings, job_env, package_spark_jobs, spark_command, wait_for_exit

log = logging.getLogger(__name__)

SCRIPT = "compact.py"
FOLDER_PREFIX = "inlet-compaction-"


@dataclass(frozen=True)
class SparkCompaction:
    """``spark_jobs.maintenance.Compactor`` by a spark-submit of its own."""

    settings: SparkSubmitSettings
    timeout_s: float

    def __call__(self, store: Store, uri: str, policy: TablePolicy, notes: dict[str, str]) -> CompactionResult:
        job = CompactionJob(uri, store, policy, dict(notes), since=store.delta_table(uri).version())
        sweep_compaction_folders()
        folder = private_folder(FOLDER_PREFIX)
        job_path, result_path = folder / "job.json", folder / "result.json"
        try:
            write_private(job_path, job.to_json())
            try:
                cmd = spark_command(self.settings, "inlet-compaction", package_spark_jobs(folder), SCRIPT,
                                    "--job", str(job_path), "--result", str(result_path))
                process = start_process(cmd, env=job_env(self.settings, folder), cwd=folder)
                output = Output(process, name=f"spark-log-compaction-{job.token}", secrets=job.secret_values(),
                                listener=lambda line: log.info("compaction %s: %s", job.token, line))
                try:
                    stopped_by = wait_for_exit(process, deadline=time.monotonic() + self.timeout_s, cancel=None)
                except BaseException:  # this thread is stopped: so is the job, before it commits unwatched
                    terminate_group(process)
                    raise
                output.join(5)
            finally:
                job_path.unlink(missing_ok=True)
            result = None
            if stopped_by is None:
                try:
                    result = read_compaction_result(result_path.read_bytes())
                except (OSError, ValueError, TypeError):
                    pass
            reason = (f"the compaction job ran longer than {self.timeout_s:.0f}s and was killed" if stopped_by
                      else f"the compaction job exited {process.returncode} without a result: {output.last_lines()}")
            settled = job.settle(result, reason)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        return replace(settled, error=redact(settled.error, job.secret_values()) if settled.error else None)


def sweep_compaction_folders() -> None:
    """Remove the folders (a job file, the store's credentials in it) of compaction jobs whose worker
    process is gone: one killed during a job had no chance to."""
    sweep_folders(FOLDER_PREFIX)
