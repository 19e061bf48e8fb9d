"""The production path into ADLS Gen2 and GCS: HTTP API → Redis → Celery worker → spark-submit → a Delta
table under ``INLET_STORAGE_ROOT=abfss://…`` or ``gs://…`` → offsets committed. As a user configures it:
the provider's variables (``AZURE_*``, ``GOOGLE_*``) in the worker's environment only; the job gets them
in its private spec. The stores are Azurite and the fake-gcs-server stand-in (tests/fixtures/)."""

from __future__ import annotations

import pytest

from api.core.config import Settings
from spark_jobs.storage import Store
from tests.factories import create_sandbox_pipeline, make_tenant
from tests.fixtures.azure_storage import Container
from tests.fixtures.gcs_storage import GcsBucket
from tests.fixtures.kafka import produce_keyed
from tests.runs.helpers import committed_offsets, wait_for_run

pytestmark = pytest.mark.slow


@pytest.fixture(params=["azure", "gcs"])
def store(request: pytest.FixtureRequest) -> Container | GcsBucket:
    return request.getfixturevalue("azure_container" if request.param == "azure" else "gcs_bucket")


@pytest.fixture
def settings(settings: Settings, store: Container | GcsBucket) -> Settings:
    return settings.model_copy(update={"storage_root": store.root})


def test_a_run_into_adls_or_gcs_lands_once_commits_its_offsets_and_logs_no_credential(
    stack, sandbox_kafka, kafka_topic, store: Container | GcsBucket
) -> None:
    topic = kafka_topic(partitions=2)
    placed = produce_keyed(sandbox_kafka.bootstrap_servers, topic, 60)
    client = stack.client
    tenant = make_tenant(client)
    pipeline = create_sandbox_pipeline(client, tenant, sandbox_kafka.bootstrap_servers, [topic],
                                       target={"type": "delta", "path": "bronze/orders"})
    uri = pipeline["status"]["target_uri"]
    assert uri == f"{store.root}/tenants/{tenant.id}/bronze/orders"
    stack.env.update(store.environment)  # the worker's environment, as a user would set it
    stack.start_worker()

    triggered = client.post(f"/pipelines/{pipeline['id']}/runs", headers=tenant.editor)
    run = wait_for_run(stack, triggered.json()["id"], tenant.viewer, timeout_s=300)

    assert run["state"] == "succeeded", (run, stack.log_text())
    assert run["records_read"] == 60 and run["rows_written"] == 60
    table = Store(store.environment).delta_table(uri).to_pyarrow_table(columns=["topic", "partition", "offset"])
    assert sorted(zip(table["topic"].to_pylist(), table["partition"].to_pylist(), table["offset"].to_pylist(), strict=True)) == sorted(
        (topic, p, o) for p, offsets in placed.items() for o in offsets)
    assert committed_offsets(stack.settings.resolved_database_url, pipeline["id"]) == {
        (topic, p): len(placed.get(p, [])) for p in range(2)
    }
    secret = next(v for k, v in store.environment.items() if k.endswith(("ACCOUNT_KEY", "SERVICE_ACCOUNT_KEY")))
    logged = client.get(f"/runs/{run['id']}/log", headers=tenant.viewer).text + stack.log_text()
    assert secret not in logged and "BEGIN PRIVATE KEY" not in logged
