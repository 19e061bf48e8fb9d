"""The production path end to end: HTTP API → Redis → Celery worker → spark-submit on the standalone
cluster → a Delta table in S3 → offsets committed. As a user configures it: ``INLET_STORAGE_ROOT=s3://``
and the standard ``AWS_*`` variables given to Inlet's processes only (the cluster has none; the S3
server is moto's emulator, tests/fixtures/object_storage.py)."""

from __future__ import annotations

import pytest

from api.core.config import Settings
from spark_jobs.storage import Store
from tests.factories import create_sandbox_pipeline, make_tenant
from tests.fixtures.kafka import produce_keyed
from tests.fixtures.object_storage import Bucket
from tests.fixtures.spark_cluster import CLUSTER_CONF
from tests.runs.helpers import committed_offsets, wait_for_run
from worker.launch import SparkSubmitSettings

pytestmark = pytest.mark.slow


@pytest.fixture
def settings(settings: Settings, spark_cluster: SparkSubmitSettings, s3_bucket: Bucket) -> Settings:
    return settings.model_copy(update={"storage_root": s3_bucket.root, "spark_master": spark_cluster.master,
                                       "spark_conf": CLUSTER_CONF})


def test_a_run_through_the_cluster_into_s3_lands_once_and_commits_its_offsets(
    stack, sandbox_kafka, kafka_topic, s3_bucket: Bucket
) -> None:
    topic = kafka_topic(partitions=3)
    placed = produce_keyed(sandbox_kafka.bootstrap_servers, topic, 90)
    client = stack.client
    tenant = make_tenant(client)
    pipeline = create_sandbox_pipeline(client, tenant, sandbox_kafka.bootstrap_servers, [topic],
                                       target={"type": "delta", "path": "bronze/orders"})
    uri = pipeline["status"]["target_uri"]
    assert uri == f"{s3_bucket.root}/tenants/{tenant.id}/bronze/orders"
    stack.env.update(s3_bucket.environment)  # the worker's environment, as a user would set it
    stack.start_worker()

    triggered = client.post(f"/pipelines/{pipeline['id']}/runs", headers=tenant.editor)
    run = wait_for_run(stack, triggered.json()["id"], tenant.viewer, timeout_s=300)

    assert run["state"] == "succeeded", (run, stack.log_text())
    assert run["records_read"] == 90 and run["rows_written"] == 90
    table = Store(s3_bucket.environment).delta_table(uri).to_pyarrow_table(columns=["topic", "partition", "offset"])
    assert sorted(zip(table["partition"].to_pylist(), table["offset"].to_pylist(), strict=True)) == sorted(
        (p, o) for p, offsets in placed.items() for o in offsets)
    assert committed_offsets(stack.settings.resolved_database_url, pipeline["id"]) == {
        (topic, p): len(placed.get(p, [])) for p in range(3)
    }
    assert s3_bucket.environment["AWS_SECRET_ACCESS_KEY"] not in client.get(
        f"/runs/{run['id']}/log", headers=tenant.viewer).text
