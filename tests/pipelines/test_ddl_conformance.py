"""``api.pipelines.ddl`` against Spark's own DDL parser: the same schemas to both, the same verdict
and the same top-level column names.

Spark's verdict is the one a run reaches: ``_parse_datatype_string`` (as ``spark_jobs.decode``
calls it) must give a struct. Every schema's verdict is pinned here, so the fast suite checks
``ddl.py`` alone and the slow one checks that Spark still reads each schema the same way.
Where ``ddl.py`` refuses a schema Spark parses, a run would fail later; ``STRICTER`` says why.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from api.pipelines.ddl import ddl_field_names
from tests.fixtures.local_spark import local_spark

PRIMITIVES = [
    "STRING", "INT", "INTEGER", "BIGINT", "LONG", "SMALLINT", "SHORT", "TINYINT", "BYTE", "DOUBLE", "FLOAT", "REAL",
    "BOOLEAN", "BINARY", "DATE", "TIMESTAMP", "TIMESTAMP_NTZ", "TIMESTAMP_LTZ", "VOID",
    "DECIMAL", "DEC", "NUMERIC",
]

# (schema, its top-level columns; None: refused by both)
AGREED: list[tuple[str, list[str] | None]] = [
    *[(f"c {t}", ["c"]) for t in PRIMITIVES],
    ("id BIGINT, name STRING, score DOUBLE, born DATE, seen TIMESTAMP", ["id", "name", "score", "born", "seen"]),
    # decimal(p, s)
    ("d DECIMAL(10, 2)", ["d"]),
    ("d DECIMAL(38, 38)", ["d"]),
    ("d DECIMAL(1)", ["d"]),
    ("d dec(5,1), n numeric( 10 , 2 )", ["d", "n"]),
    ("d DECIMAL(010, 02)", ["d"]),
    ("d DECIMAL(39)", None),
    ("d DECIMAL(5, 6)", None),
    ("d DECIMAL()", None),
    ("d DECIMAL(10,)", None),
    ("d DECIMAL(,2)", None),
    ("d DECIMAL(10 2)", None),
    ("d DECIMAL(10, 2, 1)", None),
    ("d DECIMAL(-1)", None),
    ("d DECIMAL(1e1)", None),
    ("d DECIMAL(99999999999999999999)", None),
    ("d DECIMAL(10, 2", None),
    # nested types
    ("tags ARRAY<STRING>, m MAP<STRING, INT>, geo STRUCT<lat: DOUBLE, lon: DOUBLE>", ["tags", "m", "geo"]),
    ("a ARRAY<ARRAY<INT>>", ["a"]),
    ("m MAP<STRING,ARRAY<STRUCT<x:INT,y:STRING>>>", ["m"]),
    ("s STRUCT<x INT, y STRING>", ["s"]),
    ("s STRUCT<x: INT NOT NULL COMMENT 'c', `y z`: ARRAY<DECIMAL(5,2)>>", ["s"]),
    ("s STRUCT<a: INT, b: ARRAY<MAP<STRING, STRUCT<c: DECIMAL(5,2) NOT NULL COMMENT 'deep'>>>>", ["s"]),
    ("a ARRAY < INT >, b array<int >, c MAP< STRING ,INT>", ["a", "b", "c"]),
    ("a ARRAY<INT", None),
    ("m MAP<STRING, INT>>", None),
    ("a ARRAY<INT>>", None),
    ("s STRUCT<x: INT", None),
    ("a INT)", None),
    ("a ARRAY<>", None),
    ("a ARRAY<INT, INT>", None),
    ("m MAP<STRING>", None),
    ("m MAP<STRING, INT, INT>", None),
    ("a ARRAY<INT NOT NULL>", None),
    ("s STRUCT<x: INT,>", None),
    # names
    ("`user id` STRING, `a,b` INT, `a<b>` INT, `a:b` INT, `` INT", ["user id", "a,b", "a<b>", "a:b", ""]),
    ("select INT, not INT, null INT, comment STRING COMMENT 'x', struct INT, array INT, int INT", [
        "select", "not", "null", "comment", "struct", "array", "int"]),
    ("_a INT, a1 INT, 1a INT, 1_ INT, 12_3 INT, 0x1 INT, 1E INT, 1e5x INT, 1Lx INT", [
        "_a", "a1", "1a", "1_", "12_3", "0x1", "1E", "1e5x", "1Lx"]),
    ("123 INT", None),  # numbers, not names, to Spark's lexer
    ("1L INT", None),
    ("1l INT", None),
    ("1S INT", None),
    ("1Y INT", None),
    ("1e5 INT", None),
    ("1E5 INT", None),
    ("1D INT", None),
    ("1F INT", None),
    ("1BD INT", None),
    ("1.5 INT", None),
    ("a.b INT", None),
    ("a-b INT", None),
    ("名前 STRING", None),
    ('"a" INT', None),
    ("`a` `INT`", None),
    # NOT NULL and COMMENT
    ("id BIGINT NOT NULL", ["id"]),
    ("id BIGINT not  null", ["id"]),
    ("id BIGINT COMMENT 'who'", ["id"]),
    ('id BIGINT COMMENT "who"', ["id"]),
    ("id BIGINT NOT NULL COMMENT 'who'", ["id"]),
    ("id BIGINT COMMENT 'it''s'", ["id"]),
    ("id BIGINT COMMENT 'a' 'b'", ["id"]),
    ("id BIGINT COMMENT 'it\\'s, (really) <odd>: ok', b INT", ["id", "b"]),
    ("id BIGINT COMMENT R'C:\\temp', b INT", ["id", "b"]),
    ("id BIGINT COMMENT ''", ["id"]),
    ("m MAP<STRING, INT> COMMENT 'x'", ["m"]),
    ("id BIGINT NULL", None),
    ("id BIGINT COMMENT 'who' NOT NULL", None),
    ("id BIGINT NOT NULL NOT NULL", None),
    ("id BIGINT NOT", None),
    ("id BIGINT COMMENT", None),
    ("id BIGINT COMMENT NULL", None),
    ("id BIGINT COMMENT 'x' COMMENT 'y'", None),
    ("id BIGINT COMMENT 'unclosed", None),
    ("id BIGINT DEFAULT 1", None),
    ("id BIGINT GENERATED ALWAYS AS (1)", None),
    # VARIANT, at the top and inside (formats.variant)
    ("v VARIANT, s STRUCT<w: VARIANT>, a ARRAY<VARIANT>, m MAP<STRING, VARIANT>", ["v", "s", "a", "m"]),
    # case
    ("a string, B String, c STRING", ["a", "B", "c"]),
    ("a ArRaY<sTrInG>, b Map<String, Struct<X: Int>>", ["a", "b"]),
    ("Id Bigint Not Null Comment 'x'", ["Id"]),
    # separators, white space and SQL comments
    ("a: INT, b:STRING, c : DOUBLE", ["a", "b", "c"]),
    ("  a\tINT ,\n  b   STRING\n", ["a", "b"]),
    ("a INT /* a comment, with a comma */, b INT", ["a", "b"]),
    ("a INT /* nested /* comments */ too */", ["a"]),
    ("a INT -- the rest of the line, b INT", ["a"]),
    ("a INT, -- first\nb INT -- second", ["a", "b"]),
    ("a: INT /* c */", ["a"]),
    ("a: INT -- c\n, b INT", ["a", "b"]),
    ("struct<a: INT> -- c", ["a"]),
    # Spark reads top-level 'name: TYPE' columns only wrapped in STRUCT<…>, whose '>' a final -- comment swallows.
    ("a: INT -- c", None),
    ("a INT, b: INT -- c\n", None),
    ("a INT /* unclosed", None),
    ("a INT /*+ hint */", None),
    ("-- only a comment", None),
    # the whole schema as one STRUCT<…>
    ("struct<a: INT, b: STRING>", ["a", "b"]),
    ("STRUCT <a INT>", ["a"]),
    ("struct<a: INT>, b INT", None),
    ("struct<a: INT>>", None),
    # missing, unknown and misplaced parts
    ("a", None),
    ("a INT, b", None),
    ("a:", None),
    ("INT", None),
    ("ARRAY<INT>", None),
    ("MAP<STRING, INT>", None),
    ("a INT b STRING", None),
    ("a INT,", None),
    (", a INT", None),
    ("a INT,, b INT", None),
    ("a INT;", None),
    ("a foo", None),
    ("a object", None),
    ("a bool", None),
    ("id BIGINTEGER", None),
    ("a DOUBLE PRECISION", None),
    ("a BIGINT UNSIGNED", None),
    ("a STRING(10)", None),
    ("a TIMESTAMP WITH TIME ZONE", None),
    ("a CHAR", None),  # CHAR and VARCHAR need a length
    ("a VARCHAR", None),
    ("a STRING COLLATE no_such_collation", None),
    ("a INT COLLATE UTF8_LCASE", None),
]

# (schema Spark parses, why a run would fail on it after all)
STRICTER: list[tuple[str, str]] = [
    ("c CHAR(3)", "from_json refuses CHAR/VARCHAR (UNSUPPORTED_CHAR_OR_VARCHAR_AS_STRING)"),
    ("c VARCHAR(10)", "from_json refuses CHAR/VARCHAR (UNSUPPORTED_CHAR_OR_VARCHAR_AS_STRING)"),
    ("m MAP<INT, STRING>", "from_json takes only STRING map keys (INVALID_JSON_MAP_KEY_TYPE)"),
    ("m MAP<BINARY, STRING>", "from_json takes only STRING map keys (INVALID_JSON_MAP_KEY_TYPE)"),
    ("a ARRAY<MAP<ARRAY<INT>, STRING>>", "from_json takes only STRING map keys, at any depth"),
    ("d DECIMAL(0, 0)", "Arrow's decimals start at precision 1: to_arrow_schema fails"),
    ("i INTERVAL", "from_json cannot make CalendarIntervalType values (NOT_IMPLEMENTED)"),
    ("i INTERVAL YEAR TO MONTH", "from_json cannot make YearMonthIntervalType values (NOT_IMPLEMENTED)"),
    ("i INTERVAL DAY TO SECOND", "an Arrow duration, which Delta refuses as a column type"),
    ("t TIME", "an Arrow time64, which Delta refuses as a column type"),
    ("s STRUCT<>", "Parquet cannot hold a struct without fields"),
    ("s STRUCT< >", "Parquet cannot hold a struct without fields"),
    ("struct<>", "a schema of no columns: nothing for from_json to decode"),
    ("", "a schema of no columns: nothing for from_json to decode"),
    ("   ", "a schema of no columns: nothing for from_json to decode"),
    ("/* only a comment */", "a schema of no columns: nothing for from_json to decode"),
    ("a INT, a STRING", "the job's select of `a` is ambiguous (AMBIGUOUS_REFERENCE_TO_FIELDS)"),
    ("a INT, A STRING", "Spark resolves names ignoring case: `a` is ambiguous just the same"),
    ("`a``b` INT", "the job selects columns as _parsed.`name`, which a backquote in the name breaks"),
    ("s STRING COLLATE UTF8_LCASE", "Delta keeps no collation; and collation names cannot be checked without the JVM"),
]


def _ours(ddl: str) -> list[str] | None:
    try:
        return ddl_field_names(ddl)
    except ValueError:
        return None


@pytest.mark.parametrize(("ddl", "columns"), AGREED, ids=[ddl for ddl, _ in AGREED])
def test_ddl_py_reads_each_schema_as_pinned(ddl: str, columns: list[str] | None) -> None:
    assert _ours(ddl) == columns


@pytest.mark.parametrize("ddl", [ddl for ddl, _ in STRICTER])
def test_ddl_py_refuses_what_a_run_would_fail_on(ddl: str) -> None:
    with pytest.raises(ValueError):
        ddl_field_names(ddl)


def test_refusals_name_the_problem_without_echoing_the_schema() -> None:
    for ddl, message in [
        ("id BIGINT, secret_column_name BIGINTEGER", "unknown type 'BIGINTEGER' (at character 31)"),
        ("c CHAR(3)", "CHAR is refused by Spark's JSON reader: use STRING (at character 3)"),
        ("m MAP<INT, STRING>", "a map's keys must be STRING for Spark's JSON reader (at character 7)"),
        ("id BIGINT COMMENT 'a private note' NOT NULL", "expected ',' or the end (at character 36)"),
        ("a INT, A STRING", "duplicate column(s), compared ignoring case: A, a"),
        ("a INT,", "expected a column name at the end"),
        ("  ", "the schema is empty"),
    ]:
        with pytest.raises(ValueError) as refused:
            ddl_field_names(ddl)
        assert str(refused.value) == message


@pytest.fixture(scope="module")
def spark_columns() -> Iterator[Callable[[str], list[str] | None]]:
    """Spark's reading of a schema, through the test process's local Spark (``tests/fixtures/local_spark.py``)."""
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException
    from pyspark.sql.types import StructType, _parse_datatype_string

    local_spark()  # the process's one JVM: ``_parse_datatype_string`` uses the active context

    def read(ddl: str) -> list[str] | None:
        try:
            parsed = _parse_datatype_string(ddl)
        except (PySparkException, Py4JJavaError):
            return None
        return [f.name for f in parsed.fields] if isinstance(parsed, StructType) else None

    yield read


@pytest.mark.slow
@pytest.mark.parametrize(("ddl", "columns"), AGREED, ids=[ddl for ddl, _ in AGREED])
def test_spark_and_ddl_py_read_each_schema_alike(spark_columns: Callable[[str], list[str] | None], ddl: str,
                                                 columns: list[str] | None) -> None:
    assert (spark_columns(ddl), _ours(ddl)) == (columns, columns)


@pytest.mark.slow
@pytest.mark.parametrize(("ddl", "why"), STRICTER, ids=[ddl for ddl, _ in STRICTER])
def test_spark_parses_what_ddl_py_refuses_on_purpose(spark_columns: Callable[[str], list[str] | None], ddl: str,
                                                     why: str) -> None:
    # If Spark starts refusing one of these, it moves to AGREED; if a run learns to carry it, ddl.py should accept it.
    assert spark_columns(ddl) is not None and _ours(ddl) is None, why
