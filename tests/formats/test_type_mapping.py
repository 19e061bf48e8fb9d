"""The registry formats' type mappings and decoders, and how a table's columns follow a subject, without
Kafka or Spark: the cases the end-to-end tests do not reach one by one (tests/formats/test_registry_runs.py
runs them all for real)."""

from __future__ import annotations

import datetime as dt
import io
import json

import fastavro
import pyarrow as pa
import pytest
from google.protobuf import descriptor_pb2

from spark_jobs.formats import avro, json_schema, protobuf
from spark_jobs.formats.evolution import NewField, TypeChange, field_paths, merge_schema, widenings, widens
from tests.fixtures.wire_format import encode_message_indexes


def _avro_bytes(schema: dict, record: dict) -> bytes:
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, fastavro.parse_schema(schema), record)
    return buffer.getvalue()


def test_avro_types_map_to_arrow_as_documented() -> None:
    schema = {"type": "record", "name": "R", "fields": [
        {"name": "b", "type": "boolean"}, {"name": "i", "type": "int"}, {"name": "f", "type": "float"},
        {"name": "raw", "type": "bytes"}, {"name": "fx", "type": {"type": "fixed", "name": "F", "size": 2}},
        {"name": "dec", "type": {"type": "fixed", "name": "D", "size": 8, "logicalType": "decimal", "precision": 12, "scale": 3}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "tod", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "tmu", "type": {"type": "long", "logicalType": "time-micros"}},
        {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
        {"name": "id", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "again", "type": "F"},
        {"name": "either", "type": ["null", "long", "string"]},
        {"name": "nested", "type": {"type": "map", "values": {"type": "array", "items": ["null", "double"]}}},
    ]}
    assert avro.arrow_type(avro.load(json.dumps(schema))) == pa.struct([
        ("b", pa.bool_()), ("i", pa.int32()), ("f", pa.float32()), ("raw", pa.binary()), ("fx", pa.binary()),
        ("dec", pa.decimal128(12, 3)), ("day", pa.date32()), ("tod", pa.int32()), ("tmu", pa.int64()),
        ("local", pa.timestamp("us")), ("id", pa.string()), ("again", pa.binary()),
        ("either", pa.struct([("member0", pa.int64()), ("member1", pa.string())])),
        ("nested", pa.map_(pa.string(), pa.list_(pa.float64()))),
    ])


def test_avro_refuses_what_cannot_be_columns() -> None:
    recursive = {"type": "record", "name": "Node", "fields": [{"name": "next", "type": ["null", "Node"]}]}
    with pytest.raises(avro.UnsupportedSchema, match="next: the recursive type 'Node' cannot be a column"):
        avro.arrow_type(avro.load(json.dumps(recursive)))
    wide = {"type": "bytes", "logicalType": "decimal", "precision": 40, "scale": 0}
    with pytest.raises(avro.UnsupportedSchema, match="decimal precision 40 is over 38"):
        avro.arrow_type(avro.load(json.dumps({"type": "record", "name": "W", "fields": [{"name": "d", "type": wide}]})))


def test_avro_values_resolve_into_the_reader_and_unions_into_members() -> None:
    writer = {"type": "record", "name": "R", "fields": [
        {"name": "n", "type": "int"}, {"name": "gone", "type": "string"},
        {"name": "u", "type": ["null", "int", {"type": "record", "name": "P", "fields": [{"name": "x", "type": "int"}]}]}]}
    reader = {"type": "record", "name": "R", "fields": [
        {"name": "n", "type": "long"}, {"name": "added", "type": "string", "default": "d"},
        {"name": "u", "type": ["null", "int", {"type": "record", "name": "P", "fields": [{"name": "x", "type": "int"}]}]}]}
    decode = avro.decoder(avro.load(json.dumps(writer)), avro.load(json.dumps(reader)))
    shape = avro.arrow_type(avro.load(json.dumps(reader)))

    values = [decode(_avro_bytes(writer, {"n": 1, "gone": "g", "u": {"x": 5}})),
              decode(_avro_bytes(writer, {"n": 2, "gone": "g", "u": 7})),
              decode(_avro_bytes(writer, {"n": 3, "gone": "g", "u": None}))]

    assert pa.array(values, type=shape).to_pylist() == [
        {"n": 1, "added": "d", "u": {"member0": None, "member1": {"x": 5}}},
        {"n": 2, "added": "d", "u": {"member0": 7, "member1": None}},
        {"n": 3, "added": "d", "u": None},
    ]


def _order_file() -> descriptor_pb2.FileDescriptorProto:
    file = descriptor_pb2.FileDescriptorProto(name="order.proto", package="shop", syntax="proto3",
                                              dependency=["google/protobuf/timestamp.proto"])
    F = descriptor_pb2.FieldDescriptorProto
    order = file.message_type.add(name="Order")
    order.field.add(name="id", number=1, type=F.TYPE_UINT32, label=F.LABEL_OPTIONAL)
    order.field.add(name="at", number=2, type=F.TYPE_MESSAGE, type_name=".google.protobuf.Timestamp", label=F.LABEL_OPTIONAL)
    order.field.add(name="tags", number=3, type=F.TYPE_STRING, label=F.LABEL_REPEATED)
    order.field.add(name="kind", number=4, type=F.TYPE_ENUM, type_name=".shop.Order.Kind", label=F.LABEL_OPTIONAL)
    order.field.add(name="maybe", number=5, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL, proto3_optional=True, oneof_index=0)
    order.oneof_decl.add(name="_maybe")
    order.enum_type.add(name="Kind", value=[descriptor_pb2.EnumValueDescriptorProto(name="A", number=0),
                                            descriptor_pb2.EnumValueDescriptorProto(name="B", number=1)])
    inner = order.nested_type.add(name="Inner")
    inner.field.add(name="v", number=1, type=F.TYPE_BOOL, label=F.LABEL_OPTIONAL)
    return file


def test_protobuf_types_presence_and_message_indexes() -> None:
    pool, file = protobuf.file_pool([_order_file().SerializeToString()])
    order = protobuf.message_at(pool, file, [0])

    assert protobuf.arrow_type(order) == pa.struct([
        ("id", pa.int64()), ("at", pa.timestamp("us", tz="UTC")), ("tags", pa.list_(pa.string())),
        ("kind", pa.string()), ("maybe", pa.int64())])
    assert protobuf.message_at(pool, file, [0, 0]).full_name == "shop.Order.Inner"
    with pytest.raises(ValueError, match="message index 3 is not a message of order.proto"):
        protobuf.message_at(pool, file, [3])

    Order = protobuf.message_class(order)
    convert = protobuf.converter(order)
    message = Order(id=2**32 - 1, tags=["a"], kind=1)
    message.at.FromDatetime(dt.datetime(2026, 1, 2, 3, 4, 5, 600_000))
    assert convert(Order.FromString(message.SerializeToString())) == {
        "id": 2**32 - 1, "at": dt.datetime(2026, 1, 2, 3, 4, 5, 600_000, tzinfo=dt.UTC), "tags": ["a"], "kind": "B", "maybe": None}
    assert convert(Order(maybe=0)) == {"id": 0, "at": None, "tags": [], "kind": "A", "maybe": 0}
    for indexes in ([0], [1, 0], [2, 5, 1]):
        framed = encode_message_indexes(indexes) + b"rest"
        assert protobuf.read_indexes(framed, 0) == (indexes, len(framed) - 4)


def test_protobuf_imports_of_well_known_types_resolve_from_googles_pool() -> None:
    pool, _ = protobuf.file_pool([_order_file().SerializeToString()])
    assert pool.FindMessageTypeByName("google.protobuf.Timestamp").full_name == "google.protobuf.Timestamp"


def test_json_schema_values_that_do_not_fit_their_columns_say_where() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}, "at": {"type": "string", "format": "date-time"},
                                               "xs": {"type": "array", "items": {"type": "number"}}}}
    decode = json_schema.decoder(json_schema.arrow_type(schema))

    assert decode(b'{"n": 1, "at": "2026-01-01T00:00:00", "xs": [1, 2.5]}') == {
        "n": 1, "at": dt.datetime(2026, 1, 1, tzinfo=dt.UTC), "xs": [1, 2.5]}
    for payload, message in ((b'{"n": 1.5}', "n is not an integer"), (b'{"n": true}', "n is not an integer"),
                             (b'{"at": "soon"}', "at is not a date-time"), (b'{"xs": ["a"]}', r"xs\[\] is not a number"),
                             (b'[1]', "the value is not an object")):
        with pytest.raises(json_schema.Misfit, match=message):
            decode(payload)
    with pytest.raises(json_schema.UnsupportedSchema, match="recursive"):
        json_schema.arrow_type({"$ref": "#/definitions/T", "definitions": {"T": {"type": "object", "properties": {
            "child": {"$ref": "#/definitions/T"}}}}})


