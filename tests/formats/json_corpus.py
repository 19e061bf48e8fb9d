"""The conformance corpus of json values: (schema, value) cases that Spark's ``from_json`` (as
``spark_jobs.decode`` calls it) and ``spark_jobs.formats.json_values`` must read alike.

Generated where a grid reaches further (every JSON literal in a column of every type), hand-written
where a case is tricky, and random but seeded (nested documents with floats, escapes and nulls), so
every run checks the same cases.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass


@dataclass(frozen=True)
class Case:
    schema: str
    value: bytes | None
    time_zone: str = "UTC"


TYPES = [
    "TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE", "DECIMAL(5,2)", "DECIMAL(38,10)", "DECIMAL(38,0)",
    "BOOLEAN", "STRING", "BINARY", "DATE", "TIMESTAMP", "TIMESTAMP_NTZ", "ARRAY<INT>", "ARRAY<STRING>",
    "MAP<STRING, INT>", "STRUCT<x: INT, y: STRING>", "ARRAY<DATE>", "MAP<STRING, DECIMAL(10,2)>", "VOID",
]

# JSON literals put in a column of each type: numbers at every range's edges, strings that other
# types might read, and every kind of JSON value.
LITERALS = [
    "0", "1", "-1", "-0", "1.0", "1.5", "-1.5", "0.1", "1e2", "1E-2", "1.5e+3", "2.5E20", "1e7", "1e-3", "1e-4",
    "0.0001", "123.456", "999.995", "1.005", "127", "128", "255", "256", "-128", "-129", "32767", "32768", "-32769",
    "2147483647", "2147483648", "-2147483649", "9223372036854775807", "9223372036854775808",
    "-9223372036854775809", "123456789012345678901234567890", "1e400", "-1e400", "4.9e-324", "1.7976931348623157e308",
    "3.4028235e38", "3.5e38", "1e39", "1e-50", "NaN", "Infinity", "-Infinity", "true", "false", "null",
    '"1"', '"-1"', '"1.5"', '"abc"', '""', '" "', '"NaN"', '"Infinity"', '"+INF"', '"-INF"', '"+Infinity"',
    '"-Infinity"', '"nan"', '"true"', '"2024-01-05"', '"2024-1-5"', '"2024"', '"2024-01-05T10:20:30Z"',
    '"2024-01-05 10:20:30"', '"2024-01-05T10:20:30.123456789+02:00"', '"2024-02-30"', '"19000"', '"1700000000"',
    '"aGVsbG8="', '"aGVsbG8"', '"+1.5"', '"1e2"', '".5"', '"1,5"', '"\\u00e9t\\u00e9"', '"tab\\there"',
    '"\\ud83d\\ude00"', '"\\ud800"', "[]", "[1,2,3]", "[1,null]", '["a","b"]', "[1.5]", '["2024-01-05"]', "[[1]]",
    "{}", '{"x":1}', '{"x":1,"y":"a"}', '{"a":1,"b":null}', '{"x":"1"}', '{"a":1.25,"b":"2"}', '{"x":[1,{"y":2.50}]}',
    "1700000000", "-1700000000", "99999999999999",
]

FLOATS = ["0.1", "100.0", "1234567.0", "12345678.0", "0.001", "0.0001", "1e21", "1e22", "1e23", "2e23", "5e-324",
          "1e-322", "2.2250738585072014E-308", "9007199254740993", "0.30000000000000004", "123456789.123", "1.0E-5",
          "9.999999999999999e22", "8.41e21", "5.0e-7", "-2.5e-8", "1e16", "1.5e300", "3.0e10"]


# One schema with a column of each type (one Spark job for the whole grid); each case sets one column.
LITERAL_SCHEMA = ", ".join(f"c{i} {t}" for i, t in enumerate(TYPES))


def literal(type_: str, text: str) -> tuple[str, bytes]:
    """The (schema, value) of the grid's case putting the JSON ``text`` in the column of ``type_``."""
    return LITERAL_SCHEMA, f'{{"c{TYPES.index(type_)}":{text}}}'.encode()


def literal_cases() -> list[Case]:
    return [Case(*literal(t, lit)) for t in TYPES for lit in LITERALS]


