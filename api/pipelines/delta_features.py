"""The Delta features a pipeline's table is created with (``target.table_features``): deletion
vectors and liquid clustering, which Databricks users turn on for their own tables. Inlet creates
such a table through delta-spark on the run's Spark at its first run (``spark_jobs.delta_tables.create``);
a clustered table's commits go to delta-spark from then on (docs/maintenance.md, "Tables other engines
write"). A table that exists keeps the features it has: these apply when Inlet creates it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from pydantic import ConfigDict, Field

from api.core.errors import field_error
from api.pipelines.as_written import AsWritten

if TYPE_CHECKING:
    from api.pipelines.schemas import DeltaTarget

ClusterColumn = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")]


class DeltaTableFeatures(AsWritten):
    model_config = ConfigDict(extra="forbid")

    deletion_vectors: bool = Field(
        default=False,
        description="delta.enableDeletionVectors: another engine's DELETE, UPDATE or MERGE marks rows deleted "
                    "instead of rewriting their files (Databricks' default for new tables)")
    cluster_by: list[ClusterColumn] = Field(
        default_factory=list, max_length=4,
        description="Liquid clustering by these columns (instead of partition_by and z_order_by): the table's "
                    "OPTIMIZE clusters its rows by them. Mode append only")

    @property
    def any(self) -> bool:
        return self.deletion_vectors or bool(self.cluster_by)


def check_table_features(target: DeltaTarget) -> None:
    """What the features ask of the rest of the target: refused with the field named."""
    features = target.table_features
    if features.cluster_by:
        if target.partition_by:
            raise field_error("table_features.cluster_by", "a clustered table has no partitions: give partition_by "
                                                           "or table_features.cluster_by, not both")
        if target.maintenance.compaction.z_order_by:
            raise field_error("table_features.cluster_by", "a clustered table's OPTIMIZE orders its rows by "
                                                           "cluster_by: leave maintenance.compaction.z_order_by empty")
        if target.mode == "upsert":
            raise field_error("table_features.cluster_by", "a keyed table's MERGE is delta-rs's, which cannot write "
                                                           "a clustered table: cluster_by goes with mode append")
        if len(set(features.cluster_by)) != len(features.cluster_by):
            raise field_error("table_features.cluster_by", "cluster_by columns must not repeat")
    if features.deletion_vectors and target.mode == "upsert" and target.scd_type == 2:
        raise field_error("table_features.deletion_vectors", "an SCD type 2 table's MERGE cannot read through "
                                                             "deletion vectors: use scd_type 1, or leave them off")
