"""The Kafka target: a run's records forwarded to another Kafka topic, produced from the executors.

Each record keeps its key, value (raw bytes, whatever the value_format) and source headers, and
gains headers naming its source coordinates and run (``inlet.topic``, ``inlet.partition``,
``inlet.offset``, ``inlet.run_id``), so consumers can drop the duplicates a retried run produces:
the producer is idempotent (no duplicates within a task's session) but not transactional.
A task succeeds only after every one of its deliveries is acknowledged by all in-sync replicas.

    prepare  nothing to check: a topic keeps no record of which runs wrote to it
    write    the ``inlet_kafka_sink`` data source over the run's records (a DataFrame: ``Reading.records``)
    commit   nothing left to make durable (every record was acknowledged): counts what was written
    discard  nothing: produced records cannot be taken back
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from spark_jobs.errors import JobError, JobErrorKind
from spark_jobs.plans import (
    ClientConfig,
    TaskReport,
    collect_read_stats,
    read_plan,
    read_reports,
    write_plan,
    write_reports,
)
from spark_jobs.read_budget import ReadBudget
from spark_jobs.targets import Committed, Reading

if TYPE_CHECKING:
    from confluent_kafka import KafkaError, Message, Producer

    from spark_jobs.spec import KafkaTargetSpec, RunSpec  # pydantic costs every Python worker ~1 s to import

_FLUSH_TIMEOUT_S = 120.0
_SERVE_EVERY_S = 0.1


class KafkaTopic:
    """``spec``'s records, produced to ``target``'s topic (a ``targets.RunTarget``)."""

    uses_dataframes = True

    def __init__(self, spec: RunSpec, target: KafkaTargetSpec) -> None:
        self.spec, self.target = spec, target

    def prepare(self) -> Committed | None:
        return None

    def write(self, reading: Reading) -> list[TaskReport]:
        from spark_jobs.oauth import job_client_config

        plan = KafkaSinkPlan(
            kafka_config=job_client_config(self.target.kafka_config, self.spec.egress.policy()),
            topic=self.target.topic,
            run_id=self.spec.run_id,
            manifest=os.path.join(reading.scratch, "manifest.pickle"),
            budget=reading.plan.budget,
        )
        records = reading.records
        assert records is not None  # uses_dataframes
        records.sparkSession.dataSource.register(InletKafkaSinkDataSource)
        plan_path = write_plan(os.path.join(reading.scratch, "sink-plan.pickle"), plan)
        records.write.format("inlet_kafka_sink").mode("append").option("plan", plan_path).save()
        return read_reports(plan.manifest)

    def commit(self, reports: list[TaskReport]) -> Committed:
        return Committed(rows=sum(s.records for r in reports for s in r.partitions.values()))

    def discard(self, reports: list[TaskReport]) -> None:
        pass  # the records are in the topic; their inlet.* headers let consumers drop a retry's duplicates


@dataclass(frozen=True)
class KafkaSinkPlan:
    """The ``inlet_kafka_sink``'s plan: where its tasks produce, and where their reports go."""

    kafka_config: ClientConfig  # the target's client config, secrets (and an OAuth token source) included
    topic: str
    run_id: str
    manifest: str  # the reports' file, for the driver program (``read_reports``)
    budget: ReadBudget


def producer_config(kafka_config: ClientConfig, budget: ReadBudget) -> ClientConfig:
    """The target's producer: idempotent, every replica's ack, and its queue of records not yet
    delivered bounded by the run's batch bytes (librdkafka's default: 1 GiB)."""
    return {**kafka_config, "acks": "all", "enable.idempotence": True, "linger.ms": 20,
            "queue.buffering.max.kbytes": max(1, budget.max_batch_bytes >> 10)}


class InletKafkaSinkDataSource(DataSource):
    """``df.write.format("inlet_kafka_sink").option("plan", path)``; the plan holds the config."""

    @classmethod
    def name(cls) -> str:
        return "inlet_kafka_sink"

    def writer(self, schema: StructType, overwrite: bool) -> _ProduceWriter:
        return _ProduceWriter(read_plan(self.options["plan"], KafkaSinkPlan))


