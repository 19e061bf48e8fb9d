"""Delta table maintenance, run by the maintenance worker (``inlet maintenance-worker``) with delta-rs
and pyarrow: compaction (``compaction``), then vacuum and checkpoints with log cleanup after the
table's properties are set (``upkeep``), each step on its own, and the table's health before and
after (``health``). ``preview`` says what ``maintain`` would do, doing nothing.

A compaction too large for one worker goes to the Spark cluster (``Offload``): a job of its own
(``spark_jobs/compact.py``) runs ``compact_table`` there, with each bin rewritten by a Spark task;
its plan and commit are the same as here. A table delta-rs cannot maintain (clustered, written only
by delta-spark, deletion vectors to purge) is maintained by delta-spark in such a job (``spark_jobs.spark_maintenance``).

Every step first checks that the table's features allow it (``table_features``): a table
another engine gave a feature Inlet cannot honour is reported, never written.

The control plane decides when (its policy, its counters, one task per table at a time); this package
only does. A step that fails, or that loses a race with a run (``conflict``: see
``spark_jobs.delta_log``), is reported and tried again by a later task; the others still run.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from spark_jobs.errors import classify
from spark_jobs.maintenance import compaction, upkeep
from spark_jobs.maintenance.health import TableHealth, health_of, inspect
from spark_jobs.storage import Store
from spark_jobs.table_features import SPARK_WRITES, TableFeatures, has_deletion_vectors, require

if TYPE_CHECKING:
    from deltalake import DeltaTable

StepOutcome = Literal["done", "nothing", "conflict", "failed"]


@dataclass(frozen=True)
class TablePolicy:
    """A pipeline's maintenance policy in the terms of the table."""

    target_file_bytes: int
    small_file_bytes: int
    z_order_by: tuple[str, ...] = ()
    vacuum_retention_hours: int = 168
    checkpoint_interval: int = 10
    log_retention_days: int = 30

    def properties(self) -> dict[str, str]:
        return upkeep.wanted_properties(checkpoint_interval=self.checkpoint_interval,
                                        log_retention_days=self.log_retention_days,
                                        vacuum_retention_hours=self.vacuum_retention_hours)


@dataclass(frozen=True)
class MaintenanceSteps:
    compact: bool = True
    vacuum: bool = True
    checkpoint: bool = True  # a checkpoint and log cleanup (the table's properties are set by every task)


@dataclass(frozen=True)
class CompactionResult:
    outcome: StepOutcome
    files_removed: int = 0
    files_added: int = 0
    bytes_removed: int = 0
    bytes_added: int = 0
    version: int | None = None  # of the commit
    seconds: float = 0.0
    error: str | None = None


@dataclass(frozen=True)
class VacuumResult:
    outcome: StepOutcome
    files_deleted: int = 0
    retention_hours: int = 0
    seconds: float = 0.0
    error: str | None = None


@dataclass(frozen=True)
class CheckpointResult:
    outcome: StepOutcome
    version: int | None = None
    log_entries_deleted: int = 0
    seconds: float = 0.0
    error: str | None = None


@dataclass(frozen=True)
class MaintenanceReport:
    """What one maintenance task did to a table (None: a step not asked for, or no table yet)."""

    properties_set: dict[str, str] = field(default_factory=dict)  # the table properties this task changed
    properties_error: str | None = None
    compaction: CompactionResult | None = None
    vacuum: VacuumResult | None = None
    checkpoint: CheckpointResult | None = None
    health: TableHealth | None = None  # after


@dataclass(frozen=True)
class SparkMaintenance:
    """What a table's maintenance by delta-spark did (``spark_jobs.spark_maintenance``): None for a step not asked for."""

    properties_set: dict[str, str] = field(default_factory=dict)
    properties_error: str | None = None
    compaction: CompactionResult | None = None
    vacuum: VacuumResult | None = None
    checkpoint: CheckpointResult | None = None


@dataclass(frozen=True)
class MaintenancePreview:
    """What ``maintain`` would do now."""

    files_to_compact: int = 0
    bytes_to_compact: int = 0
    bins: int = 0  # files compaction would write, at least
    files_to_vacuum: list[str] = field(default_factory=list)  # relative to the table root
    properties_to_set: dict[str, str] = field(default_factory=dict)
    health: TableHealth | None = None
    features: TableFeatures | None = None  # the table's protocol, and which of Inlet's operations it refuses