ORDER = "id BIGINT, customer STRING, amount DOUBLE, status STRING, placed_at TIMESTAMP, qty INT"
ORDER_VALUES = [
    b'{"id": 1, "customer": "customer-00001", "amount": 0.37, "status": "PAID", "placed_at": "2026-11-24T00:00:00.001000+00:00", "qty": 1}',
    None, b"", b" ", b"\n\t", b"null", b"1", b'"x"', b"[]", b'[{"id":1}]', b"{}", b"{ }", b'{"id":1}{"id":2}',
    b'{"id":1} trailing', b'{"id":1}}', b'{"id":1,}', b'{"id":1', b'{"id":1 /* comment */}', b"{id:1}", b"{'id':1}",
    b'\xef\xbb\xbf{"id":1}', b'{"id":1}\xef\xbb\xbf', b'{"id":01}', b'{"id":+1}', b'{"id":1.}', b'{"id":.5}',
    b'{"id":0x10}', b'{"id":1,"id":2}', b'{"id":"1","id":2}', b'{"id":2,"id":null}', b'{"ID":1}', b'{"Id":1,"id":2}',
    b'{"\\u0069d":7}', b'{"placed_at":"2026-11-24T00:00:00Z","placed_at":"junk"}',
    b'{"placed_at":"junk","placed_at":"2026-11-24T00:00:00Z"}', b'{"pl\\u0061ced_at":"junk","placed_at":"2026-11-24"}',
    b'{"customer":"\xff\xfe"}', b'{"customer":"caf\xc3\xa9"}', b'{"customer":"\xe2\x82"}', b'{"customer":"\xc0\xaf"}',
    b'{"customer":"\xed\xa0\x80"}', b'{"customer":"\xf4\x90\x80\x80"}', b'{"customer":"a\x00b"}',
    b'{"customer":"\\u0000"}', b'{"customer":"line\nbreak"}', b'{"customer":"\\"quoted\\" \\\\ \\/ \\b\\f\\n\\r\\t"}',
    b'{"customer":"\\x41"}', b'{"customer":"\\u12"}', b'{"customer":"\\ud83d\\ude00"}', b'{"customer":"\\ude00\\ud83d"}',
    b'{"customer":{"nested":[1,2.50,"x\\u0001y",null,true]}}', b'{"customer":[1e2,-0.0,1E+2,0.5e-10]}',
    b'{"customer":{"k":"\\ud800"}}', b'{"customer":12345678901234567890123456789}', b'{"customer":NaN}',
    b'{"customer":-Infinity}', b'{"amount":NaN}', b'{"amount":-Infinity}', b'{"amount":Infinity}', b'{"amount":+INF}',
    b'{"amount":"NaN"}', b'{"amount":"-Infinity"}', b'{"amount":"1.5"}', b'{"amount":1e999}', b'{"amount":-1e999}',
    b'{"amount":123456789012345678901234567890}', b'{"qty":2147483648}', b'{"qty":-2147483648}', b'{"qty":1e0}',
    b'{"qty":true}', b'{"qty":"7"}', b'{"status":true}', b'{"status":["PAID"]}', b'{"extra":{"deep":[[[{"x":NaN}]]]},"id":3}',
    b'{"extra":[1,2,', b'{"extra":"\xff","id":4}', b'{"extra":tru,"id":4}', b'{"extra":nul,"id":4}',
    b'{"extra":nan,"id":4}', b'{"extra":INF,"id":4}', b'{"extra":-INF,"id":4}', b'{"extra":+Infinity,"id":4}',
    b'{"extra":infinity,"id":4}', b'{"extra":\'single\',"id":4}', b'{"customer":"it\\\'s"}', b'  {"id":5}  ',
    b'\r\n{"id":6}\r\n', b'\x0c{"id":7}', b'\x00{"id":8}', b'{"id":9}\x00', b'{"id" : 10 , "qty" : 11}',
    b'{"placed_at":"T10:00:00"}', b'{"placed_at":"10:00:00"}', b'{"placed_at":99999999999999}',
    b'{"placed_at":-9223372036854}', b'{"placed_at":9223372036854}', b'{"placed_at":9223372036855}',
    b'{"placed_at":9223372036854775807}', b'{"placed_at":9223372036854775808}', b'{"placed_at":1.5}',
    b'{"placed_at":"2026-11-24T00:00:00+18:00"}', b'{"placed_at":"2026-11-24T00:00:00+18:01"}',
    b'{"placed_at":"2026-11-24T00:00:00-07"}', b'{"placed_at":"2026-11-24T00:00:00+5:30"}',
    b'{"placed_at":"2026-11-24T00:00:00+05:3"}', b'{"placed_at":"2026-11-24T00:00:00 UTC"}',
    b'{"placed_at":"2026-11-24T00:00:00GMT+01:00"}', b'{"placed_at":"2026-11-24T00:00:00 Europe/Paris"}',
    b'{"placed_at":"2026-11-24T00:00:00 Mars/Olympus"}', b'{"placed_at":"2026-11-24T00:00:00EST"}',
    b'{"placed_at":"2026-11-24T00:00:00 CTT"}', b'{"placed_at":"2026-11-24T00:00:00+0530"}',
    b'{"placed_at":"2026-11-24T00:00:00+053000"}', b'{"placed_at":"2026-11-24T00:00:00.1234567Z"}',
    b'{"placed_at":"2026-11-24T24:00:00Z"}', b'{"placed_at":"2026-11-24T23:60:00Z"}', b'{"placed_at":"2026-11-24T23:59:60Z"}',
    b'{"placed_at":"2024-02-29T12:00:00Z"}', b'{"placed_at":"2023-02-29T12:00:00Z"}', b'{"placed_at":"0001-01-01T00:00:00Z"}',
    b'{"placed_at":"9999-12-31T23:59:59.999999Z"}', b'{"placed_at":"-0001-01-01T00:00:00Z"}',
    b'{"placed_at":"+294247-01-10T04:00:54.775807Z"}', b'{"placed_at":"+294247-01-10T04:00:54.775808Z"}',
    b'{"placed_at":"2026-11-24T"}', b'{"placed_at":"2026-11-24T10"}', b'{"placed_at":"2026-11-24T10:20"}',
    b'{"placed_at":"2026-11-24 10:20:30 "}', b'{"placed_at":"\\t2026-11-24\\n"}', b'{"placed_at":"2026-11-24T10:20:30.Z"}',
    b'{"placed_at":"2026-11-24T10:20:30.123+01:00"}', b'{"placed_at":"2026-11-24T10:20:30,5"}', b'{"placed_at":""}',
]

