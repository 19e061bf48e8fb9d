"""The maintenance worker's part of a table's maintenance: take the table (``api.maintenance.execution``),
run the steps with delta-rs (``spark_jobs.public.maintain_table``) with no transaction open while the
hold on the table is renewed, record what they did. A compaction of ``INLET_SPARK_COMPACT_MIN_MB`` or
more goes to the Spark cluster as a job of its own (``worker.launch.compaction``).

Runs in ``inlet maintenance-worker``, on the maintenance queue: a compaction never waits for a run's
slot, nor a run for a compaction. A redelivered task finds the table held (``busy``) or nothing due.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid

from sqlalchemy import Engine

from api.core.config import Settings
from api.core.db import unit_of_work
from api.maintenance import execution
from api.maintenance.tables import steps_of
from spark_jobs.public import CompactionOffload, maintain_table
from worker.launch.compaction import SparkCompaction, sweep_compaction_folders
from worker.runner import spark_settings

log = logging.getLogger(__name__)


class TableMaintainer:
    def __init__(self, settings: Settings, db: Engine) -> None:
        self.settings = settings
        self.db = db
        self.worker = f"maintenance:{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}"
        spark = SparkCompaction(spark_settings(settings), settings.spark_compact_timeout_s)
        self.offload = None if settings.spark_compact_min_mb is None else CompactionOffload(
            settings.spark_compact_min_mb << 20, spark, delta_spark=spark.delta_spark)
        if self.offload is not None:
            sweep_compaction_folders()

    def maintain(self, pipeline_id: uuid.UUID) -> str:
        """One task: ``done``, or why nothing was done (``gone``, ``busy``, ``nothing-due``)."""
        with unit_of_work(self.db) as session:
            claimed = execution.claim(session=session, pipeline_id=pipeline_id, worker=self.worker,
                                      settings=self.settings)
        if isinstance(claimed, str):
            return claimed
        stop = threading.Event()
        beat = threading.Thread(target=self._renew, args=(pipeline_id, stop), daemon=True,
                                name=f"maintenance-lease-{pipeline_id}")
        beat.start()
        try:
            table = claimed.table
            report = maintain_table(table.store, table.uri, table.job_policy, steps_of(claimed.steps),
                                    notes={"inlet.pipeline": str(pipeline_id)}, offload=self.offload)
        finally:
            stop.set()
            beat.join()
        with unit_of_work(self.db) as session:
            done = execution.finish(session=session, claimed=claimed, worker=self.worker, report=report)
        log.info("maintained the table of pipeline %s: %s", pipeline_id,
                 {step: (done.get(step) or {}).get("outcome") for step in ("compaction", "vacuum", "checkpoint")})
        return "done"

    def _renew(self, pipeline_id: uuid.UUID, stop: threading.Event) -> None:
        interval = self.settings.maintenance_lease_s / 3
        while not stop.wait(interval):
            try:
                with unit_of_work(self.db) as session:
                    if not execution.renew(session=session, pipeline_id=pipeline_id, worker=self.worker,
                                           settings=self.settings):
                        log.warning("maintenance of pipeline %s lost its hold on the table", pipeline_id)
                        return
            except Exception:  # a missed renewal is survivable; the lease outlasts several
                log.exception("renewing the maintenance lease of pipeline %s failed", pipeline_id)
