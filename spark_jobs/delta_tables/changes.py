"""A keyed table's changes (``target.mode`` upsert, ``targets.delta_upsert``): Kafka records as the row
each sets or deletes for its key, and the latest change per key. Arrow throughout; runs in the tasks.

A change has the table's columns: the row's (the pipeline's json schema, or for a registry format the
value subject's record, decoded by ``formats.wire`` as append tables decode it), ``_inlet_sequence``
(what orders the changes of a key), ``_inlet_deleted`` and ``_inlet_run_id``; a delete keeps only its
key columns, the others null. Per ``target.changes``:

- ``rows``: a value is the row. A tombstone (null value) deletes the key its Kafka key names: a JSON
  object holding the key columns, as Debezium and Kafka Connect's JsonConverter write keys, with or
  without the ``schema``/``payload`` wrapper, or a registry key format's record. With ``key_from`` kafka_key the Kafka key's UTF-8 text
  is the row's identity for every record, in the one key column (first in the table), which the
  value does not hold: the compacted topic's own key, as Tableflow's upsert tables take it.
- ``debezium``: a value is a Debezium envelope, with or without the wrapper (json), or the record
  Debezium's AvroConverter registers (``<topic>.Envelope``, the row its ``after`` record): op ``c``, ``u``, ``r``
  set the row to ``after``, ``d`` deletes the key ``before`` holds. Tombstones (Debezium writes one
  after each delete, for compaction) are skipped; other ops (``t`` truncate, ``m`` message) go to the
  quarantine table, as do records that are not envelopes of the row's schema.

The sequence is the record's offset, or the value's field ``sequence_by`` (a dotted path, into the
envelope for debezium: ``source.lsn``, ``ts_ms``): an integer, or a timestamp or date as microseconds
or days. A change without its key columns or its sequence goes to quarantine.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import DataType, LongType, StringType, StructField, StructType

from spark_jobs.columns import DELETED, DELETED_AT, INLET_PREFIX, RUN_ID, SEQUENCE, VALUES_SEQUENCE, inlet_named
from spark_jobs.decode import Framed, split_rows
from spark_jobs.errors import JobError

if TYPE_CHECKING:
    from spark_jobs.contract.rows import RowContract
    from spark_jobs.formats.json_values import JsonValues
    from spark_jobs.formats.wire import SubjectSchema

# Tie-breakers of a key's changes with equal sequences (the offset default: a key in two partitions),
# carried from the tasks to the driver's last pick, never into the table.
PARTITION, OFFSET = "_inlet_partition", "_inlet_offset"
HIDDEN = (PARTITION, OFFSET)
# Soft deletes: where the change whose values a change carries was read (its own for a row, the key's last
# row before it for a delete, null if none), the tie-breakers of its VALUES_SEQUENCE; never in the table.
VALUES_PARTITION, VALUES_OFFSET = "_inlet_values_partition", "_inlet_values_offset"
WRAPPER = "payload"  # Kafka Connect's JsonConverter with schemas.enable: {"schema": …, "payload": …}
UPSERT_OPS = ("c", "u", "r")
_ENVELOPE = ("before", "after", "op", WRAPPER)


class ChangeReader:
    """Reads a batch of Kafka records as changes (``read``); pickled to the tasks."""

    def __init__(self, rows: StructType | Framed, key: list[str], sequence_by: str | None, debezium: bool, time_zone: str,
                 key_from_kafka: bool = False, partition_by: tuple[str, ...] = (), soft_deletes: bool = False) -> None:
        """``rows``: the row's columns, a json pipeline's schema, or a registry format's subjects (``Framed``)
        whose value record is the row (for debezium, the envelope's ``after`` record). ``partition_by``: the
        table's partition columns, which must be the row's. ``soft_deletes``: a change carries
        ``_inlet_deleted_at`` (a delete's Kafka timestamp, else the time it was read) and
        ``_inlet_values_sequence`` (its own sequence; for a delete, that of the values it carries: ``latest``)."""
        from pyspark.sql.pandas.types import to_arrow_schema

        from spark_jobs.formats.json_values import JsonValues

        self.key_from_kafka, self.framed = key_from_kafka, rows if isinstance(rows, Framed) else None
        if key_from_kafka and (len(key) != 1 or debezium or (self.framed is not None and self.framed.key is not None)):
            raise JobError("invalid_spec", "key_from kafka_key: one key column, not a field of the schema, changes rows, "
                                           "a key format that is not a registry's")
        if debezium and sequence_by is not None:
            _envelope_path(sequence_by)
        if self.framed is None:
            assert isinstance(rows, StructType)
            value_fields, where = to_arrow_schema(rows, timezone="UTC"), "the schema"
            around = where
            read = _envelope(rows, sequence_by) if debezium else rows
            shape = pa.struct(list(to_arrow_schema(read, timezone="UTC")))
            self.values: JsonValues | None = JsonValues(_wrapped(read) if debezium else read, time_zone)
        else:
            value_fields, where, shape = _framed_rows(self.framed, debezium)
            assert self.framed.value is not None  # by _framed_rows
            around, self.values = self.framed.value.describe(), None
        if key_from_kafka:
            if key[0].lower() in {name.lower() for name in value_fields.names} or inlet_named(key):
                raise JobError("invalid_spec", f"key_from kafka_key: the key column {key[0]} is a field of {where} (in "
                                               f"any case) or in Inlet's namespace ({INLET_PREFIX}…)")
            value_fields = pa.schema([pa.field(key[0], pa.string(), False), *value_fields])
        self.row_schema: pa.Schema = value_fields
        names = value_fields.names
        if clashes := inlet_named(names[1:] if key_from_kafka else names):
            raise JobError("invalid_spec", f"schema fields {clashes} clash with Inlet's columns ({INLET_PREFIX}…)")
        for column in key:
            if column not in names:
                raise JobError("invalid_spec", f"key column {column} is not a field of {where}")
            if _nested(value_fields.field(column).type):
                raise JobError("invalid_spec", f"key column {column} is not of an atomic type")
        if missing := [c for c in partition_by if c not in names]:
            raise JobError("invalid_spec", f"partition_by {', '.join(missing)} is not a field of {where}: a keyed table "
                                           "is partitioned by its row's fields")
        self.key, self.sequence_by, self.debezium, self.soft_deletes = tuple(key), sequence_by, debezium, soft_deletes
        self.partition_by = partition_by
        soft = [pa.field(DELETED_AT, pa.timestamp("us", "UTC")), pa.field(VALUES_SEQUENCE, pa.int64())] if soft_deletes else []
        self.schema = pa.schema([*self.row_schema, pa.field(SEQUENCE, pa.int64(), False),
                                 pa.field(DELETED, pa.bool_(), False), *soft, pa.field(RUN_ID, pa.string(), False)])
        if sequence_by is not None:
            _sequence_type(shape, sequence_by, around)
        self.keys: JsonValues | None = None
        if not debezium and not key_from_kafka:
            if self.framed is not None and self.framed.key is not None:
                _key_fields(self.framed.key, self.key)
            else:  # tombstones name their key in JSON
                from pyspark.sql.pandas.types import from_arrow_type

                self.keys = JsonValues(_wrapped(StructType([
                    rows[k] if isinstance(rows, StructType) else StructField(k, from_arrow_type(value_fields.field(k).type))
                    for k in key])), time_zone)

    def without(self, dropped: frozenset[str]) -> None:
        """The row's columns less ``dropped`` (the sensitive fields a pipeline drops): never a key or a
        partition column, which identify and place the row."""
        if clash := sorted(dropped & {*self.key, *self.partition_by}):
            raise JobError("invalid_spec", f"sensitive fields {clash} are key or partition columns: hash them, "
                                           "a keyed table's rows are found by them")
        self.row_schema = pa.schema([f for f in self.row_schema if f.name not in dropped])
        self.schema = pa.schema([f for f in self.schema if f.name not in dropped])

    def read(self, batch: pa.RecordBatch, run_id: str, quarantine_schema: pa.Schema,
             contract: RowContract | None = None) -> tuple[pa.Table, pa.Table, int]:
        """``batch``'s changes (in ``schema``, plus ``HIDDEN``), its quarantine rows, and how many
        records were skipped (debezium's tombstones); ``contract``: the pipeline's, applied to the
        changes (its expectations test those that set a row)."""
        n = batch.num_rows
        tombstone = pc.is_null(batch.column("value"))
        decoded, reasons = self._values(batch)
        names = self.row_schema.names
        if self.debezium:
            envelope = _unwrap(decoded, [n for n in decoded.column_names if n != WRAPPER])
            op = envelope["op"]
            deleted = pc.fill_null(pc.equal(op, "d"), False)
            image = pc.if_else(deleted, envelope["before"], envelope["after"])
            columns = {name: pc.struct_field(image, name) for name in names}
            sequence = _path(envelope, self.sequence_by)
            for i, (kind, has_image) in enumerate(zip(op.to_pylist(), pc.is_valid(image).to_pylist(), strict=True)):
                if reasons[i] is not None:
                    continue
                if kind not in (*UPSERT_OPS, "d"):
                    reasons[i] = f"op {kind!r} is not applied to a keyed table" if kind else "the envelope has no op"
                elif not has_image:
                    reasons[i] = f"op {kind!r} without its {'before' if kind == 'd' else 'after'} image"
            keep = pc.invert(tombstone)
        else:
            keys, key_why = self._keys(batch)
            deleted = tombstone
            columns = {name: keys[name] if self.key_from_kafka and name in self.key else
                       pc.if_else(tombstone, keys[name] if name in self.key else pa.nulls(n, decoded.schema.field(name).type),
                                  _column(decoded, name)) for name in names}
            sequence = _path({name: _column(decoded, name) for name in decoded.column_names}, self.sequence_by)
            for i, (dead, bad_key) in enumerate(zip(tombstone.to_pylist(), key_why, strict=True)):
                if dead:
                    reasons[i] = (f"a tombstone has no sequence_by field {self.sequence_by}" if self.sequence_by
                                  else self._bad_key(bad_key) if bad_key else None)
            keep = pa.repeat(pa.scalar(True), n)
        if sequence is None:
            sequence = batch.column("offset")
        else:
            sequence = _as_int64(sequence)
            _flag_nulls(reasons, sequence, f"sequence_by {self.sequence_by} is null")
        for name in self.key:
            _flag_nulls(reasons, columns[name], "the record's Kafka key is null or not UTF-8 text" if self.key_from_kafka
                        else f"key column {name} is null")
        sequence = pc.fill_null(sequence, 0)
        soft, valued = [], []
        if self.soft_deletes:
            stamp = pa.scalar(dt.datetime.now(dt.UTC), pa.timestamp("us", "UTC"))
            at = batch.column("timestamp").cast(pa.timestamp("us", "UTC"))
            if "timestampType" in batch.schema.names:  # -1: the record has none (Kafka gives its time as -1 ms)
                at = pc.if_else(pc.equal(batch.column("timestampType"), -1), pa.nulls(n, at.type), at)
            at = pc.fill_null(at, stamp)
            soft = [pc.if_else(deleted, at, pa.nulls(n, at.type)), _unless(deleted, sequence)]
            valued = [_unless(deleted, batch.column("partition")), _unless(deleted, batch.column("offset"))]
        rows = pa.Table.from_arrays(
            [pc.if_else(deleted, pa.nulls(n, f.type), _cast(columns[f.name], f.type)) if f.name not in self.key
             else _cast(columns[f.name], f.type) for f in self.row_schema]
            + [sequence, deleted, *soft, pa.repeat(pa.scalar(run_id, pa.string()), n),
               batch.column("partition"), batch.column("offset"), *valued],
            schema=pa.schema([*self.schema, pa.field(PARTITION, pa.int32()), pa.field(OFFSET, pa.int64()),
                              *([pa.field(VALUES_PARTITION, pa.int32()), pa.field(VALUES_OFFSET, pa.int64())]
                                if self.soft_deletes else [])]))
        rows, kept = rows.filter(keep), batch.filter(keep)
        changes, quarantine = split_rows(rows, kept, pa.array(reasons, pa.string()).filter(keep), run_id,
                                         quarantine_schema, contract)
        return changes, quarantine, n - kept.num_rows


    def _values(self, batch: pa.RecordBatch) -> tuple[pa.Table, list[str | None]]:
        """The values' fields (the row's, or the envelope's), and per record why it did not decode."""
        if self.values is not None:
            decoded, why = self.values.decode(batch.column("value"))
            return decoded, why.to_pylist()
        assert self.framed is not None and self.framed.value is not None  # by __init__
        array, reasons = self.framed.decoder(self.framed.value).decode(batch.column("value"))
        return _struct_table(array), reasons

    def _keys(self, batch: pa.RecordBatch) -> tuple[dict[str, pa.Array], list[str | None]]:
        """The key columns the records' Kafka keys hold (for tombstones), and per record why not."""
        n = batch.num_rows
        if self.key_from_kafka:
            return {self.key[0]: _utf8(batch.column("key"))}, [None] * n
        if self.keys is not None:
            found, why = self.keys.decode(batch.column("key"))
            return _unwrap(found, list(self.key)), why.to_pylist()
        assert self.framed is not None and self.framed.key is not None  # by __init__
        array, reasons = self.framed.decoder(self.framed.key).decode(batch.column("key"))
        reasons = [why or ("the key is null" if key is None else None) for why, key in zip(reasons, array.to_pylist(), strict=True)]
        if not pa.types.is_struct(array.type):  # a key of one atomic value: the one key column
            return {self.key[0]: array}, reasons
        return {k: pc.struct_field(array, k) for k in self.key}, reasons

    def _bad_key(self, why: str) -> str:
        if self.keys is not None:
            return "a tombstone whose key is not a JSON object of the key columns"
        return f"a tombstone whose key does not decode: {why}"


def latest(changes: pa.Table, key: tuple[str, ...]) -> pa.Table:
    """The latest change of each key in ``changes``: the highest sequence; among equal sequences, the
    highest partition, then offset. ``key`` with the sequence: one change per key and sequence.
    Changes of a soft-deleting table (``VALUES_SEQUENCE``): a delete that is its key's latest carries the
    values of the key's last row among ``changes`` (the row it deletes, picked as ``latest`` picks, and
    where it was read), so reducing in steps (the tasks', then the driver's) picks what one step would."""
    kept = _first_by(changes, key, (SEQUENCE, PARTITION, OFFSET))
    if VALUES_SEQUENCE not in changes.column_names or kept.num_rows == 0:
        return kept
    valued = changes.filter(pc.is_valid(changes[VALUES_SEQUENCE]))
    if valued.num_rows == 0:
        return kept
    values = _first_by(valued, key, (VALUES_SEQUENCE, VALUES_PARTITION, VALUES_OFFSET))
    pairs = (kept.select(list(key)).append_column("_inlet_left", pa.array(np.arange(kept.num_rows)))
             .join(values.select(list(key)).append_column("_inlet_right", pa.array(np.arange(values.num_rows))),
                   keys=list(key), join_type="inner"))
    at = np.arange(kept.num_rows)
    left, right = pairs["_inlet_left"].to_numpy(), pairs["_inlet_right"].to_numpy()
    deletes = kept[DELETED].to_numpy(zero_copy_only=False)[left]
    at[left[deletes]] = kept.num_rows + right[deletes]  # a delete takes its key's last values
    taken = pa.concat_tables([kept, values]).take(pa.array(at))
    own = (*key, SEQUENCE, DELETED, DELETED_AT, RUN_ID, PARTITION, OFFSET)
    return pa.Table.from_arrays([kept[c] if c in own else taken[c] for c in kept.column_names], schema=kept.schema)


def unhidden(changes: pa.Table) -> pa.Table:
    """``changes`` without the columns that only carry them from the tasks to the MERGE's source."""
    return changes.drop_columns([c for c in (*HIDDEN, VALUES_PARTITION, VALUES_OFFSET) if c in changes.column_names])


def _first_by(changes: pa.Table, key: tuple[str, ...], order: tuple[str, str, str]) -> pa.Table:
    """The row of each key in ``changes`` highest in ``order`` (a sequence, then where it was read)."""
    if changes.num_rows == 0:
        return changes
    ordered = changes.sort_by([(column, "descending") for column in order])
    ordered = ordered.append_column("_inlet_rank", pa.array(range(ordered.num_rows), pa.int64()))
    firsts = ordered.group_by(list(key)).aggregate([("_inlet_rank", "min")]).column("_inlet_rank_min")
    return ordered.take(firsts).drop_columns(["_inlet_rank"])


def _unless(deleted: pa.Array, values: pa.Array) -> pa.Array:
    """``values``, null where ``deleted``."""
    return pc.if_else(deleted, pa.nulls(len(values), values.type), values)


def _column(table: pa.Table, name: str) -> pa.Array:
    return table.column(name).combine_chunks()


def _unwrap(decoded: pa.Table, names: list[str]) -> dict[str, pa.Array]:
    """The fields ``names`` of each record, from inside the ``payload`` wrapper where a record has one
    (json only: a registry format's record is the envelope itself)."""
    if WRAPPER not in decoded.column_names:
        return {name: _column(decoded, name) for name in names}
    wrapper = _column(decoded, WRAPPER)
    wrapped = pc.is_valid(wrapper)
    return {name: pc.if_else(wrapped, pc.struct_field(wrapper, name), _column(decoded, name)) for name in names}


def _path(columns: dict[str, pa.Array], path: str | None) -> pa.Array | None:
    if path is None:
        return None
    root, *rest = path.split(".")
    array = columns[root]
    for name in rest:
        array = pc.struct_field(array, name)
    return array


def _as_int64(array: pa.Array) -> pa.Array:
    if pa.types.is_date(array.type):
        array = array.cast(pa.int32())
    elif pa.types.is_timestamp(array.type):
        array = array.cast(pa.timestamp("us", array.type.tz)).cast(pa.int64())
    return array.cast(pa.int64())


def _utf8(keys: pa.Array) -> pa.Array:
    """Kafka keys (binary) as text; null where a key is null or not valid UTF-8."""
    try:
        return keys.cast(pa.string())
    except pa.ArrowInvalid:  # one invalid key: judged one by one
        def text(key: bytes | None) -> str | None:
            try:
                return None if key is None else key.decode("utf-8")
            except UnicodeDecodeError:
                return None
        return pa.array([text(k) for k in keys.to_pylist()], pa.string())


def _cast(array: pa.Array, to: pa.DataType) -> pa.Array:
    return array if array.type == to else array.cast(to)


def _flag_nulls(reasons: list[str | None], array: pa.Array, reason: str) -> None:
    for i, valid in enumerate(pc.is_valid(array).to_pylist()):
        if not valid and reasons[i] is None:
            reasons[i] = reason


def _wrapped(struct: StructType) -> StructType:
    """``struct``'s fields, and the same again inside ``payload`` (JsonConverter's schemas.enable)."""
    if WRAPPER in struct.fieldNames():
        return struct
    return StructType([*struct.fields, StructField(WRAPPER, struct, True)])


def _envelope(rows: StructType, sequence_by: str | None) -> StructType:
    """A Debezium envelope of ``rows``, with the field ``sequence_by`` (a BIGINT) where it says."""
    fields = [StructField("before", rows, True), StructField("after", rows, True), StructField("op", StringType(), True)]
    if sequence_by is not None:
        root, *rest = _envelope_path(sequence_by)
        data_type: DataType = LongType()
        for name in reversed(rest):
            data_type = StructType([StructField(name, data_type, True)])
        fields.append(StructField(root, data_type, True))
    return StructType(fields)


def _envelope_path(sequence_by: str) -> list[str]:
    """``sequence_by``'s names, checked to lie in the envelope around the row (``source``, ``ts_ms``)."""
    path = sequence_by.split(".")
    if path[0] in _ENVELOPE:
        raise JobError("invalid_spec", f"sequence_by {sequence_by}: a field of the envelope's source or ts_ms, "
                                       f"not of {path[0]}")
    return path


def _framed_rows(framed: Framed, debezium: bool) -> tuple[pa.Schema, str, pa.DataType]:
    """A registry format's row columns, the words that name them, and the value's type (the row's, or
    the envelope's for debezium): ``schema_incompatible`` where the subject is not a record of them."""
    assert framed.value is not None  # a registry value format's
    subject, value = framed.value, framed.value.arrow_type
    if not pa.types.is_struct(value):
        raise JobError("schema_incompatible", f"{subject.describe()} is not a record: a keyed table's rows are records")
    if not debezium:
        return pa.schema(subject.columns), subject.describe(), value
    after = value.field("after").type if value.get_field_index("after") >= 0 else None
    before = value.field("before").type if value.get_field_index("before") >= 0 else None
    if after is None or not pa.types.is_struct(after) or before != after or value.get_field_index("op") < 0:
        raise JobError("schema_incompatible", f"{subject.describe()} is not a Debezium envelope: a record of before and "
                                              "after (the same record, nullable) and op")
    return pa.schema([f.with_nullable(True) for f in after]), f"the after record of {subject.describe()}", value


def _key_fields(key_subject: SubjectSchema, key: tuple[str, ...]) -> None:
    """A registry format's keys name a tombstone's key: they hold the key columns (``invalid_spec`` else)."""
    fields = key_subject.arrow_type
    if not pa.types.is_struct(fields):
        if len(key) != 1:
            raise JobError("invalid_spec", f"{key_subject.describe()} is one value, not the {len(key)} key columns")
        return
    for column in key:
        if fields.get_field_index(column) < 0:
            raise JobError("invalid_spec", f"key column {column} is not a field of the keys' {key_subject.describe()}")


def _struct_table(array: pa.Array) -> pa.Table:
    """A struct array's fields as columns (null where the struct is)."""
    return pa.Table.from_arrays([pc.struct_field(array, [i]) for i in range(array.type.num_fields)],
                                names=[f.name for f in array.type])


def _nested(data_type: pa.DataType) -> bool:
    return (pa.types.is_struct(data_type) or pa.types.is_list(data_type) or pa.types.is_large_list(data_type)
            or pa.types.is_fixed_size_list(data_type) or pa.types.is_map(data_type))


def _sequence_type(shape: pa.DataType, path: str, where: str) -> pa.DataType:
    """The type of the field at ``path``: an integer, a timestamp or a date (``invalid_spec`` else)."""
    data_type = shape
    for name in path.split("."):
        if not pa.types.is_struct(data_type) or data_type.get_field_index(name) < 0:
            raise JobError("invalid_spec", f"sequence_by {path} is not a field of {where}")
        data_type = data_type.field(name).type
    if not (pa.types.is_signed_integer(data_type) or pa.types.is_timestamp(data_type) or pa.types.is_date32(data_type)):
        raise JobError("invalid_spec", f"sequence_by {path} is {data_type}: an integer, timestamp or date orders changes")
    return data_type
