"""Inlet's settings: one pydantic-settings class, read from ``INLET_*`` environment variables.

Nothing else in the code base reads ``os.environ``; everything takes a ``Settings``. The one other
environment Inlet reads is the object store's standard one (``AWS_*``, ``AZURE_*``, ``GOOGLE_*``;
``api/core/object_storage.py``), here too.
"""

from __future__ import annotations

import ipaddress
import math
import os
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, SecretStr, ValidationInfo, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from api.core.object_storage import storage_options
from spark_jobs.public import DEFAULT_DENY, OBJECT_STORE_SCHEMES, PRIVATE_RANGES, EgressPolicy, networks, scheme_of

# The retention settings, in days: 0 keeps forever; anything shorter than a day is refused, since runs
# younger than that still count against a tenant's hourly quota and a client's retries still use its keys.
RETENTIONS = ("retention_runs_days", "retention_continuous_runs_days", "retention_run_logs_days",
              "retention_audit_days", "retention_webhooks_days",
              "retention_idempotency_days")
MIN_RETENTION_DAYS = 1.0


class Settings(BaseSettings):
    # Settings carry secrets: a refused value is never repeated in the error.
    model_config = SettingsConfigDict(env_prefix="INLET_", extra="ignore", hide_input_in_errors=True)

    # Storage of the control plane itself.
    data_dir: Path = Path(".inlet")
    database_url: str | None = Field(
        default=None, description="SQLAlchemy URL; defaults to a SQLite file under data_dir"
    )
    storage_root: str | None = Field(
        default=None, description="Root under which Delta targets live: a path, s3://bucket/prefix, "
        "abfss://container@account.dfs.core.windows.net/prefix, az://container/prefix or gs://bucket/prefix; "
        "defaults to data_dir/storage"
    )
    storage_options: dict[str, str] = Field(
        default_factory=dict,
        description="Object-storage options as JSON (delta-rs names: AWS_ENDPOINT_URL, AZURE_STORAGE_ACCOUNT_KEY, "
        "GOOGLE_SERVICE_ACCOUNT_KEY, ...), over the provider's variables of the environment (AWS_*, AZURE_*, "
        "GOOGLE_*); passed to the Spark job in its private spec, never in argv",
    )

    # Access.
    admin_token: SecretStr | None = Field(
        default=None, description="Platform operator token: 32 characters or more (`openssl rand -hex "
        "16` makes one); it creates tenants and their admin keys, so a shorter one is refused at start-up")
    auth_failures_per_minute: int = Field(
        default=30, ge=1, description="Failed authentications an address may make in a minute (API keys, the operator "
        "token, portal sign-in); past it, 429 with Retry-After (keys that authenticated lately still pass)")
    cors_origins: Annotated[list[str], NoDecode] = Field(default_factory=list)
    server_key: SecretStr | None = Field(
        default=None, min_length=32, description="Key of Inlet's keyed digests (idempotency fingerprints); every API "
        "replica must have the same one; defaults to a random key generated into data_dir/server.key"
    )

    # Portal sessions (docs/security.md): server-side, ended by sign-out, key revocation and these timeouts.
    portal_session_idle_s: float = Field(default=1800.0, gt=0, description="A portal session unused this long ends")
    portal_session_max_s: float = Field(
        default=28_800.0, gt=0, description="A portal session ends this long after sign-in, used or not"
    )
    portal_secure_cookies: Literal["auto", "always", "never"] = Field(
        default="auto", description="Secure portal cookies: auto, when the request came over HTTPS (directly, or as "
        "X-Forwarded-Proto from an address in forwarded_allow_ips says); always; never"
    )
    forwarded_allow_ips: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: ["127.0.0.1", "::1"], description="Proxies whose X-Forwarded-Proto is believed, "
        "comma-separated addresses or CIDRs; * believes any (only when nothing but the proxy can reach Inlet)"
    )

    # Broker for Celery.
    redis_url: str = "redis://127.0.0.1:6379/0"

    # Secrets.
    secret_backend: Literal["local", "vault"] = "local"
    secret_key_file: Path | None = Field(
        default=None, description="Key of the local encrypted store; defaults to data_dir/secret.key"
    )
    vault_addr: str | None = None
    vault_token: SecretStr | None = None
    vault_role_id: str | None = None
    vault_secret_id: SecretStr | None = None
    vault_mount: str = "secret"
    vault_prefix: str = "inlet"
    vault_namespace: str | None = Field(default=None, description="e.g. admin/team-a on HCP Vault")
    vault_approle_mount: str = "approle"
    vault_timeout_s: float = 5.0
    secret_sweep_interval_s: float = Field(
        default=600.0, gt=0, description="How often the scheduler destroys secrets that belong to no connection"
    )
    secret_orphan_grace_s: float = Field(
        default=300.0, ge=0, description="A secret younger than this is never taken for an orphan (a create in flight)"
    )

    # Kafka lookups done by the control plane (planning, offsets, connection test).
    kafka_timeout_s: float = 5.0
    group_mirror_retry_s: float = Field(
        default=10.0, gt=0, description="First wait before a failed consumer-group copy is retried (doubling)"
    )

    # Runs: where job specs are written, and how runs are retried and leased.
    work_dir: Path | None = Field(default=None, description="Private folder for job specs; defaults to data_dir/work")
    run_timeout_s: float = 3600.0
    run_max_attempts: int = Field(default=3, ge=1)
    run_retry_backoff_s: float = 10.0
    run_lease_s: float = Field(default=60.0, gt=5)
    scheduler_interval_s: float = Field(default=5.0, gt=0)
    scheduler_batch_size: int = Field(default=500, ge=1)
    run_fair_dispatch: bool = Field(
        default=True, description="A free worker takes the fairest queued run (the tenant with the fewest running, "
        "below its concurrent-runs quota); false: the run its message names, first come first served (docs/runs.md)"
    )

    # Quotas (docs/security.md): every tenant's limits unless the operator set its own (PUT /tenants/{id}/quotas).
    quota_pipelines: int = Field(default=1000, ge=0, description="Pipelines a tenant may have")
    quota_connections: int = Field(default=200, ge=0, description="Connections a tenant may have")
    quota_api_keys: int = Field(default=100, ge=0, description="Unrevoked API keys a tenant may have")
    quota_webhooks: int = Field(
        default=50, ge=0, description="Webhooks a tenant may have (every event is one delivery to each)"
    )
    quota_runs_per_hour: int = Field(
        default=3600, ge=0, description="Runs a tenant may start in any hour, manual and scheduled alike"
    )
    quota_concurrent_runs: int = Field(
        default=10, ge=1, description="Runs of one tenant the workers execute at once; more wait their turn"
    )
    quota_continuous_pipelines: int = Field(
        default=10, ge=0, description="Active continuous pipelines a tenant may have: each looks for records every "
        "idle_wait_ms while its topics are idle, a worker's time no run counts"
    )

    # /metrics (docs/usage.md).
    metrics_pipeline_labels: bool = Field(
        default=False, description="Usage counters per pipeline (a pipeline_id label) besides per tenant: one series "
        "per pipeline ever metered, so off by default"
    )

    # spark-submit as the worker runs it.
    spark_submit: str | None = Field(default=None, description="spark-submit path; defaults to the one beside Python")
    spark_master: str = "local[*]"
    spark_conf: dict[str, str] = Field(default_factory=dict)
    spark_driver_memory: str | None = "1g"
    spark_executor_memory: str | None = None
    spark_python: str | None = Field(
        default=None, description="Python of the job's driver and executors (with Inlet's dependencies, at this path "
        "on every Spark host); defaults to the worker's own"
    )
    run_engine: Literal["warm", "submit"] = Field(
        default="warm", description="warm: each worker process keeps a resident Spark driver and runs run after run "
        "on it; submit: a new spark-submit (JVM, session, Python workers) for every run"
    )
    engine_max_runs: int = Field(default=500, ge=1, description="A warm engine is replaced after this many runs")
    engine_max_memory_mb: int = Field(
        default=2048, ge=256, description="A warm engine is replaced after a run that leaves its processes holding more"
    )
    run_memory_mb: int | None = Field(
        default=2560, ge=256, description="What a run's Spark processes (the warm engine's or the run's spark-submit: the "
        "JVM, the driver's Python and its workers) may hold while it runs, sampled every 0.5 s; past it the run is "
        "killed and fails as resource_exhausted (not retried), and the next run gets a new engine. With the worker's own "
        "process, its tree stays under 3 GiB. Unset: no bound"
    )
    connection_tests_per_tenant: int = Field(
        default=2, ge=1, description="Connection tests one tenant may have in flight in an API process; past it a "
        "429 with Retry-After (api/connections/test_slots.py)"
    )
    kafka_max_fetch_bytes: int = Field(
        default=64 << 20, ge=1 << 20, description="The ceiling of the librdkafka size settings a connection's options "
        "may set (fetch.max.bytes, max.partition.fetch.bytes, message.max.bytes and socket buffers; twice it for "
        "receive.message.max.bytes; queued.max.messages.kbytes in kB): checked when a connection is written and "
        "before each run (api/kafka/config.py)"
    )
    run_max_record_bytes: int = Field(
        default=32 << 20, gt=0, description="A record's key, value and headers once decompressed; a larger one fails "
        "its run as record_too_large, naming its partition and offset (spark_jobs/read_budget.py)"
    )
    run_max_batch_bytes: int = Field(
        default=64 << 20, gt=0, description="An Arrow batch of records a task reads, once decompressed: what one task "
        "holds of its records at a time"
    )
    spark_merge_min_mb: int | None = Field(
        default=None, ge=0, description="A keyed table of this many MB or more, on a disk "
        "the Spark cluster shares, is merged by delta-spark on the run's Spark instead of delta-rs on the worker; "
        "unset: never (docs/keyed-tables.md)"
    )
    spark_compact_min_mb: int | None = Field(
        default=None, ge=0, description="A compaction that rewrites this many MB of small files or more runs as a "
        "Spark job of its own (spark-submit with the settings above), each bin a task, instead of in the maintenance "
        "worker; unset: never (docs/maintenance.md)"
    )
    spark_compact_timeout_s: float = Field(
        default=3600.0, gt=0, description="A compaction job on Spark is killed after this long (and its files deleted)")
    engine_idle_s: float = Field(
        default=600.0, gt=0, description="A warm engine stops after this long without a run (giving back its executors)"
    )

    # Delta table maintenance (docs/maintenance.md): the vacuum retention's floor, and the maintenance tasks' lease.
    maintenance_min_retention_hours: float = Field(
        default=168.0, ge=0, description="The shortest vacuum retention a pipeline may set (a week)")
    maintenance_allow_short_retention: bool = Field(
        default=False, description="Let pipelines set a vacuum retention under the minimum (tests, benches)")
    maintenance_lease_s: float = Field(
        default=600.0, gt=5, description="A maintenance task's hold on its table, renewed while it runs")

    # Webhooks (docs/webhooks.md): who may be called, and how a delivery is retried.
    webhook_allowed_hosts: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="Hosts webhooks may be sent to, comma-separated; *.example.com admits its "
        "subdomains; empty: any host"
    )
    webhook_timeout_s: float = Field(default=10.0, gt=0, description="How long one delivery attempt may take (connect: 5 s at most)")
    webhook_retry_base_s: float = Field(default=30.0, gt=0, description="Wait after a delivery's first failed attempt (doubling)")
    webhook_retry_max_s: float = Field(default=3600.0, gt=0, description="Longest wait between two attempts")
    webhook_retry_for_s: float = Field(default=86_400.0, gt=0, description="A delivery not made this long after its event fails")

    # Egress (docs/security.md): the addresses Inlet may connect to for a tenant (webhooks, schema
    # registries, OAuth token endpoints, Kafka brokers). Allow wins over deny.
    egress_deny: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: list(DEFAULT_DENY), description="CIDRs no tenant-supplied address may be in, "
        "comma-separated; defaults to loopback, link-local (cloud metadata), unspecified, multicast, broadcast and "
        "the cloud metadata addresses, IPv4-mapped forms included")
    egress_private_ranges: Literal["allow", "deny"] = Field(
        default="allow", description="Whether Kafka brokers, schema registries and token endpoints may be on the "
        "private ranges (10/8, 172.16/12, 192.168/16, 100.64/10, fc00::/7). allow: a deployment whose Kafka is on a "
        "private network needs nothing; deny: they join INLET_EGRESS_DENY (INLET_EGRESS_ALLOW still opens a range). "
        "Webhooks are denied them by INLET_WEBHOOK_EGRESS_DENY either way")
    egress_allow: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="CIDRs opened despite the deny lists (e.g. 127.0.0.0/8,::1/128 for a "
        "stack on one machine)")
    egress_lookup_s: float = Field(
        default=2.0, ge=0, description="How long the names of one definition (a connection, a webhook) may take to "
        "resolve for the definition-time check; a name not resolved by then is accepted and checked at every "
        "connection; 0: names are checked at connections only")
    webhook_egress_deny: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: list(PRIVATE_RANGES), description="CIDRs denied to webhooks besides "
        "INLET_EGRESS_DENY; defaults to the private ranges (a webhook's delivery log would map them); empty: none")

    # Retention of Inlet's own data (docs/retention.md): how long each kind of history is kept, in days
    # (fractions allowed); 0 keeps it forever. Pruned by the scheduler in short batches.
    retention_runs_days: float = Field(
        default=90.0, description="Ended runs finished longer ago are deleted with their ranges and logs, except each "
        "pipeline's newest run and the runs its offsets still point to (docs/retention.md); 0: kept forever")
    retention_continuous_runs_days: float = Field(
        default=2.0, description="A continuous pipeline's ended runs (a run a second is 86,400 a day) are deleted this "
        "long after they finished, under the same exceptions as other runs; 0: as long as other runs")
    retention_run_logs_days: float = Field(
        default=14.0, description="Logs of ended runs are deleted this long after the run finished (the run stays); "
        "0: kept as long as the run")
    retention_audit_days: float = Field(
        default=365.0, description="Audit events older than this are deleted (the offsets' history with them); "
        "0: kept forever")
    retention_webhooks_days: float = Field(
        default=30.0, description="Webhook deliveries that succeeded or gave up are deleted this long after they "
        "ended, and events with no delivery left once this old; a delivery still due is never deleted; 0: kept forever")
    retention_idempotency_days: float = Field(
        default=1.0, description="How long an Idempotency-Key replays its first response; after that its record is "
        "deleted and the same key makes a new request; 0: kept forever")
    retention_interval_s: float = Field(default=600.0, gt=0, description="How often a pruning pass starts")
    retention_batch_size: int = Field(
        default=1000, ge=1, le=50_000, description="Rows deleted per transaction: each batch is short, and skips "
        "rows another transaction holds")
    retention_budget_s: float = Field(
        default=1.0, gt=0, description="Time a scheduler tick may spend pruning; a pass with more to do goes on at "
        "the next tick")

    # Requests.
    max_body_bytes: int = 1_048_576
    page_limit_max: int = 500

    @field_validator("cors_origins", "webhook_allowed_hosts", "forwarded_allow_ips", "egress_deny", "egress_allow",
                     "webhook_egress_deny", mode="before")
    @classmethod
    def _split_lists(cls, value: object) -> object:
        if isinstance(value, str) and not value.strip().startswith("["):
            return [item.strip() for item in value.split(",") if item.strip()]
        return value

    @field_validator("admin_token")
    @classmethod
    def _strong_operator_token(cls, token: SecretStr | None) -> SecretStr | None:
        if token is not None and len(token.get_secret_value()) < 32:
            raise ValueError("INLET_ADMIN_TOKEN must be 32 characters or more (`openssl rand -hex 16` makes one): it "
                             "creates tenants and their admin keys")
        return token

    @field_validator("webhook_allowed_hosts")
    @classmethod
    def _hosts(cls, hosts: list[str]) -> list[str]:
        return [host.lower().rstrip(".") for host in hosts]

    @field_validator("forwarded_allow_ips")
    @classmethod
    def _proxies(cls, entries: list[str]) -> list[str]:
        for entry in entries:
            if entry != "*":
                try:
                    ipaddress.ip_network(entry, strict=False)
                except ValueError:
                    raise ValueError(f"INLET_FORWARDED_ALLOW_IPS: {entry!r} is not an address, a CIDR or *") from None
        return entries

    @field_validator("egress_deny", "egress_allow", "webhook_egress_deny")
    @classmethod
    def _cidrs(cls, entries: list[str], info: ValidationInfo) -> list[str]:
        try:
            return [str(net) for net in networks(entries)]
        except ValueError as exc:
            raise ValueError(f"INLET_{str(info.field_name).upper()}: {exc}") from None

    @field_validator(*RETENTIONS)
    @classmethod
    def _retention(cls, days: float, info: ValidationInfo) -> float:
        if not math.isfinite(days) or not (days == 0 or days >= MIN_RETENTION_DAYS):
            raise ValueError(f"INLET_{str(info.field_name).upper()}: {days} days is not a retention; give 0 (keep "
                             f"forever) or at least {MIN_RETENTION_DAYS:g} day")
        return days

    @field_validator("storage_root")
    @classmethod
    def _supported_storage(cls, root: str | None) -> str | None:
        if root is not None and scheme_of(root) not in OBJECT_STORE_SCHEMES | {"file"}:
            raise ValueError(f"INLET_STORAGE_ROOT: {scheme_of(root)}:// is not supported; give a path, s3://, "
                             "abfss://, az:// or gs://")
        return root

    @model_validator(mode="after")
    def _validate_backend(self) -> Settings:
        if self.secret_backend == "vault" and not self.vault_addr:
            raise ValueError("INLET_VAULT_ADDR is required when INLET_SECRET_BACKEND=vault")
        self.resolved_storage_options  # noqa: B018 -- a store no process could reach fails here, at start-up
        return self

    @property
    def tenant_egress_deny(self) -> list[str]:
        """What every tenant-supplied address is denied: ``egress_deny``, and the private ranges where they are."""
        private = list(PRIVATE_RANGES) if self.egress_private_ranges == "deny" else []
        return [*self.egress_deny, *(net for net in private if net not in self.egress_deny)]

    @property
    def egress_policy(self) -> EgressPolicy:
        """The policy of every tenant-supplied address but webhooks'."""
        return EgressPolicy.of(self.tenant_egress_deny, self.egress_allow, definition_lookup_s=self.egress_lookup_s)

    @property
    def webhook_egress_policy(self) -> EgressPolicy:
        return self.egress_policy.denying(self.webhook_egress_deny)

    @property
    def resolved_database_url(self) -> str:
        return self.database_url or f"sqlite:///{(self.data_dir / 'inlet.db').resolve()}"

    @property
    def resolved_storage_root(self) -> str:
        return self.storage_root or str((self.data_dir / "storage").resolve())

    @property
    def resolved_storage_options(self) -> dict[str, str]:
        """What every process of a job needs to reach the tables: for object storage, the provider's
        environment with ``storage_options`` over it; nothing for local storage."""
        return storage_options(self.resolved_storage_root, os.environ, self.storage_options)

    @property
    def resolved_secret_key_file(self) -> Path:
        return self.secret_key_file or self.data_dir / "secret.key"

    @property
    def resolved_work_dir(self) -> Path:
        return self.work_dir or self.data_dir / "work"


@lru_cache
def get_settings() -> Settings:
    return Settings()
