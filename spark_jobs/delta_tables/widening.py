"""A table's columns widened by delta-spark, under the evolution policy ``widen``
(``formats.evolution.widenings`` finds them): Delta's type widening (the ``typeWidening`` table
feature), which changes the column's type in the table's metadata and records the change in the
field's metadata (``delta.typeChanges``), so that readers read the older files' narrower values as
the wider type. No file is rewritten.

delta-rs 1.6 cannot write such a table, so the run's commit (and every later one) goes to delta-spark
(``table_features.writer_for``, ``delta_tables.spark_write``). Which readers read a widened table is
measured in tests/spark_jobs/test_evolution_runs.py and listed in docs/contracts.md.

The run's tasks write the wider type's files into the table's folder without it; its commit widens
the table (after the quarantine's commit, just before the main table's), as a new column is added
(``commit.evolve_schema``): readers may see a column widened one version early, never a row without
its column's type, and a run that fails before its commit leaves the table as it was.
``check_widening`` refuses, before the tasks write, a table delta-spark could not write once widened
(a VARIANT column, CHECK constraints, generated columns: ``table_features``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from spark_jobs.delta_tables import Table
from spark_jobs.delta_tables.spark_write import CONCURRENT
from spark_jobs.errors import JobError, storage_failure
from spark_jobs.table_features import Operation, TableFeatures

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from spark_jobs.formats.evolution import Widening

log = logging.getLogger("inlet.delta")


def check_widening(table: Table, operation: Operation, widenings: Sequence[Widening]) -> None:
    """Refuse (``schema_incompatible``) widenings after which no writer Inlet has could write
    ``operation`` to the table; before anything is written."""
    features = TableFeatures.of(table.delta())
    widened = replace(features, reader_version=3, writer_version=7,
                      reader_features=features.reader_features | {"typeWidening"},
                      writer_features=features.writer_features | {"typeWidening"})
    writer, why = widened.writer(operation, spark=True)
    if writer is None:
        raise JobError("schema_incompatible", f"{table.uri}: widening {widenings[0].path} would leave a table Inlet "
                                              f"cannot write ({why}); keep the type or write to a new path")


def widen_on_spark(spark: SparkSession, table: Table, widenings: Sequence[Widening]) -> None:
    """Each of ``widenings`` applied to ``table`` by delta-spark (type widening switched on first)."""
    from pyspark.sql.pandas.types import from_arrow_type

    name = "delta.`" + table.uri.replace("`", "``") + "`"
    try:
        spark.sql(f"ALTER TABLE {name} SET TBLPROPERTIES ('delta.enableTypeWidening' = 'true')")
        for widening in widenings:
            spark.sql(f"ALTER TABLE {name} ALTER COLUMN {widening.column} TYPE "
                      f"{from_arrow_type(widening.new_type).simpleString()}")
    except Exception as exc:  # noqa: BLE001 - delta-spark's and the store's errors, in words a run's error can carry
        text = str(exc).strip().splitlines()[0][:500] if str(exc).strip() else type(exc).__name__
        if CONCURRENT.search(f"{type(exc).__name__} {text}"):  # another writer's commit won: the run is retried
            raise JobError("target_conflict", f"widening {table.uri}'s columns met a concurrent commit: {text}") from None
        raise storage_failure(exc) or JobError("schema_incompatible", f"delta-spark could not widen {table.uri}'s "
                                                                      f"columns: {text}") from None
    log.info("delta-spark widened %s: %s", table.uri,
             ", ".join(f"{w.path} {w.table_type} -> {w.new_type}" for w in widenings))