TRICKY = [
    Case("a INT", b'{"x":' + b"[" * n + b"]" * n + b',"a":1}') for n in (500, 997, 998, 999, 1000, 1200)
] + [
    Case("a INT", b'{"x":' + b'{"y":' * n + b"1" + b"}" * n + b',"a":1}') for n in (998, 999)
] + [
    Case("a INT, x STRING", b'{"a":1,"x":' + number + b"}")
    for number in (b"1" * 1000, b"1" * 1001, b"-" + b"1" * 1000, b"0." + b"1" * 999, b"1." + b"1" * 999, b"1." + b"1" * 1000,
                   b"1" * 998 + b"e10", b"1" * 995 + b".1e1234")
] + [
    Case("d DOUBLE", b'{"d":' + b"1" * 400 + b"}"),
    Case("d DECIMAL(38,0)", b'{"d":"' + b"1" * 38 + b'"}'),
    Case("d DECIMAL(38,0)", b'{"d":"' + b"1" * 39 + b'"}'),
    Case("d DECIMAL(5,2)", b'{"d":1e-999999999}'),
    Case("d DECIMAL(5,2)", b'{"d":1e999999999}'),
    Case("d DECIMAL(5,2)", b'{"d":"1_0"}'),
    Case("d DECIMAL(5,2)", b'{"d":" 1.5"}'),
    Case("d DECIMAL(5,2)", b'{"d":"\\u0661"}'),
    Case("d DECIMAL(5,2)", b'{"d":"1.5","d":"x"}'),
    Case("d DECIMAL(5,2)", b'{"d":"x","d":1.5}'),
    Case("d DECIMAL(2,2)", b'{"d":0.995}'),
    Case("d DECIMAL(2,2)", b'{"d":-0.994}'),
    Case("b BINARY", b'{"b":"aGVs bG8="}'),
    Case("b BINARY", b'{"b":"aGVsbG8=\\n"}'),
    Case("b BINARY", b'{"b":"aGV sbG8="}'),
    Case("b BINARY", b'{"b":"aA==aA=="}'),
    Case("b BINARY", b'{"b":"aA=a"}'),
    Case("b BINARY", b'{"b":"-_8="}'),
    Case("b BINARY", b'{"b":"\\taGVsbG8=\\t"}'),
    Case("v VOID, a INT", b'{"v":[1,{"x":"y"}],"a":1}'),
    Case("m MAP<STRING, INT>", b'{"m":{"a":1,"a":2}}'),
    Case("m MAP<STRING, INT>", b'{"m":{"a":"x","a":2}}'),
    Case("m MAP<STRING, DATE>", b'{"m":{"a":"2024-01-05","b":null}}'),
    Case("s STRUCT<a: STRUCT<b: ARRAY<MAP<STRING, TIMESTAMP>>>>", b'{"s":{"a":{"b":[{"k":"2026-11-24T10:00:00Z"},null]}}}'),
    Case("s STRUCT<a: STRUCT<b: ARRAY<MAP<STRING, TIMESTAMP>>>>", b'{"s":{"a":{"b":[{"k":"junk"}]}}}'),
    Case("s STRUCT<x: INT, y: STRING>", b'{"s":{"x":1,"x":"a"}}'),
    Case("s STRUCT<`a b`: INT, `c.d`: STRING>", b'{"s":{"a b":1,"c.d":"x"}}'),
    Case("`weird name` INT, `x.y` STRING", b'{"weird name":1,"x.y":"z"}'),
    Case("t TIMESTAMP_NTZ", b'{"t":"2026-11-24T10:00:00Z"}'),
    # A key twice whose earlier text is plain in form but no such day; keys and values with escapes.
    Case("d DATE", b'{"d":"2026-02-30","d":"2026-02-01"}'),
    Case("t TIMESTAMP", b'{"t":"2026-02-30T00:00:00Z","t":"2026-02-01T00:00:00Z"}'),
    Case("d DATE, m STRING", b'{"m":"{\\"d\\":\\"junk\\"}","d":"2026-02-01"}'),
    Case("d DATE, `caf\u00e9` INT", b'{"caf\\u00e9":1,"d":"2026-02-01"}'),
    Case("p DECIMAL(5,2), m STRING", b'{"m":"{\\"p\\":\\"x\\"}","p":1.5}'),
    Case("t TIMESTAMP_NTZ", b'{"t":"2026-11-24 10:00:00.5"}'),
    Case("t TIMESTAMP_LTZ", b'{"t":"2026-11-24 10:00:00.5"}'),
    *[Case("d DATE", f'{{"d":"{text}"}}'.encode()) for text in (
        "-200000", "-141427", "-141428", "-500000", "2147483647", "2147483648", "+19000", "12345678",
        "2024-01-05GMT", "2024GMT-01-05", "2024-01-05 10:00", "2024-13-01", "0000-01-01", "-0001-12-31", "+1234567-01-01",
        "2024-01-5", "2024-1-05T", "2024-01-", "202-01-01", "2024-001-01", "\\u00a02024-01-05")],
]

