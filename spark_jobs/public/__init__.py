"""The job's public face: all of ``spark_jobs`` that the control plane (``api/``) and the worker
(``worker/``) use, and the only part of it they import (checked by an import contract in
pyproject.toml, run by tests/core/test_layering.py).

- The contract between the worker and the job: one ``RunSpec`` in, one ``RunResult`` out
  (``spark_jobs.spec``), and ``redact`` for the secrets a spec carries.
- Where the job's tables live and how every process reaches them (``spark_jobs.storage``).
- Delta table maintenance, run by the maintenance worker (``spark_jobs.maintenance``): a table's
  health, what maintenance would do, and doing it; a large compaction's job for the Spark cluster
  and its result (``spark_jobs.maintenance.offload``).
- The failures a job reports (``spark_jobs.errors``) and the columns it writes beside a record's
  decoded fields (``spark_jobs.columns``).
- The language of expectations' predicates, parsed when a pipeline is written
  (``spark_jobs.contract.predicates``), and a new tenant's field key (``spark_jobs.contract.sensitive``).
- What the control plane shares with the job to reach a tenant's systems: the egress policy
  (``spark_jobs.egress``), OAuth token sources (``spark_jobs.oauth``), the Schema Registry client
  (``spark_jobs.registry``) and which Kafka errors are refused credentials (``spark_jobs.kafka_errors``).
- The JVM jars every Spark the worker starts gets beside pyspark's own (``spark_jobs.jars``).

The names live in those modules, which the job's own code imports; this package only re-exports
them. None of them imports Spark, so the API never loads it.
"""

from spark_jobs.columns import INLET_PREFIX, WHOLE_VALUE, inlet_named, reserved_in
from spark_jobs.columns import RESERVED as RESERVED_COLUMNS
from spark_jobs.contract.predicates import PredicateError
from spark_jobs.contract.predicates import columns_of as predicate_columns
from spark_jobs.contract.predicates import parse as parse_predicate
from spark_jobs.contract.sensitive import new_field_key
from spark_jobs.contract.spec import ContractSpec, ExpectationSpec, SensitiveFieldSpec
from spark_jobs.egress import DEFAULT_DENY, PRIVATE_RANGES, EgressPolicy, EgressRefused, http_client, networks, open_tcp
from spark_jobs.errors import JobError
from spark_jobs.jars import spark_conf as jars_conf
from spark_jobs.kafka_errors import is_auth_error
from spark_jobs.maintenance import (
    CheckpointResult,
    CompactionResult,
    MaintenancePreview,
    MaintenanceReport,
    MaintenanceSteps,
    SparkMaintenance,
    TableHealth,
    TablePolicy,
    VacuumResult,
)
from spark_jobs.maintenance import Offload as CompactionOffload
from spark_jobs.maintenance import inspect as inspect_table
from spark_jobs.maintenance import maintain as maintain_table
from spark_jobs.maintenance import preview as preview_maintenance
from spark_jobs.maintenance.offload import CompactionJob
from spark_jobs.maintenance.offload import result_from_json as read_compaction_result
from spark_jobs.maintenance.offload import spark_result_from_json as read_spark_maintenance
from spark_jobs.oauth import TokenRefused, TokenSource, parse_extensions, with_token_source
from spark_jobs.registry import RegistryClient, RegistryConfig, RegistryUnavailable
from spark_jobs.spec import (
    END_OF_OUTPUT,
    DeltaTargetSpec,
    Egress,
    ErrorKind,
    ExpectationCount,
    JobFailure,
    KafkaTargetSpec,
    PartitionResult,
    RegistrySpec,
    ReprocessCount,
    ReprocessSpec,
    RunResult,
    RunSpec,
    SourceSpec,
    SubjectRef,
    TableCreation,
    Timings,
    Txn,
    end_of_output,
    redact,
)
from spark_jobs.storage import AZURE_SCHEMES, GCS_SCHEMES, OBJECT_STORE_SCHEMES, S3_SCHEMES, Store, scheme_of
from spark_jobs.table_features import OPERATIONS, TableFeatures

__all__ = [
    "AZURE_SCHEMES",
    "DEFAULT_DENY",
    "END_OF_OUTPUT",
    "GCS_SCHEMES",
    "INLET_PREFIX",
    "OBJECT_STORE_SCHEMES",
    "OPERATIONS",
    "PRIVATE_RANGES",
    "RESERVED_COLUMNS",
    "S3_SCHEMES",
    "WHOLE_VALUE",
    "CheckpointResult",
    "CompactionJob",
    "CompactionOffload",
    "CompactionResult",
    "ContractSpec",
    "DeltaTargetSpec",
    "Egress",
    "EgressPolicy",
    "EgressRefused",
    "ErrorKind",
    "ExpectationCount",
    "ExpectationSpec",
    "JobError",
    "JobFailure",
    "KafkaTargetSpec",
    "MaintenancePreview",
    "MaintenanceReport",
    "MaintenanceSteps",
    "PartitionResult",
    "PredicateError",
    "RegistryClient",
    "RegistryConfig",
    "RegistrySpec",
    "RegistryUnavailable",
    "ReprocessCount",
    "ReprocessSpec",
    "RunResult",
    "RunSpec",
    "SensitiveFieldSpec",
    "SourceSpec",
    "SparkMaintenance",
    "Store",
    "SubjectRef",
    "TableCreation",
    "TableFeatures",
    "TableHealth",
    "TablePolicy",
    "Timings",
    "TokenRefused",
    "TokenSource",
    "Txn",
    "VacuumResult",
    "end_of_output",
    "http_client",
    "inlet_named",
    "inspect_table",
    "is_auth_error",
    "jars_conf",
    "maintain_table",
    "networks",
    "new_field_key",
    "open_tcp",
    "parse_extensions",
    "parse_predicate",
    "predicate_columns",
    "preview_maintenance",
    "read_compaction_result",
    "read_spark_maintenance",
    "redact",
    "reserved_in",
    "scheme_of",
    "with_token_source",
]
