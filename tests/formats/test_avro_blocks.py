"""Avro read a batch to one call (``avro_blocks``) against fastavro record by record, the reference.

A batch read in one block either gives exactly the rows fastavro gives, or None (the decoder then
reads it record by record). Valid batches of every type the block path sizes are read in one block;
batches with a malformed, non-canonical or foreign record never are, and so decode as before.
"""

from __future__ import annotations

import io
import json
import math
import random
import struct
from typing import Any

import fastavro
import pyarrow as pa
import pytest

from spark_jobs.formats import avro
from spark_jobs.formats.avro_blocks import BlockReader
from spark_jobs.formats.wire import SubjectSchema, WireDecoder
from spark_jobs.registry import RegisteredSchema, RegistryConfig

SCHEMA_ID = 41
HEADER = b"\x00" + SCHEMA_ID.to_bytes(4, "big")
STATUS = {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID", "SHIPPED"]}
EVERY_TYPE: dict[str, Any] = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "flag", "type": "boolean"},
    {"name": "small", "type": "int"},
    {"name": "big", "type": "long"},
    {"name": "ratio", "type": "float"},
    {"name": "amount", "type": "double"},
    {"name": "text", "type": "string"},
    {"name": "blob", "type": "bytes"},
    {"name": "status", "type": STATUS},
    {"name": "previous", "type": ["null", "shop.Status"]},  # a named type by its full name
    {"name": "hash", "type": {"type": "fixed", "name": "Hash", "size": 4}},
    {"name": "note", "type": ["null", "string"]},
    {"name": "note_last", "type": ["string", "null"]},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "placed_at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "seen_at", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}]},
    {"name": "local_at", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
    {"name": "at_time", "type": {"type": "int", "logicalType": "time-millis"}},
    {"name": "uuid", "type": {"type": "string", "logicalType": "uuid"}},
    {"name": "customer", "type": {"type": "record", "name": "Customer", "fields": [
        {"name": "id", "type": "long"}, {"name": "tier", "type": "Status"},  # by its short name
        {"name": "address", "type": ["null", {"type": "record", "name": "Address", "fields": [
            {"name": "city", "type": "string"}, {"name": "zip", "type": ["null", "int"]}]}]},
    ]}},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "lines", "type": {"type": "array", "items": {"type": "record", "name": "Line", "fields": [
        {"name": "sku", "type": "string"}, {"name": "qty", "type": "int"},
        {"name": "hashes", "type": {"type": "array", "items": "Hash"}}, {"name": "gift", "type": "boolean"}]}}},
    {"name": "maybe_lines", "type": ["null", {"type": "array", "items": "Line"}]},
    {"name": "flags", "type": {"type": "array", "items": ["null", "boolean"]}},
]}
_STRINGS = ["", "a", "é", "日本語", "😀" * 3, "x" * 70, "y" * 20_000, "nul\x00inside", "\u2028"]
_LONGS = [0, 1, -1, 63, -64, 64, -65, 8191, 2**31 - 1, -(2**31), 2**53 + 1, 2**63 - 1, -(2**63)]
_INTS = [0, 1, -1, 63, -64, 64, 300, -300, 2**31 - 1, -(2**31)]
_FLOATS = [0.0, -0.0, 1.5, -2.25, math.inf, -math.inf, math.nan, 1e-45, 3.4e38]


def _order(rng: random.Random) -> dict[str, Any]:
    def maybe(value: Any) -> Any:
        return None if rng.random() < 0.3 else value

    def line() -> dict[str, Any]:
        return {"sku": rng.choice(_STRINGS), "qty": rng.choice(_INTS),
                "hashes": [rng.randbytes(4) for _ in range(rng.choice([0, 1, 3]))], "gift": rng.random() < 0.5}

    return {
        "flag": rng.random() < 0.5, "small": rng.choice(_INTS), "big": rng.choice(_LONGS),
        "ratio": rng.choice(_FLOATS), "amount": rng.choice([*_FLOATS, 1e308, 5e-324]), "text": rng.choice(_STRINGS),
        "blob": rng.randbytes(rng.choice([0, 1, 200])), "status": rng.choice(STATUS["symbols"]),
        "previous": maybe(rng.choice(STATUS["symbols"])), "hash": rng.randbytes(4), "note": maybe(rng.choice(_STRINGS)),
        "note_last": maybe(rng.choice(_STRINGS)), "day": rng.choice(_INTS[:8]), "placed_at": rng.choice(_LONGS[:10]),
        "seen_at": maybe(rng.choice(_LONGS[:11])), "local_at": rng.choice(_LONGS[:10]), "at_time": rng.choice(_INTS[:8]),
        "uuid": "3f1c2a9e-8b1d-4a53-9c07-2b6f0d4e8a11",
        "customer": {"id": rng.choice(_LONGS), "tier": rng.choice(STATUS["symbols"]),
                     "address": maybe({"city": rng.choice(_STRINGS), "zip": maybe(rng.choice(_INTS))})},
        "tags": [rng.choice(_STRINGS) for _ in range(rng.choice([0, 1, 2, 70]))],
        "lines": [line() for _ in range(rng.choice([0, 1, 4]))],
        "maybe_lines": maybe([line() for _ in range(rng.choice([0, 2]))]),
        "flags": [maybe(rng.random() < 0.5) for _ in range(rng.choice([0, 3]))],
    }