ZONED = [
    Case("ts TIMESTAMP, d DATE, n TIMESTAMP_NTZ", f'{{"ts":"{text}","d":"{text}","n":"{text}"}}'.encode(), zone)
    for zone in ("America/New_York", "+05:30", "Asia/Kolkata", "Etc/UTC")
    for text in ("2026-03-08T02:30:00", "2026-11-01T01:30:00", "2026-11-01 01:30:00.25", "2026-11-24", "2026-11-24T10:00:00Z",
                 "2026-11-24T10:00:00-03:00", "1900-01-01T00:00:00", "0100-01-01T00:00:00", "+12026-06-01T00:00:00")
] + [  # each type alone: text plain for its column takes the fast path, whose zone must be the session's
    Case(f"v {type_}", f'{{"v":"{text}"}}'.encode(), zone)
    for zone in ("America/New_York", "+05:30", "Etc/UTC")
    for type_ in ("TIMESTAMP", "TIMESTAMP_NTZ", "DATE")
    for text in ("2026-03-08T02:30:00", "2026-11-01 01:30:00.25", "2026-11-24T10:00:00", "2026-11-24T10:00:00Z",
                 "2026-11-24T10:00:00+05:30", "2026-11-24")
]


FLOAT_SCHEMA = "s STRING, a ARRAY<STRING>"


