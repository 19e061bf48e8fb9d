"""Delta tables as a run writes them: what every Delta target (``spark_jobs.targets``) shares.

- ``files``: the Parquet files tasks write straight into a table folder and report (``FileSet``),
  the ``inlet_delta`` data source that writes a DataFrame's rows so, and deleting what a run wrote;
- ``direct_write``: tasks that read Kafka chunks, decode and write their files themselves;
- ``replace``: replace mode, the files that hold replaced ranges and the rows they keep;
- ``changes``: a keyed table's changes (``targets.delta_upsert``): records as the row each sets or
  deletes per key, and the latest per key (or per key and sequence);
- ``history``: an SCD type 2 keyed table: every change a version, closed by the key's next sequence,
  in one MERGE;
- ``commit``: the driver's one commit per table, tagged with the run's app transaction; a keyed
  table's one MERGE (``merge_changes``).

Every write checks first what the table's protocol asks of its writers (``spark_jobs.table_features``).

delta-rs writes the commits; the executors only ever write Parquet files.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa

from spark_jobs.storage import Store

if TYPE_CHECKING:
    from deltalake import DeltaTable

    from spark_jobs.table_features import Operation


@dataclass(frozen=True)
class Table:
    """A Delta table a run writes: where it is, the options that reach it, how it is partitioned."""

    store: Store
    uri: str
    partition_by: tuple[str, ...] = ()

    def exists(self) -> bool:
        return self.store.is_delta_table(self.uri)

    def delta(self) -> DeltaTable:
        return self.store.delta_table(self.uri)

    def require(self, operation: Operation) -> None:
        """Refuse (``table_unsupported``) ``operation`` if the table exists and asks for what it cannot
        honour (``table_features``)."""
        from spark_jobs.table_features import require

        if self.exists():
            require(self.delta(), operation, self.uri)

    def columns(self) -> pa.Schema | None:
        """The table's columns; None where there is no table yet."""
        return pa.schema(self.delta().schema().to_arrow()) if self.exists() else None