def _encode(schema: Any, records: list[Any]) -> list[bytes]:
    parsed = fastavro.parse_schema(avro._raw(schema))
    out = []
    for record in records:
        buffer = io.BytesIO()
        fastavro.schemaless_writer(buffer, parsed, record)
        out.append(HEADER + buffer.getvalue())
    return out


def _reference(schema: Any, payloads: list[bytes]) -> list[Any] | None:
    """fastavro's rows, record by record, as the decoder makes them; None where any record fails."""
    decode = avro.decoder(schema, schema)
    try:
        values = [decode(p[len(HEADER):]) for p in payloads]
        return _canonical(pa.array(values, avro.arrow_type(schema, as_read=True)).to_pylist())
    except Exception:  # noqa: BLE001 - a record fastavro refuses: the block reader must refuse the batch too
        return None


def _canonical(value: Any) -> Any:
    """Rows compared exactly: floats by their bits (NaN equal to NaN, -0.0 not equal to 0.0)."""
    if isinstance(value, float):
        return "nan" if math.isnan(value) else struct.pack("<d", value)
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    if isinstance(value, dict):
        return {k: _canonical(v) for k, v in value.items()}
    return value


def _read(schema: Any, payloads: list[bytes]) -> list[Any] | None:
    decoded = BlockReader(schema, HEADER).read(pa.array(payloads, pa.binary()))
    return None if decoded is None else _canonical(decoded.to_pylist())


def test_every_type_the_block_path_sizes_reads_as_fastavro_does() -> None:
    rng = random.Random(35)
    assert BlockReader(EVERY_TYPE, HEADER).usable()
    for batch in range(20):
        payloads = _encode(EVERY_TYPE, [_order(rng) for _ in range(rng.choice([1, 2, 50, 400]))])
        expected = _reference(EVERY_TYPE, payloads)
        assert expected is not None
        assert _read(EVERY_TYPE, payloads) == expected, f"batch {batch}"


def test_a_schema_that_is_not_a_record_reads_as_fastavro_does() -> None:
    for schema, values in [("string", _STRINGS), ("long", _LONGS), (["null", "double"], [None, *_FLOATS]),
                           ({"type": "array", "items": "int"}, [[], _INTS, [0]])]:
        payloads = _encode(schema, values)
        assert _read(schema, payloads) == _reference(schema, payloads), schema


def _mutations(payload: bytes, rng: random.Random) -> list[bytes]:
    body = payload[len(HEADER):]
    cut = rng.randrange(1, len(body)) if len(body) > 1 else 1
    flip = bytearray(body)
    flip[rng.randrange(len(flip))] ^= 1 << rng.randrange(8)
    return [HEADER + m for m in (body[:-1], body[:cut], body + b"\x00", body + rng.randbytes(3), bytes(flip),
                                 rng.randbytes(len(body)), b"", b"\x80" + body, body[1:])]


def test_a_batch_with_a_damaged_record_is_read_in_one_block_only_where_every_row_is_fastavros() -> None:
    rng = random.Random(875)
    blocks = 0
    for _ in range(150):
        records = _encode(EVERY_TYPE, [_order(rng) for _ in range(rng.choice([1, 3, 20]))])
        at = rng.randrange(len(records))
        for damaged in _mutations(records[at], rng):
            payloads = [*records[:at], damaged, *records[at + 1:]]
            read = _read(EVERY_TYPE, payloads)
            if read is not None:  # a flipped bit can leave a valid record of another value: then it must be fastavro's
                blocks += 1
                assert read == _reference(EVERY_TYPE, payloads)
    assert blocks < 150 * 9 / 2  # most damage is caught; none is read differently


