"""How Inlet's Parquet files lay out their columns: a run's files (``delta_tables.files``, written
for speed, snappy) and compaction's (``maintenance.compaction``, written for size, zstd).

Kafka's ``offset`` and ``timestamp`` are unique per record and ascend within a file's partitions:
delta-encoded they take a few bits a row, where a dictionary of them only adds a page. A run's files
keep a dictionary for text only, where values repeat (names, statuses, the topic). For numbers, times
and bytes, values that rarely repeat, a dictionary cost 0.2-0.3 us a row and made the files larger:
1M orders from the bench wrote 0.40 against 0.63 us a row, in files half the size (docs/performance.md).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

DELTA_ENCODED = ("offset", "timestamp")


def leaves(schema: pa.Schema) -> list[pq.ColumnSchema]:
    """The Parquet leaf columns of ``schema`` (a nested column's fields, a list's element ...)."""
    buffer = pa.BufferOutputStream()
    pq.write_table(schema.empty_table(), buffer)
    parquet = pq.ParquetFile(pa.BufferReader(buffer.getvalue())).schema
    return [parquet.column(i) for i in range(len(parquet))]


def delta_encoded(schema: pa.Schema) -> list[str]:
    """The columns of ``DELTA_ENCODED`` that ``schema`` has as integers or times."""
    return [name for name in DELTA_ENCODED if name in schema.names
            and (pa.types.is_int32(t := schema.field(name).type) or pa.types.is_int64(t) or pa.types.is_timestamp(t))]


def run_file_options(schema: pa.Schema) -> dict[str, Any]:
    """``ParquetWriter``'s options for a run's files of ``schema``."""
    delta = delta_encoded(schema)
    text = [leaf.path for leaf in leaves(schema) if leaf.logical_type.type == "STRING" and leaf.path not in delta]
    return {"compression": "snappy", "use_dictionary": text,
            "column_encoding": dict.fromkeys(delta, "DELTA_BINARY_PACKED")}