def test_a_table_takes_new_fields_at_any_depth_and_refuses_changed_types() -> None:
    table = pa.schema([("id", pa.int64()), ("s", pa.struct([("a", pa.large_string())])), ("gone", pa.int32())])
    incoming = pa.schema([("id", pa.int64()), ("s", pa.struct([("a", pa.string()), ("b", pa.int32())])),
                          ("xs", pa.list_(pa.struct([("c", pa.bool_())])))])

    merged = merge_schema(table, incoming)

    assert merged == pa.schema([("id", pa.int64()), ("s", pa.struct([("a", pa.string()), ("b", pa.int32())])),
                                ("gone", pa.int32()), ("xs", pa.list_(pa.struct([("c", pa.bool_())])))])
    assert field_paths(merged) - field_paths(table) == {"s.b", "xs", "xs[].c"}
    with pytest.raises(TypeChange) as changed:
        merge_schema(merged, pa.schema([("s", pa.struct([("b", pa.string())]))]))
    assert str(changed.value) == "field s.b is int32 in the table and string in the schema"


@pytest.mark.parametrize(("old", "new", "widens_to"), [
    (pa.int8(), pa.int16(), True), (pa.int16(), pa.int64(), True), (pa.int32(), pa.int64(), True),
    (pa.int64(), pa.int32(), False), (pa.float32(), pa.float64(), True), (pa.int32(), pa.float64(), True),
    (pa.int64(), pa.float64(), False),  # a long past 2**53 has no double
    # Delta widens these, but Avro would read an older record's days as microseconds, its digits at the new scale.
    (pa.date32(), pa.timestamp("us"), False), (pa.decimal128(10, 2), pa.decimal128(12, 4), False),
    (pa.decimal128(10, 2), pa.decimal128(12, 2), True), (pa.decimal128(10, 2), pa.decimal128(10, 2), False),
    (pa.decimal128(10, 2), pa.decimal128(12, 1), False), (pa.int32(), pa.string(), False),
])
def test_a_type_widens_as_deltas_type_widening_does(old: pa.DataType, new: pa.DataType, widens_to: bool) -> None:
    assert widens(old, new) is widens_to


