"""Building the Spark job's ``RunSpec`` from a planned run: the one place where database rows and
stored secrets become the job's contract."""

from __future__ import annotations

from sqlmodel import Session

from api.connections.client_configs import RegistryMissing, client_config, registry_config
from api.connections.service import referenced_connection
from api.core.config import Settings
from api.kafka.config import check_option_sizes
from api.pipelines.contract import PipelineContract
from api.pipelines.definition import definition_of
from api.pipelines.models import Pipeline
from api.pipelines.schemas import registry_subject
from api.pipelines.service import target_uri
from api.runs.delta_state import app_id
from api.runs.models import Run
from api.runs.planning import Plan
from api.secrets.store import SecretStore
from api.tenancy.field_keys import field_key, has_field_key
from spark_jobs.public import (
    ContractSpec,
    DeltaTargetSpec,
    Egress,
    ExpectationSpec,
    KafkaTargetSpec,
    RegistrySpec,
    ReprocessSpec,
    RunSpec,
    SensitiveFieldSpec,
    SourceSpec,
    SubjectRef,
    TableCreation,
    Txn,
)


def quarantine_uri(table_uri: str) -> str:
    """Rows that fail to decode go to a table beside the target."""
    return f"{table_uri.rstrip('/')}__quarantine"


def build_spec(session: Session, run: Run, pipeline: Pipeline, *, settings: Settings, secrets: SecretStore) -> RunSpec:
    plan = Plan.from_json(run.plan or {"partitions": []})
    source_conn = referenced_connection(session, pipeline.connection_id)
    # A ceiling lowered since the connection was written holds from its next run (a kafka_config failure).
    check_option_sizes(source_conn.options, settings.kafka_max_fetch_bytes)
    definition = definition_of(pipeline)
    source = definition.source
    subjects = {part: SubjectRef(subject=found[0], version=found[1])
                for part in ("value", "key") if (found := registry_subject(source, part)) is not None}
    registry = registry_config(source_conn, secrets, version=run.source_credentials_version) if subjects else None
    if subjects and registry is None:
        raise RegistryMissing(source_conn)
    spec_source = SourceSpec(
        kafka_config=client_config(source_conn, secrets, version=run.source_credentials_version).librdkafka_config(),
        ranges=plan.ranges(),
        value_format=source.value_format,
        schema_=source.schema_,
        include_headers=source.include_headers,
        registry=RegistrySpec.of(registry) if registry else None,
        value_subject=subjects.get("value"),
        key_format=source.key_format,
        key_subject=subjects.get("key"),
        on_data_loss=source.on_data_loss,
        max_record_bytes=settings.run_max_record_bytes,
        max_batch_bytes=settings.run_max_batch_bytes,
    )
    target: DeltaTargetSpec | KafkaTargetSpec
    if definition.target.type == "delta":
        uri = target_uri(pipeline, definition.target, settings.resolved_storage_root)
        assert uri is not None
        target = DeltaTargetSpec(uri=uri, partition_by=list(definition.target.partition_by),
                                 quarantine_uri=quarantine_uri(uri), replace_ranges=run.replace_ranges,
                                 storage_options=settings.resolved_storage_options, mode=definition.target.mode,
                                 key=list(definition.target.key or []), key_from=definition.target.key_from,
                                 sequence_by=definition.target.sequence_by, changes=definition.target.changes,
                                 scd_type=definition.target.scd_type, deletes=definition.target.deletes,
                                 table_features=TableCreation(
                                     deletion_vectors=definition.target.table_features.deletion_vectors,
                                     cluster_by=tuple(definition.target.table_features.cluster_by)),
                                 merge_on_spark_bytes=None if settings.spark_merge_min_mb is None
                                 else settings.spark_merge_min_mb << 20)
    else:
        target_conn = referenced_connection(session, definition.target.connection_id)
        check_option_sizes(target_conn.options, settings.kafka_max_fetch_bytes)
        target = KafkaTargetSpec(
            kafka_config=client_config(target_conn, secrets, version=run.target_credentials_version).librdkafka_config(),
            topic=definition.target.topic,
        )
    return RunSpec(
        run_id=str(run.id), pipeline_id=str(pipeline.id), txn=Txn(app_id=app_id(pipeline.id), version=run.seq),
        source=spec_source, target=target,
        egress=Egress(deny=tuple(settings.tenant_egress_deny), allow=tuple(settings.egress_allow)),
        contract=_contract(session, pipeline, definition.contract, secrets, reprocess=run.reprocess is not None),
        reprocess=ReprocessSpec.model_validate(run.reprocess) if run.reprocess is not None else None,
    )


def _contract(session: Session, pipeline: Pipeline, contract: PipelineContract, secrets: SecretStore, *,
              reprocess: bool) -> ContractSpec:
    """The pipeline's contract as its run applies it, with the tenant's field key if it has sensitive
    fields; a reprocess gets the key too if the tenant has one (an earlier contract may have sealed
    the quarantined records with it)."""
    needs_key = bool(contract.sensitive) or (reprocess and has_field_key(session, pipeline.tenant_id))
    return ContractSpec(
        expectations=tuple(ExpectationSpec(name=e.name, predicate=e.predicate, action=e.action)
                           for e in contract.expectations),
        sensitive=tuple(SensitiveFieldSpec(field=s.field, action=s.action) for s in contract.sensitive),
        evolution=contract.evolution,
        field_key=field_key(session, pipeline.tenant_id, secrets) if needs_key else None)
