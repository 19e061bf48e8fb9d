"""The columns Inlet writes beside a record's decoded fields, by name.

A json source's schema may not reuse any of them, nor any name starting with ``_inlet_`` (``reserved_in``):
the job refuses such a schema (``invalid_spec``), and the API refuses it earlier, when the pipeline is
defined. Plain constants, so that the API can
check without importing Spark.
"""

from __future__ import annotations

from collections.abc import Iterable

RUN_ID = "_inlet_run_id"
QUARANTINE_REASON = "_inlet_quarantine_reason"
# A keyed table's (target.mode upsert): the sequence of the change a row holds, and whether it was a delete.
SEQUENCE = "_inlet_sequence"
DELETED = "_inlet_deleted"
# A keyed table with soft deletes (target.deletes soft): when its key was deleted (the delete record's Kafka
# timestamp), and the sequence of the change whose values the row holds (a deleted key's last values).
DELETED_AT = "_inlet_deleted_at"
VALUES_SEQUENCE = "_inlet_values_sequence"
# An SCD type 2 keyed table's (target.scd_type 2): a version of a key holds from the sequence of the change
# that set it (VALID_FROM) to that of the key's next change (VALID_TO, null while it is the latest).
VALID_FROM = "_inlet_valid_from"
VALID_TO = "_inlet_valid_to"
CURRENT = "_inlet_current"
COORDINATES = ("topic", "partition", "offset")
METADATA = (*COORDINATES, "timestamp", "timestampType")
# With two names of Inlet's own kept back for the record as read beside decoded columns.
RESERVED = frozenset({"key", "value", *METADATA, "headers", RUN_ID, QUARANTINE_REASON, "_inlet_raw_key", "_inlet_raw_value"})
# A json schema's column of this name, of type VARIANT, is the record's whole value (``formats.json_values``):
# the one reserved name a json schema may take.
WHOLE_VALUE = "value"
# Inlet's own namespace: every column Inlet adds, and the staging columns of its MERGEs, start with it.
INLET_PREFIX = "_inlet_"


def inlet_named(names: Iterable[str]) -> list[str]:
    """The names among ``names`` in Inlet's own namespace, in any case (a Delta table's column names are
    case-insensitive): what no row's field may be called."""
    return sorted(name for name in names if name.lower().startswith(INLET_PREFIX))


def reserved_in(names: Iterable[str]) -> list[str]:
    """The names among ``names`` a decoded column of an appended row may not take: Inlet's columns
    beside it, and any name in Inlet's own namespace."""
    names = list(names)
    return sorted({*RESERVED.intersection(names), *inlet_named(names)})