def float_cases() -> list[Case]:
    """Floats in a STRING column: Spark writes them as Java prints a double."""
    return [Case(FLOAT_SCHEMA, f'{{"s":{f},"a":[{f},{{"x":{f}}}]}}'.encode()) for f in FLOATS]


def random_documents(count: int = 160, seed: int = 35) -> list[Case]:
    """Nested documents with random values (seeded): each field sometimes of the wrong type."""
    rng = random.Random(seed)
    schema = ("id BIGINT, name STRING, score DOUBLE, ok BOOLEAN, tags ARRAY<STRING>, "
              "attrs MAP<STRING, INT>, geo STRUCT<lat: DOUBLE, lon: DOUBLE, label: STRING>, "
              "price DECIMAL(12,4), day DATE, at TIMESTAMP, raw BINARY, level SMALLINT")

    def scalar() -> object:
        return rng.choice([
            rng.randint(-10**6, 10**6), rng.randint(-2**70, 2**70), rng.uniform(-1e6, 1e6), rng.random() * 10 ** rng.randint(-30, 30),
            rng.choice([True, False, None]), "".join(rng.choice("abc\u00e9\u4e2d\"\\\n\u0001 ") for _ in range(rng.randint(0, 8))),
            f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}", f"2026-11-24T{rng.randint(0, 23):02d}:00:00Z",
        ])

    def value(depth: int = 0) -> object:
        roll = rng.random()
        if depth < 3 and roll < 0.15:
            return [value(depth + 1) for _ in range(rng.randint(0, 3))]
        if depth < 3 and roll < 0.25:
            return {rng.choice(["lat", "lon", "label", "a", "b"]): value(depth + 1) for _ in range(rng.randint(0, 3))}
        return scalar()

    good = {
        "id": lambda: rng.randint(-2**63, 2**63 - 1), "name": lambda: scalar() if rng.random() < 0.5 else "n",
        "score": lambda: rng.uniform(-1e9, 1e9), "ok": lambda: rng.random() < 0.5,
        "tags": lambda: [rng.choice(["x", "y", None]) for _ in range(rng.randint(0, 4))],
        "attrs": lambda: {k: rng.randint(-5, 5) for k in rng.sample("abcde", rng.randint(0, 3))},
        "geo": lambda: {"lat": rng.uniform(-90, 90), "lon": rng.uniform(-180, 180), "label": "g"},
        "price": lambda: round(rng.uniform(-1e7, 1e7), rng.randint(0, 6)),
        "day": lambda: f"20{rng.randint(0, 99):02d}-{rng.randint(1, 12)}-{rng.randint(1, 28)}",
        "at": lambda: rng.choice([f"2026-11-24T10:{rng.randint(0, 59):02d}:00.{rng.randint(0, 999999):06d}+01:00", rng.randint(0, 2**31)]),
        "raw": lambda: rng.choice(["aGVsbG8=", "", "AAEC", "bad!"]), "level": lambda: rng.randint(-40000, 40000),
    }
    cases = []
    for _ in range(count):
        doc = {}
        for name, make in good.items():
            roll = rng.random()
            if roll < 0.6:
                doc[name] = make()
            elif roll < 0.75:
                doc[name] = value()
            elif roll < 0.85:
                doc[name] = None
        if rng.random() < 0.3:
            doc["extra"] = value()
        text = json.dumps(doc, ensure_ascii=rng.random() < 0.5)
        cases.append(Case(schema, text.encode()))
    return cases


def corpus() -> list[Case]:
    return [*literal_cases(), *(Case(ORDER, v) for v in ORDER_VALUES), *TRICKY, *ZONED, *float_cases(), *random_documents()]
