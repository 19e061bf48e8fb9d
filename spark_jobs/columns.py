"""The columns Inlet writes beside a record's decoded fields, by name.

A json source's schema may not reuse any of them: the job refuses such a schema (``invalid_spec``),
and the API refuses it earlier, when the pipeline is defined. Plain constants, so that the API can
check without importing Spark.
"""

from __future__ import annotations

RUN_ID = "_inlet_run_id"
QUARANTINE_REASON = "_inlet_quarantine_reason"
RAW_KEY = "_inlet_raw_key"
RAW_VALUE = "_inlet_raw_value"
# Set on the rows replace mode carries over from a table's existing files; never written to a table.
CARRIED = "_inlet_carried"
COORDINATES = ("topic", "partition", "offset")
METADATA = (*COORDINATES, "timestamp", "timestampType")
RESERVED = frozenset({"key", "value", *METADATA, "headers", RUN_ID, QUARANTINE_REASON, RAW_KEY, RAW_VALUE})