class _ProduceWriter(DataSourceArrowWriter):
    def __init__(self, plan: KafkaSinkPlan):
        self.plan = plan

    def write(self, iterator: Iterator[pa.RecordBatch]) -> TaskReport:
        from confluent_kafka import KafkaException, Producer

        from spark_jobs.kafka_errors import Refusals, is_auth_error

        report = TaskReport()
        failures: list[KafkaError] = []
        # Auth errors reach only error_cb, while the messages wait out message.timeout.ms: without
        # Refusals a bad password costs the whole flush timeout.
        refusals = Refusals()

        producer = Producer({**producer_config(self.plan.kafka_config, self.plan.budget), **refusals.client_config()})
        topic, run_id = self.plan.topic, self.plan.run_id.encode()

        def delivered(err: KafkaError | None, _msg: Message) -> None:
            if err is None:
                refusals.progressed()
            else:
                failures.append(err)

        try:
            with _served(producer):
                for batch in iterator:
                    collect_read_stats(batch, report.partitions)
                    _produce(producer, topic, run_id, batch, delivered)
                    if failures or refusals.final():
                        break
            deadline = time.monotonic() + _FLUSH_TIMEOUT_S
            remaining = producer.flush(1.0)
            while remaining and refusals.final() is None and time.monotonic() < deadline:
                remaining = producer.flush(1.0)
        except KafkaException as exc:
            raise JobError("target_write", f"produce to {topic} failed: {exc.args[0].str()}") from None
        if (refused := refusals.final()) is not None:
            kind: JobErrorKind = "kafka_auth" if is_auth_error(refused) else "target_write"
            raise JobError(kind, f"produce to {topic} refused: {refused.str()}")
        if remaining:
            unacknowledged = f"{remaining} records to {topic} unacknowledged after {_FLUSH_TIMEOUT_S:.0f}s"
            if refusals.last_auth is not None:
                raise JobError("kafka_auth", f"{unacknowledged}, refused: {refusals.last_auth.str()}")
            raise JobError("target_write", unacknowledged)
        if failures:
            kind = "kafka_auth" if is_auth_error(failures[0]) else "target_write"
            raise JobError(kind, f"{len(failures)} deliveries to {topic} failed, first: {failures[0].str()}")
        return report

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        write_reports(self.plan.manifest, messages)


@contextmanager
def _served(producer: Producer) -> Iterator[None]:
    """``producer``'s callbacks served every ``_SERVE_EVERY_S`` while the block runs: its deliveries,
    its errors and its OAuth token refreshes (librdkafka runs ``oauth_cb`` only when the client is
    polled). The block pulls each batch from the run's read, which can hold the task for longer than
    a token lives (a paced or stalled broker): served only between batches, the producer would
    re-authenticate with an expired token, and its errors would be judged (``Refusals``) against a
    clock that ran while nobody looked for its acknowledgements."""
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            producer.poll(_SERVE_EVERY_S)

    server = threading.Thread(target=serve, name="inlet-kafka-sink-poll", daemon=True)
    server.start()
    try:
        yield
    finally:
        stop.set()
        server.join()


def _produce(producer: Producer, topic: str, run_id: bytes, batch: pa.RecordBatch,
             delivered: Callable[[KafkaError | None, Message], None]) -> None:
    """``batch``'s records, with their source headers and Inlet's, queued for ``topic``."""
    columns = batch.to_pydict()
    source_headers = columns.get("headers") or [None] * batch.num_rows
    for key, value, src_topic, partition, offset, headers in zip(
        columns["key"], columns["value"], columns["topic"], columns["partition"], columns["offset"], source_headers,
        strict=True,
    ):
        out = [(h["key"], h["value"]) for h in headers or ()]
        out += [
            ("inlet.topic", src_topic.encode()),
            ("inlet.partition", str(partition).encode()),
            ("inlet.offset", str(offset).encode()),
            ("inlet.run_id", run_id),
        ]
        while True:
            try:
                producer.produce(topic, value=value, key=key, headers=out, on_delivery=delivered)
                break
            except BufferError:
                time.sleep(_SERVE_EVERY_S)  # the local queue is full: the serving thread drains deliveries
