"""Where a run's records go: one module per kind of target, each behind the same small lifecycle.

The shape is Kafka Connect's ``SinkTask``: the framework (``spark_jobs.run``) owns the offsets, and a
target only writes. The run calls, in this order:

    prepare()          checks before anything is read: is the run's transaction in the target already
                       (then the outcome, and nothing is read)? will the run's columns go into it?
                       what must replace mode take out? A failure here has written nothing.
    write(reading)     the Spark job: the target's tasks write the records ``reading`` names and
                       report what they wrote and read (``plans.TaskReport``).
    commit(reports)    makes what the tasks wrote durable and visible, at most once per run (the
                       spec's ``txn``), and says what it wrote (``Committed``).
    discard(reports)   after any failure once ``write`` began: deletes what the attempt wrote and
                       did not commit. (A failed Spark job cleans up its own tasks' output.)

The run keeps the tally (records read per partition, gaps, timings) from the reports; a target never
touches it, it returns its outcome. A target that must stop for a cancel before a step it cannot undo
calls the ``checkpoint`` it is given (it raises ``cancelled``).

A new target is a new module here with a class of this shape, and a line in ``target_for``. Its
tasks' code is pickled to the executors, which import the module: keep pydantic (``spark_jobs.spec``)
out of its imports at run time, as here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import DataFrame

    from spark_jobs.kafka_source import ReadPlan
    from spark_jobs.plans import TaskReport
    from spark_jobs.spec import ReprocessCount, RunSpec

# The run's cancel check: ``checkpoint("its Delta commit")`` raises JobError("cancelled") once the run is cancelled.
Checkpoint = Callable[[str], None]


@dataclass(frozen=True)
class Reading:
    """What a target's write reads, handed over by the run: the offset ranges still in Kafka, cut into
    chunks of at most ``max_records_per_task`` (``plan``), for a target whose tasks read Kafka
    themselves; as a DataFrame (``records``) for one that ``uses_dataframes``."""

    plan: ReadPlan
    records: DataFrame | None  # in the columns of Spark's Kafka source (``inlet_kafka``); None without a session
    context: SparkContext  # the run's Spark, for tasks of plain Python functions
    scratch: str  # a private folder of the run's, for plan and report files


@dataclass(frozen=True)
class Committed:
    """What a target's commit made durable, for the run's result."""

    rows: int = 0  # records written, quarantined ones not counted
    quarantined: int = 0  # records written to the quarantine table instead
    bytes: int | None = None  # of the files committed; None where the target does not tell (Kafka)
    version: int | None = None  # the table's version after the commit (Delta)
    files: int | None = None  # data files added to the main table (Delta): what table maintenance counts
    already_committed: bool = False  # an earlier attempt of the run committed it: this one wrote nothing
    reprocessed: ReprocessCount | None = None  # a reprocess of the quarantine's counts (``targets.reprocess``)


ALREADY_COMMITTED = Committed(already_committed=True)


class RunTarget(Protocol):
    """One run's target, called by ``spark_jobs.run`` in the order of this module's docstring."""

    # Whether ``write`` needs a SparkSession (DataFrames); a target whose tasks are plain Python
    # functions needs only a SparkContext, which starts seconds sooner.
    uses_dataframes: bool

    def prepare(self) -> Committed | None:
        """The outcome already, when there is nothing to write; None to go on."""
        ...

    def write(self, reading: Reading) -> list[TaskReport]: ...

    def commit(self, reports: list[TaskReport]) -> Committed: ...

    def discard(self, reports: list[TaskReport]) -> None: ...


def target_for(spec: RunSpec, checkpoint: Checkpoint) -> RunTarget:
    """The target ``spec`` names."""
    from spark_jobs.targets.delta_append import DeltaAppend
    from spark_jobs.targets.delta_upsert import DeltaUpsert
    from spark_jobs.targets.kafka import KafkaTopic
    from spark_jobs.targets.reprocess import QuarantineReprocess

    if spec.reprocess is not None:
        assert spec.target.type == "delta"  # the spec's validation
        return QuarantineReprocess(spec, spec.target, checkpoint)
    if spec.target.type == "delta":
        return (DeltaUpsert if spec.target.mode == "upsert" else DeltaAppend)(spec, spec.target, checkpoint)
    return KafkaTopic(spec, spec.target)
