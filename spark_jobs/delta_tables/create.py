"""A table Inlet creates with Delta features its pipeline opted into (``spec.TableCreation``: deletion
vectors, liquid clustering), created by delta-spark on the run's Spark before the run's tasks write
into its folder (delta-spark creates no table where files already are):
delta-rs 1.6 cannot create a clustered table, nor write one (``table_features``), so a clustered
table's commits go to delta-spark from then on (``spark_write``); a table with deletion vectors only
is appended to and merged by delta-rs as any other.

The table is created empty, with the run's columns, partitions or clustering columns and properties,
in a commit of its own (``createIfNotExists``: a concurrent attempt's creation is no error); the run's
rows follow in the run's own commit, tagged with its txn as always. A run that fails between the two
leaves an empty table with the features asked for, which its retry writes.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import pyarrow as pa

from spark_jobs.errors import JobError, storage_failure

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from spark_jobs.delta_tables import Table
    from spark_jobs.spec import TableCreation

log = logging.getLogger("inlet.delta")


def create_on_spark(spark: SparkSession, table: Table, schema: pa.Schema, creation: TableCreation) -> bool:
    """Create ``table`` with ``schema``'s columns and ``creation``'s features unless it exists; whether
    this call created it."""
    from delta.tables import DeltaTable
    from pyspark.sql.pandas.types import from_arrow_type
    from pyspark.sql.types import StructField

    if table.exists():
        return False
    missing = sorted(set(creation.cluster_by) - set(schema.names))
    if missing:
        raise JobError("invalid_spec", f"{table.uri}: cluster_by names columns the rows do not have: {', '.join(missing)}")
    # Each column with its Arrow field's metadata (a keyed table's key marks: ``commit.key_marked``).
    columns = [StructField(f.name, from_arrow_type(f.type), f.nullable,
                           {k.decode(): v.decode() for k, v in (f.metadata or {}).items()}) for f in _plain(schema)]
    builder = DeltaTable.createIfNotExists(spark).location(table.uri).addColumns(columns)
    if creation.cluster_by:
        builder = builder.clusterBy(*creation.cluster_by)
    elif table.partition_by:
        builder = builder.partitionedBy(*table.partition_by)
    for key, value in creation.properties().items():
        builder = builder.property(key, value)
    try:
        builder.execute()
    except Exception as exc:  # noqa: BLE001 - delta-spark's and the store's errors, in a run's words
        text = str(exc).strip().splitlines()[0][:500] if str(exc).strip() else type(exc).__name__
        raise storage_failure(exc) or JobError("target_commit", f"delta-spark could not create {table.uri}: {text}") from None
    log.info("delta-spark created %s (%s)", table.uri, ", ".join(
        (["deletion vectors"] if creation.deletion_vectors else []) +
        ([f"clustered by {', '.join(creation.cluster_by)}"] if creation.cluster_by else [])))
    return True


def _plain(schema: pa.Schema) -> pa.Schema:
    """The column types Spark's Arrow conversion takes: large and view strings and binaries as plain ones."""
    def plain(t: pa.DataType) -> pa.DataType:
        if pa.types.is_large_string(t) or pa.types.is_string_view(t):
            return pa.string()
        if pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
            return pa.binary()
        if pa.types.is_struct(t):
            return pa.struct([f.with_type(plain(f.type)) for f in t])
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            return pa.list_(t.value_field.with_type(plain(t.value_type)))
        if pa.types.is_map(t):
            return pa.map_(plain(t.key_type), t.item_field.with_type(plain(t.item_type)))
        return t

    return pa.schema([f.with_type(plain(f.type)) for f in schema], metadata=schema.metadata)