ONE_OF_EACH = {"type": "record", "name": "R", "fields": [
    {"name": "n", "type": "long"}, {"name": "s", "type": "string"}, {"name": "b", "type": "boolean"},
    {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}},
    {"name": "u", "type": ["null", "int"]}, {"name": "es", "type": {"type": "array", "items": "E"}},
    {"name": "us", "type": {"type": "array", "items": ["null", "int"]}}]}
OK = {"n": 7, "s": "ok", "b": False, "e": "B", "u": 1, "es": ["A"], "us": [None, 2]}


# OK's fields encoded one by one: n, s, b, e, u, es, us.
N, S, B, E, U, ES, US = b"\x0e", b"\x04ok", b"\x00", b"\x02", b"\x02\x02", b"\x02\x00\x00", b"\x04\x00\x02\x04\x00"


@pytest.mark.parametrize(("case", "body", "in_a_block"), [
    ("the record as fastavro writes it", N + S + B + E + U + ES + US, True),
    ("a long in a non-canonical (overlong) varint", b"\x8e\x00" + S + B + E + U + ES + US, False),
    ("a string's length in a non-canonical varint", N + b"\x84\x00ok" + B + E + U + ES + US, False),
    ("an array in two blocks", N + S + B + E + U + b"\x02\x00\x02\x02\x00" + US, False),
    ("trailing bytes after the record", N + S + B + E + U + ES + US + b"\x00", False),
    ("a record cut short", (N + S + B + E + U + ES + US)[:-1], False),
    ("an enum index past its symbols", N + S + B + b"\x04" + U + ES + US, False),
    ("a negative enum index", N + S + B + b"\x01" + U + ES + US, False),
    ("invalid UTF-8 in a string", N + b"\x04\xff\xfe" + B + E + U + ES + US, False),
    ("a negative string length", N + b"\x03ok" + B + E + U + ES + US, False),
    ("a union's branch index past its branches", N + S + B + E + b"\x04\x02" + ES + US, False),
    ("an enum index past its symbols in an array", N + S + B + E + U + b"\x02\x06\x00" + US, False),
    ("a union's branch index past its branches in an array", N + S + B + E + U + ES + b"\x04\x00\x04\x04\x00", False),
    # Not 0 or 1: invalid Avro. fastavro reads any byte but 0 as true (Java's Avro only 1); so does the block.
    ("a boolean byte that is neither 0 nor 1", N + S + b"\x02" + E + U + ES + US, True),
])
def test_an_encoding_fastavro_reads_differently_or_refuses_is_never_read_in_a_block(case: str, body: bytes,
                                                                                    in_a_block: bool) -> None:
    good = _encode(ONE_OF_EACH, [OK] * 3)
    batch = [*good, HEADER + body, *good]
    read = _read(ONE_OF_EACH, batch)
    assert (read is not None) is in_a_block, case
    assert read is None or read == _reference(ONE_OF_EACH, batch)
    assert _read(ONE_OF_EACH, good) == _reference(ONE_OF_EACH, good)


@pytest.mark.parametrize("schema", [
    {"type": "record", "name": "M", "fields": [{"name": "m", "type": {"type": "map", "values": "int"}}]},
    {"type": "record", "name": "U", "fields": [{"name": "u", "type": ["null", "int", "string"]}]},
    {"type": "record", "name": "D", "fields": [
        {"name": "d", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}}]},
    {"type": "record", "name": "H", "fields": [{"name": "_inlet_wire_header", "type": "int"}]},
    {"type": "record", "name": "N", "fields": [{"name": "nothing", "type": "null"}]},
    {"type": "record", "name": "Empty", "fields": []},  # Arrow has no struct of no fields with a length
    # A short name Java's Avro resolves in the null namespace, fastavro (the fallback) does not: refused by both paths.
    {"type": "record", "name": "R", "fields": [{"name": "f", "type": {"type": "fixed", "name": "T", "size": 1}},
     {"name": "g", "type": {"type": "record", "name": "In", "namespace": "q", "fields": [{"name": "z", "type": "T"}]}}]},
])
def test_types_the_block_path_does_not_size_are_left_to_fastavro(schema: Any) -> None:
    assert not BlockReader(schema, HEADER).usable()


@pytest.mark.parametrize(("case", "schema", "body"), [
    ("an int past 32 bits (fastavro: a value that does not fit the column)",
     {"type": "record", "name": "I", "fields": [{"name": "i", "type": "int"}]}, b"\x80\x80\x80\x80\x18"),
    ("a date past 32 bits, in a union",
     {"type": "record", "name": "D", "fields": [{"name": "d", "type": ["null", {"type": "int", "logicalType": "date"}]}]},
     b"\x02\x80\x80\x80\x80\x18"),
    ("an int past 32 bits in an array",
     {"type": "record", "name": "A", "fields": [{"name": "a", "type": {"type": "array", "items": "int"}}]},
     b"\x02\x80\x80\x80\x80\x18\x00"),
])
def test_an_int_out_of_its_range_is_not_read_in_a_block(case: str, schema: Any, body: bytes) -> None:
    assert BlockReader(schema, HEADER).usable()
    assert _read(schema, [HEADER + body]) is None, case


