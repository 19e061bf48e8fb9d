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

from spark_jobs.public import (
    CompactionJob,
    CompactionResult,
    MaintenanceSteps,
    SparkMaintenance,
    Store,
    TablePolicy,
    read_compaction_result,
    read_spark_maintenance,
    redact,
)
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
        raw, reason = self._submit(job)
        result = None
        if raw is not None:
            try:
                result = read_compaction_result(raw)
            except (ValueError, TypeError):
                pass
        settled = job.settle(result, reason)
        return replace(settled, error=redact(settled.error, job.secret_values()) if settled.error else None)

    def delta_spark(self, store: Store, uri: str, policy: TablePolicy, steps: MaintenanceSteps,
                    notes: dict[str, str]) -> SparkMaintenance:
        """``spark_jobs.maintenance.SparkMaintainer``: the table's maintenance by delta-spark in the job.
        A job that ended without its result is settled as a compaction (its OPTIMIZE's commit found by
        the job's token, or failed), its other steps left to the next task."""
        job = CompactionJob(uri, store, policy, dict(notes), since=store.delta_table(uri).version(), delta_spark=steps)
        raw, reason = self._submit(job)
        try:
            done = read_spark_maintenance(raw) if raw is not None else None
        except (ValueError, TypeError, KeyError):
            done = None
        if done is None:
            done = SparkMaintenance(compaction=job.settle(None, reason) if steps.compact else None)
        secrets = job.secret_values()

        def redacted(error: str | None) -> str | None:
            return redact(error, secrets) if error else None

        return SparkMaintenance(
            properties_set=done.properties_set, properties_error=redacted(done.properties_error),
            compaction=replace(done.compaction, error=redacted(done.compaction.error)) if done.compaction else None,
            vacuum=replace(done.vacuum, error=redacted(done.vacuum.error)) if done.vacuum else None,
            checkpoint=replace(done.checkpoint, error=redacted(done.checkpoint.error)) if done.checkpoint else None)

    def _submit(self, job: CompactionJob) -> tuple[bytes | None, str]:
        """``job`` run by a spark-submit of its own, to its end: the result file's bytes (None if it
        wrote none), and why there is none."""
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
            raw = None
            if stopped_by is None:
                try:
                    raw = result_path.read_bytes()
                except OSError:
                    pass
            reason = (f"the compaction job ran longer than {self.timeout_s:.0f}s and was killed" if stopped_by
                      else f"the compaction job exited {process.returncode} without a result: {output.last_lines()}")
            return raw, reason
        finally:
            shutil.rmtree(folder, ignore_errors=True)


def sweep_compaction_folders() -> None:
    """Remove the folders (a job file, the store's credentials in it) of compaction jobs whose worker
    process is gone: one killed during a job had no chance to."""
    sweep_folders(FOLDER_PREFIX)