def preview(store: Store, uri: str, policy: TablePolicy, ops: MaintenanceSteps) -> MaintenancePreview:
    if not store.is_delta_table(uri):
        return MaintenancePreview()
    delta = store.delta_table(uri)
    features = TableFeatures.of(delta)
    allowed = features.allowed()
    compact, vacuum = ops.compact and allowed["compact"] is None, ops.vacuum and allowed["vacuum"] is None
    plan = compaction.plan_compaction(delta, target_bytes=policy.target_file_bytes, small_bytes=policy.small_file_bytes)
    return MaintenancePreview(
        files_to_compact=plan.files if compact else 0, bytes_to_compact=plan.bytes if compact else 0,
        bins=len(plan.bins) if compact else 0,
        files_to_vacuum=upkeep.vacuum(store, uri, delta, policy.vacuum_retention_hours, dry_run=True) if vacuum else [],
        properties_to_set=upkeep.properties_to_set(delta, policy.properties()) if allowed["properties"] is None else {},
        health=health_of(store, uri, delta, policy.small_file_bytes),
        features=features,
    )


Compactor = Callable[[Store, str, TablePolicy, dict[str, str]], CompactionResult]
SparkMaintainer = Callable[[Store, str, TablePolicy, MaintenanceSteps, dict[str, str]], SparkMaintenance]
Rewrite = Callable[[compaction.BinWriter, compaction.CompactionPlan], list[compaction.Rewritten]]


@dataclass(frozen=True)
class Offload:
    """Where a compaction of ``min_bytes`` or more of small files goes instead: ``compact``, a
    compaction job on the Spark cluster (the worker's ``worker.launch.compaction``). And where a table
    delta-spark maintains goes (``wants_delta_spark``: clustered, only delta-spark writes it,
    deletion vectors to purge): ``delta_spark``, a job of delta-spark's OPTIMIZE and VACUUM there."""

    min_bytes: int
    compact: Compactor
    delta_spark: SparkMaintainer | None = None


def maintain(store: Store, uri: str, policy: TablePolicy, ops: MaintenanceSteps, *,
             notes: dict[str, str] | None = None, offload: Offload | None = None) -> MaintenanceReport:
    """The table's properties first (so this task's own commits follow them), then the asked steps in
    order: compaction (by ``offload`` when its plan holds that many bytes), vacuum, checkpoint; then
    the health."""
    if not store.is_delta_table(uri):
        return MaintenanceReport()
    if offload is not None and offload.delta_spark is not None and _wants_delta_spark(store, uri):
        try:
            done = offload.delta_spark(store, uri, policy, ops, notes or {})
        except Exception as exc:  # noqa: BLE001 - no job started (no JVM, a full disk): reported, tried again later
            done = SparkMaintenance(compaction=CompactionResult("failed", error=_failure(exc)) if ops.compact else None)
        return MaintenanceReport(properties_set=done.properties_set, properties_error=done.properties_error,
                                 compaction=done.compaction, vacuum=done.vacuum, checkpoint=done.checkpoint,
                                 health=inspect(store, uri, policy.small_file_bytes))
    properties: dict[str, str] = {}
    unset: str | None = None
    try:
        delta = store.delta_table(uri)
        require(delta, "properties", uri)
        properties = upkeep.set_properties(delta, policy.properties())
    except Exception as exc:  # noqa: BLE001 - reported; the next task sets them
        unset = _failure(exc)
    return MaintenanceReport(
        properties_set=properties, properties_error=unset,
        compaction=_compaction(store, uri, policy, notes or {}, offload) if ops.compact else None,
        vacuum=_vacuum(store, uri, policy) if ops.vacuum else None,
        checkpoint=_checkpoint(store, uri) if ops.checkpoint else None,
        health=inspect(store, uri, policy.small_file_bytes),
    )


def _wants_delta_spark(store: Store, uri: str) -> bool:
    try:
        return wants_delta_spark(store.delta_table(uri), uri)
    except Exception:  # noqa: BLE001 - the table unread: delta-rs's steps report why
        return False


def wants_delta_spark(delta: DeltaTable, uri: str) -> bool:
    """Whether ``delta``'s maintenance goes to delta-spark (``spark_jobs.spark_maintenance``): delta-rs
    cannot compact it (its features: clustering among them) and delta-spark can, or some of its files
    carry deletion vectors to purge, which delta-rs's compaction leaves as they are."""
    if "://" in uri and not uri.startswith("file://"):
        return False  # Inlet gives Spark no object store's connector
    features = TableFeatures.of(delta)
    if features.refusal("compact") is not None:
        return features.writer("compact", spark=True)[0] == "delta-spark"
    return features.features <= SPARK_WRITES and bool(has_deletion_vectors(delta))


