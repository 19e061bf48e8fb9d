"""A compaction offloaded to the Spark cluster, for tables past what one maintenance worker rewrites
(docs/performance.md, "Where delta-rs on the driver stops being enough"): what the maintenance worker
and the job (``spark_jobs/compact.py``) say to each other. No Spark here: the worker imports it.

``CompactionJob`` is what the worker sends the job in a 0600 file (Inlet's compaction, or the
table's maintenance by delta-spark: ``spark_maintenance``), the store's options with it:
never in argv or Spark's conf. The job writes the ``CompactionResult`` back as JSON. Once the job has
ended the worker settles it from the table (``CompactionJob.settle``): its stray files deleted, and
the outcome of a job that left no result read from the log.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any

from spark_jobs.delta_log import commit_actions
from spark_jobs.maintenance import (
    CheckpointResult,
    CompactionResult,
    MaintenanceSteps,
    SparkMaintenance,
    TablePolicy,
    VacuumResult,
)
from spark_jobs.maintenance.compaction import TOKEN_KEY, file_prefix
from spark_jobs.spec import secrets_in
from spark_jobs.storage import Store


@dataclass(frozen=True)
class CompactionJob:
    uri: str
    store: Store
    policy: TablePolicy
    notes: dict[str, str] = field(default_factory=dict)
    token: str = field(default_factory=lambda: uuid.uuid4().hex[:12])  # names its files and marks its commit
    since: int = -1  # the table's version when the job was sent: its commit, if any, comes after
    # delta-spark: the table's maintenance by delta-spark (``spark_maintenance``), these steps; else Inlet's compaction.
    delta_spark: MaintenanceSteps | None = None

    def to_json(self) -> str:
        return json.dumps({"uri": self.uri, "storage_options": dict(self.store.options), "policy": asdict(self.policy),
                           "notes": self.notes, "token": self.token, "since": self.since,
                           "delta_spark": asdict(self.delta_spark) if self.delta_spark else None})

    @classmethod
    def from_json(cls, raw: str | bytes) -> CompactionJob:
        data = json.loads(raw)
        policy = {**data["policy"], "z_order_by": tuple(data["policy"]["z_order_by"])}
        steps = MaintenanceSteps(**data["delta_spark"]) if data.get("delta_spark") else None
        return cls(data["uri"], Store(data["storage_options"]), TablePolicy(**policy), data["notes"], data["token"],
                   data["since"], steps)

    def secret_values(self) -> list[str]:
        """What must never show in the job's output: the store's credentials (``spec.secrets_in``)."""
        return secrets_in([self.store.options])

    def settle(self, result: CompactionResult | None, reason: str) -> CompactionResult:
        """Once the job's processes are gone: every file named for the job that its commit did not add
        is deleted (all of a job that did not commit; a retried task's first attempt's), and its
        outcome is ``result``, or, for a job that ended without one (killed, crashed), read from the
        table: ``done`` with its commit's counts if the commit landed, else ``failed`` with ``reason``.
        Nothing is deleted while the table cannot be read, or when the job says it committed and its
        commit is not found."""
        try:
            found = self._commit()
        except Exception:  # noqa: BLE001 - the table unread: nothing is deleted, vacuum removes strays later
            return result or CompactionResult("failed", error=reason[:500])
        if found is None and result is not None and result.outcome == "done":
            return result
        added = {a["path"].rsplit("/", 1)[-1] for a in found.adds} if found is not None else set()
        self.store.delete_files_named(self.uri, file_prefix(self.token), keep=added)
        if result is not None:
            return result
        if found is None:
            return CompactionResult("failed", error=reason[:500])
        return CompactionResult("done", files_removed=len(found.removes), files_added=len(found.adds),
                                bytes_removed=sum(int(r.get("size") or 0) for r in found.removes),
                                bytes_added=sum(int(a["size"]) for a in found.adds), version=found.version)

    def _commit(self) -> _Commit | None:
        """The job's commit, if it landed: the one of the table's commits after ``since`` whose
        metadata carries the job's token (``compaction.TOKEN_KEY``)."""
        if not self.store.is_delta_table(self.uri):
            return None
        for version in range(self.since + 1, self.store.delta_table(self.uri).version() + 1):
            try:
                actions = commit_actions(self.store, self.uri, version)
            except FileNotFoundError:  # its log entry cleaned up: not a commit of the job's lifetime
                continue
            info: dict[str, Any] = next((a["commitInfo"] for a in actions if "commitInfo" in a), {})
            if info.get(TOKEN_KEY) == self.token or self.token in str(info.get("userMetadata") or ""):  # delta-spark's
                return _Commit(version, [a["add"] for a in actions if "add" in a],
                               [a["remove"] for a in actions if "remove" in a])
        return None


@dataclass(frozen=True)
class _Commit:
    version: int
    adds: list[dict[str, Any]]
    removes: list[dict[str, Any]]


def result_to_json(result: CompactionResult | SparkMaintenance) -> str:
    return json.dumps(asdict(result))


def result_from_json(raw: str | bytes) -> CompactionResult:
    return CompactionResult(**json.loads(raw))


def spark_result_from_json(raw: str | bytes) -> SparkMaintenance:
    data = json.loads(raw)
    return SparkMaintenance(
        properties_set=data["properties_set"], properties_error=data["properties_error"],
        compaction=CompactionResult(**data["compaction"]) if data["compaction"] else None,
        vacuum=VacuumResult(**data["vacuum"]) if data["vacuum"] else None,
        checkpoint=CheckpointResult(**data["checkpoint"]) if data["checkpoint"] else None)
