"""What the worker hands the job (``api.runs.job_spec.build_spec``) from the platform's settings: a keyed
run's spec carries ``INLET_SPARK_MERGE_MIN_MB`` as the bytes past which delta-spark merges its table
(``spark_jobs.delta_tables.spark_merge``), and nothing when it is unset; a pipeline's Delta features for
its table reach it as asked. Claimed, planned and prepared
through ``api.runs.execution`` as the worker does, without Spark."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient

from api.core.db import unit_of_work
from api.runs import execution
from spark_jobs.spec import DeltaTargetSpec, RunSpec, TableCreation
from tests.factories import Tenant, create_sandbox_pipeline
from tests.fixtures.debezium import SCHEMA, change_log, produce_changes
from tests.fixtures.kafka import SandboxKafka


@pytest.mark.parametrize(("least_mb", "least_bytes"), [(None, None), (0, 0), (512, 512 * 1024 * 1024)])
def test_the_platforms_spark_merge_line_reaches_a_keyed_runs_spec(
        client: TestClient, tenant: Tenant, sandbox_kafka: SandboxKafka, kafka_topic: Callable[..., str],
        least_mb: int | None, least_bytes: int | None) -> None:
    spec = _spec(client, tenant, sandbox_kafka, kafka_topic, {"mode": "upsert", "key": ["id"]}, spark_merge_min_mb=least_mb)
    assert spec.mode == "upsert" and spec.merge_on_spark_bytes == least_bytes


@pytest.mark.parametrize("features", [{}, {"deletion_vectors": True}, {"cluster_by": ["id", "partition"]}])
def test_the_delta_features_a_pipeline_asks_its_table_to_be_created_with_reach_its_runs_spec(
        client: TestClient, tenant: Tenant, sandbox_kafka: SandboxKafka, kafka_topic: Callable[..., str],
        features: dict[str, object]) -> None:
    spec = _spec(client, tenant, sandbox_kafka, kafka_topic, {"table_features": features})
    assert spec.table_features == TableCreation.model_validate(features)
    assert spec.table_features.needs_spark == bool(features)


def _spec(client: TestClient, tenant: Tenant, sandbox_kafka: SandboxKafka, kafka_topic: Callable[..., str],
          target: dict[str, object], **settings: object) -> DeltaTargetSpec:
    """The Delta target of the spec the worker builds for a run of a pipeline with ``target``."""
    topic = kafka_topic(partitions=3)
    produce_changes(sandbox_kafka.bootstrap_servers, topic, change_log(seed=3, keys=5, n=20))
    pipeline = create_sandbox_pipeline(
        client, tenant, sandbox_kafka.bootstrap_servers, [topic], source={"value_format": "json", "schema": SCHEMA},
        target={"type": "delta", "path": "silver/customers", "sequence_by": "source.lsn", "changes": "debezium", **target}
        if target.get("mode") == "upsert" else {"type": "delta", "path": "silver/customers", **target})
    triggered = client.post(f"/pipelines/{pipeline['id']}/runs", headers=tenant.editor)
    assert triggered.status_code == 202, triggered.text
    run_id = uuid.UUID(triggered.json()["id"])
    app = client.app
    services = execution.Services(settings=app.state.settings.model_copy(update=settings),  # type: ignore[attr-defined]
                                  secrets=app.state.secrets)  # type: ignore[attr-defined]
    engine = app.state.engine  # type: ignore[attr-defined]
    with unit_of_work(engine) as session:
        assert execution.claim(session=session, run_id=run_id, worker="tests", lease_s=60) is not None
    with unit_of_work(engine) as session:
        assert execution.plan_claimed_run(session=session, run_id=run_id, services=services) is None
    with unit_of_work(engine) as session:
        spec = execution.prepare_launch(session=session, run_id=run_id, services=services)
    assert isinstance(spec, RunSpec) and isinstance(spec.target, DeltaTargetSpec), spec
    return spec.target
