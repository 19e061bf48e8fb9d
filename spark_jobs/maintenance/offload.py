"""A compaction offloaded to the Spark cluster, for tables past what one maintenance worker rewrites
(docs/performance.md, "Where delta-rs on the driver stops being enough"): what the maintenance worker
and the job (``spark_jobs/compact.py``) say to each other. No Spark here: the worker imports it.

``CompactionJob`` is what the worker sends the job in a 0600 file, the store's options with it:
never in argv or Spark's conf. The job writes the ``CompactionResult`` back as JSON. A job that
ended without one is settled from the table (``CompactionJob.settle_lost``).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import asdict, dataclass, field

from spark_jobs.maintenance import CompactionResult, TablePolicy
from spark_jobs.maintenance.compaction import file_prefix
from spark_jobs.maintenance.health import live_files
from spark_jobs.storage import Store


@dataclass(frozen=True)
class CompactionJob:
    uri: str
    store: Store
    policy: TablePolicy
    notes: dict[str, str] = field(default_factory=dict)
    token: str = field(default_factory=lambda: uuid.uuid4().hex[:12])  # names its files: ``compaction.file_prefix``

    def to_json(self) -> str:
        return json.dumps({"uri": self.uri, "storage_options": dict(self.store.options), "policy": asdict(self.policy),
                           "notes": self.notes, "token": self.token})

    @classmethod
    def from_json(cls, raw: str | bytes) -> CompactionJob:
        data = json.loads(raw)
        policy = {**data["policy"], "z_order_by": tuple(data["policy"]["z_order_by"])}
        return cls(data["uri"], Store(data["storage_options"]), TablePolicy(**policy), data["notes"], data["token"])

    def secret_values(self) -> list[str]:
        """What must never show in the job's output: every storage option's value."""
        return [v for v in self.store.options.values() if v]

    def settle_lost(self, reason: str) -> CompactionResult:
        """The outcome of a job that ended without its result (killed, crashed): ``done`` if its commit
        landed (the table holds its files; what it removed is not known), else ``failed`` with
        ``reason``, and every file it wrote deleted. Only once the job's processes are gone."""
        prefix = file_prefix(self.token)
        if self.store.is_delta_table(self.uri):
            ours = [f for f in live_files(self.store.delta_table(self.uri)) if f.path.rsplit("/", 1)[-1].startswith(prefix)]
            if ours:
                return CompactionResult("done", files_added=len(ours), bytes_added=sum(f.size for f in ours))
        self.store.delete_files_named(self.uri, prefix)
        return CompactionResult("failed", error=reason[:500])


def result_to_json(result: CompactionResult) -> str:
    return json.dumps(asdict(result))


def result_from_json(raw: str | bytes) -> CompactionResult:
    return CompactionResult(**json.loads(raw))
