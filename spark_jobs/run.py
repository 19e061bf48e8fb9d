"""One run's steps, the same for every target: the target's checks, the source's watermarks, Spark,
the target's write and commit (``spark_jobs.targets``: prepare, write, commit, discard), and the
run's tally of what was read (``spark_jobs.tally``).

The run owns the offsets: it decides what is read (the spec's ranges less what retention took,
``watermarks.check_watermarks``), counts what the tasks read, and reports both; the target only writes.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from spark_jobs.kafka_source import ReadPlan, chunk_ranges, consumer_config, read_records
from spark_jobs.targets import Reading, target_for
from spark_jobs.watermarks import check_watermarks

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    from spark_jobs.job import Driver
    from spark_jobs.plans import TaskReport
    from spark_jobs.spec import RunSpec
    from spark_jobs.tally import Tally

log = logging.getLogger("inlet.ingest")


def run(spec: RunSpec, driver: Driver, scratch: str, tally: Tally) -> None:
    target = target_for(spec, tally.check_cancelled)
    done = target.prepare()
    if done is not None:
        tally.committed(done)
        return

    # Cheap checks before paying for a Spark session.
    source, egress = spec.source, spec.egress.policy()
    group_id = f"inlet-pipeline-{spec.pipeline_id}"
    readable, gaps = check_watermarks(source, egress)
    tally.skipped(gaps)
    for gap in gaps:
        log.warning("data loss skipped: %s[%d] offsets [%d, %d) no longer exist", gap.topic, gap.partition, gap.start, gap.end)
    tally.check_cancelled("reading")
    chunks = chunk_ranges(readable, source.max_records_per_task)
    plan = ReadPlan(consumer_config(source.kafka_config, group_id, egress), tuple(chunks), source.budget)
    log.info("reading %d chunks of %d partitions", len(chunks), sum(len(p) for p in readable.values()))

    began = time.monotonic()
    with _spark(driver, f"inlet-{spec.pipeline_id}-{spec.run_id}", target.uses_dataframes) as (context, session):
        tally.session_start_s = time.monotonic() - began
        records = None
        if session is not None:
            records = read_records(session, plan, source.include_headers, os.path.join(scratch, "read-plan.pickle"))
        reports: list[TaskReport] = []
        try:
            began = time.monotonic()
            reports = target.write(Reading(plan, records, context, scratch))
            tally.process_s = time.monotonic() - began
            tally.read(reports)
            began = time.monotonic()
            outcome = target.commit(reports)
        except BaseException:
            target.discard(reports)
            raise
        tally.commit_s = time.monotonic() - began
        tally.committed(outcome)


@contextmanager
def _spark(driver: Driver, name: str, sql: bool) -> Iterator[tuple[SparkContext, SparkSession | None]]:
    """The run's Spark: a session for DataFrames, else only a context (tasks of plain Python
    functions need no SQL session, whose start costs seconds)."""
    if sql:
        with driver.session(name) as session:
            yield session.sparkContext, session
    else:
        with driver.context(name) as context:
            yield context, None
