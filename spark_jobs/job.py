"""The job as a library: ``execute(spec, driver)`` runs one ``RunSpec`` to its ``RunResult``, for
both ways a run starts: a spark-submit of its own (``ingest.py``, the ``OneShot`` driver) and the warm
engine's resident driver (``engine.py``).

Nothing here logs a secret: the Kafka client configs are only ever logged redacted, and a failure's
message is redacted of every credential in the spec.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Protocol

from spark_jobs.errors import JobError, classify
from spark_jobs.run import run
from spark_jobs.spec import JobFailure, KafkaTargetSpec, RunResult, RunSpec, Timings, redact, redacted_config
from spark_jobs.tally import Tally

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

log = logging.getLogger("inlet.ingest")


class Driver(Protocol):
    """Where a run's Spark jobs go: a context of the run's own (spark-submit) or a resident one (the
    warm engine). ``context`` is enough for tasks of plain Python functions; ``session`` adds SQL."""

    def context(self, name: str) -> AbstractContextManager[SparkContext]: ...

    def session(self, name: str) -> AbstractContextManager[SparkSession]: ...


class OneShot:
    """spark-submit's driver: the run's own SparkContext or SparkSession, stopped when the run ends."""

    @contextmanager
    def context(self, name: str) -> Iterator[SparkContext]:
        from pyspark import SparkConf, SparkContext

        # Tasks of plain Python functions need no SQL session: its start costs seconds.
        context = SparkContext.getOrCreate(SparkConf().setAppName(name))
        try:
            yield context
        finally:
            context.stop()

    @contextmanager
    def session(self, name: str) -> Iterator[SparkSession]:
        from pyspark.sql import SparkSession

        spark = SparkSession.builder.appName(name).getOrCreate()
        try:
            yield spark
        finally:
            spark.stop()


def execute(spec: RunSpec, driver: Driver, cancelled: threading.Event | None = None) -> RunResult:
    """Run ``spec`` on ``driver`` to its result: every failure, a cancel included, ends in a failed one."""
    log.info(
        "run %s of pipeline %s: source %s, target %s",
        spec.run_id,
        spec.pipeline_id,
        json.dumps({**spec.source.model_dump(by_alias=True), "kafka_config": redacted_config(spec.source.kafka_config),
                    "registry": redacted_config(spec.source.registry.model_dump()) if spec.source.registry else None}),
        json.dumps(
            {**spec.target.model_dump(), "kafka_config": redacted_config(spec.target.kafka_config)}
            if isinstance(spec.target, KafkaTargetSpec)
            else {**spec.target.model_dump(), "storage_options": redacted_config(spec.target.storage_options)}
        ),
    )
    scratch = tempfile.mkdtemp(prefix="inlet-run-")
    tally = Tally(cancelled)
    try:
        run(spec, driver, scratch, tally)
        return tally.result(spec)
    except BaseException as exc:  # noqa: BLE001 - every failure must end in a result
        error = classify(exc)
        if error.kind == "internal" and tally.cancelled.is_set():  # a Spark job the cancel stopped, in Spark's words
            error = JobError("cancelled", f"the run was cancelled and its Spark jobs were stopped ({error.message})")
        log.error("run %s failed: %s: %s", spec.run_id, error.kind, redact(error.message, spec.secret_values()))
        if error.kind == "internal":  # unforeseen: the whole story, for whoever reads the run's log
            log.error("%s", redact(f"{type(exc).__name__}: {exc}", spec.secret_values()))
        return tally.result(spec, error)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def failed_before_start(spec: RunSpec, exc: BaseException) -> RunResult:
    """The result of a run that failed before its first step: nothing was read or written."""
    return Tally().result(spec, classify(exc))


def parse_spec(raw: bytes) -> RunSpec | RunResult:
    """The spec in ``raw``, or the failed result of a spec that is not valid."""
    try:
        return RunSpec.from_json(raw)
    except ValueError as exc:
        try:
            run_id = str(json.loads(raw).get("run_id", "unknown"))
        except (ValueError, AttributeError):
            run_id = "unknown"
        # pydantic's message quotes input values; only the locations and reasons are safe to keep.
        reasons = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in getattr(exc, "errors", list)()) or "not JSON"
        now = datetime.now(UTC)
        return RunResult(run_id=run_id, status="failed", timings=Timings(started_at=now, finished_at=now),
                         error=JobFailure(kind="invalid_spec", message=f"invalid spec: {reasons}"))


def write_result_file(path: str, text: str) -> None:
    """A job's result, where its launcher reads it: whole or not at all."""
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)  # the launcher never sees a half-written result


def configure_logging() -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
