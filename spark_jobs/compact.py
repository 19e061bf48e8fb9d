"""The spark-submit entry point of a compaction on the Spark cluster: one table, from a
``CompactionJob`` file to a ``CompactionResult`` file (``maintenance.offload``).

    spark-submit spark_jobs/compact.py --job /path/job.json --result /path/result.json

``maintenance.compact_table``'s own plan and commit run on this driver; each bin is rewritten by a
Spark task (``compaction.BinWriter``, as the maintenance worker would rewrite it), so bins are
rewritten side by side on as many cores as the cluster has, each in its executor's memory. The
store's options reach the executors pickled with each task's ``BinWriter``, as a run's reach its tasks.

A job with ``delta_spark`` steps is a table's maintenance by delta-spark instead (OPTIMIZE, VACUUM,
a checkpoint: ``spark_maintenance``), on a SQL session with delta-spark (the jars are every
spark-submit's), its ``SparkMaintenance`` the result.

Exit status 0 when the result was written, whatever its outcome (``done``, ``nothing``, ``conflict``
or ``failed``); otherwise (the job file unreadable, Spark not started) the job dies with a traceback
and no result, and the worker settles it from the table.
"""

from __future__ import annotations

import argparse
import logging
import sys

from pyspark import SparkContext

from spark_jobs.job import OneShot, configure_logging, write_result_file
from spark_jobs.maintenance import Rewrite, compact_table
from spark_jobs.maintenance.compaction import BinWriter, CompactionPlan, Rewritten
from spark_jobs.maintenance.offload import CompactionJob, result_to_json
from spark_jobs.spark_maintenance import maintain_on_spark

log = logging.getLogger("inlet.maintenance")


def rewrite_on(context: SparkContext) -> Rewrite:
    """``compaction.rewrite`` as one Spark job: a task per bin. A job that fails deletes its files: each
    task its own when it fails, and the driver those of tasks that finished, found by their names.
    (Those of a task still running then, or of a retried task's first attempt, the worker deletes
    once the job has ended: ``CompactionJob.settle``.)"""

    def rewrite(writer: BinWriter, plan: CompactionPlan) -> list[Rewritten]:
        context.setJobDescription(f"inlet compaction of {len(plan.bins)} bins, {plan.bytes} bytes")
        try:
            return context.parallelize(plan.bins, len(plan.bins)).flatMap(writer).collect()
        except BaseException:
            writer.store.delete_files_named(writer.uri, writer.prefix)
            raise

    return rewrite


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--job", required=True)
    parser.add_argument("--result", required=True)
    args = parser.parse_args(argv)
    configure_logging()
    with open(args.job, "rb") as f:
        job = CompactionJob.from_json(f.read())
    if job.delta_spark is not None:  # the table's maintenance by delta-spark's SQL
        with OneShot().session("inlet-maintenance") as spark:
            done = maintain_on_spark(spark, job.store.delta_table(job.uri), job.uri, job.policy, job.delta_spark,
                                     job.token)
            write_result_file(args.result, result_to_json(done))
            log.info("delta-spark's maintenance of %s: %s", job.uri, done)
        return 0
    with OneShot().context("inlet-compaction") as context:  # tasks of plain Python functions: no SQL session
        result = compact_table(job.store, job.uri, job.policy, job.notes, rewrite=rewrite_on(context), token=job.token)
        write_result_file(args.result, result_to_json(result))  # before Spark stops: a hung stop loses nothing
        log.info("compaction of %s: %s", job.uri, result.outcome)
    return 0


if __name__ == "__main__":
    sys.exit(main())