def test_a_primitive_written_as_an_object_is_read_as_fastavro_reads_it() -> None:
    schema = {"type": "record", "name": "B", "fields": [{"name": "b", "type": {"type": "boolean"}},
                                                      {"name": "n", "type": ["null", {"type": "int"}]}]}
    batch = [HEADER + b"\x02\x02\x04", HEADER + b"\x00\x00", HEADER + b"\x01\x02\x7e"]  # a boolean byte 2: true
    assert _read(schema, batch) == _reference(schema, batch) == [{"b": True, "n": 2}, {"b": False, "n": None},
                                                                 {"b": True, "n": 63}]


def test_fields_with_defaults_and_docs_are_read_in_blocks() -> None:
    status = {"type": "enum", "name": "S", "symbols": ["A", "B"], "default": "A", "doc": "a status"}
    schema = {"type": "record", "name": "V2", "doc": "version 2", "fields": [
        {"name": "i", "type": "int", "default": 3, "doc": "an int"}, {"name": "s", "type": "string", "default": "x"},
        {"name": "b", "type": "boolean", "default": True, "order": "descending"}, {"name": "e", "type": status, "default": "B"},
        {"name": "f", "type": {"type": "fixed", "name": "F", "size": 2}, "default": "ab", "aliases": ["g"]},
        {"name": "n", "type": ["null", "long"], "default": None}]}
    assert BlockReader(schema, HEADER).usable()
    payloads = _encode(schema, [{"i": 1, "s": "é", "b": False, "e": "B", "f": b"xy", "n": None},
                                {"i": -7, "s": "", "b": True, "e": "A", "f": b"\x00\x01", "n": 2**40}])
    assert _read(schema, payloads) == _reference(schema, payloads) is not None


def _decoder(schema: Any, part: str = "value") -> WireDecoder:
    arrow = avro.arrow_type(schema)
    read = avro.arrow_type(schema, as_read=True)
    subject = SubjectSchema(part, "avro", "orders-value", 1, RegisteredSchema(SCHEMA_ID, "AVRO", json.dumps(schema)),  # type: ignore[arg-type]
                            False, arrow, (), read if read != arrow else None)
    return WireDecoder(subject, RegistryConfig(url="http://127.0.0.1:9"))  # never asked: every record is the reader's


@pytest.mark.parametrize("part", ["value", "key"])
def test_the_decoder_gives_the_same_columns_and_reasons_either_way(part: str, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(7)
    payloads: list[bytes | None] = list(_encode(EVERY_TYPE, [_order(rng) for _ in range(60)]))
    payloads[3] = payloads[40] = None  # tombstones (or null keys)
    column = pa.array(payloads, pa.binary())
    decoder = _decoder(EVERY_TYPE, part)
    blocks: list[int] = []
    read = BlockReader.read

    def counted(self: BlockReader, batch: pa.Array) -> pa.Array | None:
        blocks.append(len(batch))
        return read(self, batch)

    monkeypatch.setattr(BlockReader, "read", counted)
    values, reasons = decoder.decode(column)
    assert blocks == [58]
    monkeypatch.setattr(WireDecoder, "_blocks", lambda self, column: None)
    expected_values, expected_reasons = _decoder(EVERY_TYPE, part).decode(column)
    assert values.type == expected_values.type
    assert _canonical(values.to_pylist()) == _canonical(expected_values.to_pylist())
    assert reasons == expected_reasons
    assert reasons.count("value is null" if part == "value" else None) == (2 if part == "value" else 60)


def test_a_batch_with_a_record_of_another_schema_id_is_decoded_record_by_record() -> None:
    good = _encode(ONE_OF_EACH, [OK])
    other = b"\x00" + (SCHEMA_ID + 1).to_bytes(4, "big") + good[0][len(HEADER):]
    decoder = _decoder(ONE_OF_EACH)
    decoder._codecs[SCHEMA_ID + 1] = "value names schema id 42, which the registry does not know"  # no registry asked
    values, reasons = decoder.decode(pa.array([good[0], other, b"\x01junk"], pa.binary()))
    assert values.to_pylist() == [OK, None, None]
    assert reasons[0] is None and "schema id 42" in (reasons[1] or "") and "wire format" in (reasons[2] or "")