def test_each_policy_takes_a_new_field_and_a_changed_type_as_it_says() -> None:
    table = pa.schema([("id", pa.int64()), ("qty", pa.int32()), ("s", pa.struct([("x", pa.float32())]))])
    wider = pa.schema([("id", pa.int64()), ("qty", pa.int64()), ("s", pa.struct([("x", pa.float64())]))])
    noted = pa.schema([*table, pa.field("note", pa.string())])

    merged = merge_schema(table, wider, "widen")
    assert merged == wider
    assert [(w.path, w.column, w.new_type) for w in widenings(table, merged)] == [
        ("qty", "`qty`", pa.int64()), ("s.x", "`s`.`x`", pa.float64())]
    assert widenings(table, merge_schema(table, noted, "widen")) == []
    with pytest.raises(TypeChange, match="field qty is int32 in the table and int64 in the schema"):
        merge_schema(table, wider, "add")
    with pytest.raises(TypeChange, match="field qty is int64 in the table and string"):
        merge_schema(wider, pa.schema([("qty", pa.string())]), "widen")  # no widening
    with pytest.raises(TypeChange, match="field qty is int64 in the table and int32"):
        merge_schema(wider, table, "widen")  # narrower: the column would not be the schema's type
    assert merge_schema(table, noted, "add").names == ["id", "qty", "s", "note"]
    with pytest.raises(NewField, match="field note \\(string\\) is not in the table"):
        merge_schema(table, noted, "fail")
    with pytest.raises(NewField, match="field s.y"):
        merge_schema(table, pa.schema([("s", pa.struct([("x", pa.float32()), ("y", pa.bool_())]))]), "fail")
    assert merge_schema(table, table, "fail") == table
