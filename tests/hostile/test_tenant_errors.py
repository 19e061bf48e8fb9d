"""A run's error as its tenant reads it (``api.runs.tenant_errors``): a crashed job's message held the
JVM's stack frames and the server's absolute paths (its storage root, a run's private folder); the
tenant now reads the message up to its first frame, its own table's path as it wrote it, any other
server path as ``<server path>``; the operator's log keeps the whole message with the run's id."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.runs.tenant_errors import MAX_CHARS, for_tenant
from spark_jobs.spec import JobFailure
from tests.factories import Tenant
from tests.webhooks.test_events import _claimed_run, _pipeline, _record, _result

TENANT = "3f1c2b9e-8d4a-4c1e-9b7a-2e5f6a7b8c9d"
CRASH = (f"spark-submit exited 1 without a result: py4j.protocol.Py4JJavaError: An error occurred while calling "
         f"o123.save. : java.io.FileNotFoundException: /srv/inlet/storage/tenants/{TENANT}/bronze/orders/"
         "part-00000.parquet (No such file or directory)\n\tat java.base/java.io.FileInputStream.open0(Native Method)"
         "\n\tat org.apache.spark.sql.delta.DeltaLog.update(DeltaLog.scala:123)\nCaused by: /tmp/inlet-run-9x/spec.json")


@pytest.mark.parametrize(("message", "shown"), [
    (CRASH, ("spark-submit exited 1 without a result: py4j.protocol.Py4JJavaError: An error occurred while calling "
             "o123.save. : java.io.FileNotFoundException: bronze/orders/part-00000.parquet (No such file or directory)")),
    ("could not read /tmp/inlet-run-3b/job.json or file:///var/lib/inlet/data/server.key",
     "could not read <server path> or <server path>"),
    ("Traceback (most recent call last):\n  File \"/srv/inlet/spark_jobs/run.py\", line 3", ""),
    ("topic orders partition 3: offsets 10-20 are gone (retention)",
     "topic orders partition 3: offsets 10-20 are gone (retention)"),
    ("s3://tenant-bucket/bronze/orders: the table uses the Delta feature `rowTracking`",
     "s3://tenant-bucket/bronze/orders: the table uses the Delta feature `rowTracking`"),
    ("x" * 5000, "x" * (MAX_CHARS - 1) + "…"),
])
def test_a_message_keeps_what_the_tenant_can_act_on(message: str, shown: str) -> None:
    assert for_tenant(message) == shown


def test_a_crashed_runs_error_reads_without_the_servers_insides(client: TestClient, app: Any, tenant: Tenant,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    pipeline = _pipeline(client, tenant)
    run_id = _claimed_run(app, pipeline["id"])
    with caplog.at_level(logging.WARNING, logger="api.runs.execution"):
        _record(app, run_id, _result(run_id, "failed", error=JobFailure(kind="crashed", message=CRASH)))

    error = client.get(f"/runs/{run_id}", headers=tenant.viewer).json()["error"]
    assert error["kind"] == "crashed" and "bronze/orders/part-00000.parquet" in error["message"]
    assert "/srv/inlet" not in error["message"] and "\tat " not in error["message"] and TENANT not in error["message"]
    assert "/tmp/inlet-run" not in error["message"]
    logged = [r.getMessage() for r in caplog.records if str(run_id) in r.getMessage()]
    assert logged and "DeltaLog.update" in logged[0] and "/srv/inlet/storage" in logged[0]