def _failure(exc: BaseException) -> str:
    error = classify(exc)
    return f"{error.kind}: {error.message}"[:500]


def _compaction(store: Store, uri: str, policy: TablePolicy, notes: dict[str, str],
                offload: Offload | None) -> CompactionResult:
    delta: DeltaTable | None = None
    if offload is not None:
        try:
            delta = store.delta_table(uri)
            plan = compaction.plan_compaction(delta, target_bytes=policy.target_file_bytes,
                                              small_bytes=policy.small_file_bytes)
        except Exception:  # noqa: BLE001 - compact_table, reading the table again, reports it
            delta, plan = None, None
        if plan is not None and plan.bins and plan.bytes >= offload.min_bytes:  # the job plans again, as the table then is
            try:
                return offload.compact(store, uri, policy, notes)
            except Exception as exc:  # noqa: BLE001 - no job started (no JVM, a full disk): reported, tried again later
                return CompactionResult("failed", error=_failure(exc))
    return compact_table(store, uri, policy, notes, delta=delta)


def compact_table(store: Store, uri: str, policy: TablePolicy, notes: dict[str, str], *,
                  rewrite: Rewrite = compaction.rewrite, token: str | None = None,
                  delta: DeltaTable | None = None) -> CompactionResult:
    """The table's small files planned (on ``delta``, the table as just read, if given), rewritten by
    ``rewrite`` (in this process, or by Spark tasks: ``spark_jobs/compact.py``) into files named for
    ``token`` (a new one by default), and committed in one commit from the planned snapshot; never raises."""
    from deltalake.exceptions import CommitFailedError

    began = time.monotonic()
    written: list[compaction.Rewritten] = []
    try:
        delta = delta or store.delta_table(uri)
        require(delta, "compact", uri)
        plan = compaction.plan_compaction(delta, target_bytes=policy.target_file_bytes,
                                          small_bytes=policy.small_file_bytes)
        if not plan.bins:
            return CompactionResult("nothing", seconds=round(time.monotonic() - began, 3))
        writer = compaction.BinWriter.of(store, uri, delta, target_bytes=policy.target_file_bytes,
                                         z_order_by=policy.z_order_by, token=token or uuid.uuid4().hex[:12])
        written = rewrite(writer, plan)
        version = compaction.commit(delta, plan, written, {**notes, compaction.TOKEN_KEY: writer.token})
    except CommitFailedError as exc:  # a run rewrote or removed some of its files first: tried again later
        compaction.discard(store, uri, written)
        return CompactionResult("conflict", seconds=round(time.monotonic() - began, 3), error=str(exc).splitlines()[0][:500])
    except Exception as exc:  # noqa: BLE001 - reported on the table's record; the next task tries again
        compaction.discard(store, uri, written)
        return CompactionResult("failed", seconds=round(time.monotonic() - began, 3), error=_failure(exc))
    return CompactionResult("done", files_removed=plan.files, files_added=len(written), bytes_removed=plan.bytes,
                            bytes_added=sum(w.size for w in written), version=version,
                            seconds=round(time.monotonic() - began, 3))


def _vacuum(store: Store, uri: str, policy: TablePolicy) -> VacuumResult:
    began = time.monotonic()
    hours = policy.vacuum_retention_hours
    try:
        deleted = upkeep.vacuum(store, uri, store.delta_table(uri), hours, dry_run=False)
    except Exception as exc:  # noqa: BLE001 - as above
        return VacuumResult("failed", retention_hours=hours, seconds=round(time.monotonic() - began, 3), error=_failure(exc))
    return VacuumResult("done" if deleted else "nothing", files_deleted=len(deleted), retention_hours=hours,
                  seconds=round(time.monotonic() - began, 3))


def _checkpoint(store: Store, uri: str) -> CheckpointResult:
    began = time.monotonic()
    try:
        delta = store.delta_table(uri)
        require(delta, "checkpoint", uri)
        version, deleted = upkeep.checkpoint(store, uri, delta)
    except Exception as exc:  # noqa: BLE001 - as above
        return CheckpointResult("failed", seconds=round(time.monotonic() - began, 3), error=_failure(exc))
    return CheckpointResult("done", version=version, log_entries_deleted=deleted, seconds=round(time.monotonic() - began, 3))


__all__ = ["CheckpointResult", "CompactionResult", "Compactor", "MaintenancePreview", "MaintenanceReport",
           "MaintenanceSteps", "Offload", "SparkMaintainer", "SparkMaintenance", "StepOutcome", "TableHealth", "TablePolicy", "VacuumResult", "compact_table",
           "inspect", "maintain", "preview", "wants_delta_spark"]
