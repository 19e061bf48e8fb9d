"""The columns Inlet writes beside a record's decoded fields, by name.

A json source's schema may not reuse any of them: the job refuses such a schema (``invalid_spec``),
and the API refuses it earlier, when the pipeline is defined. Plain constants, so that the API can
check without importing Spark.
"""

from __future__ import annotations

RUN_ID = "_inlet_run_id"
QUARANTINE_REASON = "_inlet_quarantine_reason"
# A keyed table's (target.mode upsert): the sequence of the change a row holds, and whether it was a delete.
# Reserved in such a table's schema only.
SEQUENCE = "_inlet_sequence"
DELETED = "_inlet_deleted"
KEYED = frozenset({SEQUENCE, DELETED})
COORDINATES = ("topic", "partition", "offset")
METADATA = (*COORDINATES, "timestamp", "timestampType")
# With two names of Inlet's own kept back for the record as read beside decoded columns.
RESERVED = frozenset({"key", "value", *METADATA, "headers", RUN_ID, QUARANTINE_REASON, "_inlet_raw_key", "_inlet_raw_value"})
