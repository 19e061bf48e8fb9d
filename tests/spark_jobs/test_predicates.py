"""Expectations' predicates (``spark_jobs.contract.predicates``): the language parses as Spark's SQL
reads it (precedence, three-valued logic, case-insensitive names), evaluates on Arrow rows to the
rows it is FALSE for (NULL passes, as a Delta CHECK), and refuses what is not in it with a message
naming a position, never the text or a value."""

from __future__ import annotations

from decimal import Decimal

import pyarrow as pa
import pytest

from spark_jobs.contract.predicates import MAX_DEPTH, MAX_LENGTH, PredicateError, columns_of, parse, violations

ROWS = pa.table({
    "id": [1, 2, None, 4],
    "amount": pa.array([Decimal("1.50"), Decimal("-2.00"), None, Decimal(0)], pa.decimal128(10, 2)),
    "Email": ["a@x.com", "bad", None, "c@y.org"],
    "customer": pa.array([{"tier": "gold"}, {"tier": "silver"}, None, {"tier": None}]),
    "ratio": [0.5, 2.0, None, 1.0],
})


def _violating(predicate: str) -> list[int]:
    """The ids (positions, for the row without one) of the rows the predicate is FALSE for."""
    mask = violations(parse(predicate), ROWS).to_pylist()
    return [i for i, violated in enumerate(mask) if violated]


@pytest.mark.parametrize(("predicate", "violating"), [
    ("amount > 0", [1, 3]),  # the row without an amount passes: NULL is not FALSE
    ("amount IS NOT NULL AND amount > 0", [1, 2, 3]),
    ("amount >= 1.5", [1, 3]),  # 1.5 is an exact decimal, equal to 1.50
    ("amount * 2 >= 1.5e0", [1, 3]),
    ("id IN (1, 4)", [1]),
    ("id NOT IN (1, 4)", [0, 3]),
    ("id NOT IN (1, NULL)", [0]),  # not found in a list holding NULL: NULL, which passes
    ("id BETWEEN 2 AND 4", [0]),
    ("id NOT BETWEEN 2 AND 4", [1, 3]),
    ("email LIKE '%@%.%'", [1]),
    ("email NOT LIKE 'b_d'", [1]),
    ("length(email) > 3", [1]),
    ("lower(EMAIL) <> 'bad'", [1]),  # names resolve case-insensitively, as in Spark
    ("upper(trim(email)) = 'BAD'", [0, 3]),
    ("customer.tier = 'gold' OR customer.tier IS NULL", [1]),
    ("`customer`.`tier` = 'gold'", [1]),
    ("coalesce(id, 0) <=> 0", [0, 1, 3]),
    ("id <=> NULL", [0, 1, 3]),
    ("id / 0 > 1", []),  # a zero divisor gives NULL, as Spark's non-ANSI division
    ("id / 2 = 0.5", [1, 3]),  # into DOUBLE: 1 / 2 is 0.5, not 0
    ("-id < -1", [0]),
    ("abs(amount) < 2", [1]),
    ("NOT (id = 2)", [1]),
    ("NOT id = 2", [1]),  # NOT binds looser than a comparison
    ("id = 1 OR id = 2 AND amount > 0", [1, 3]),  # AND binds tighter than OR
    ("(id = 1 OR id = 2) AND amount > 0", [1, 3]),
    ("id + 1 * 2 = 3", [1, 3]),  # 1 + 2: * binds tighter than +
    ("ratio == 0.5 OR ratio != 0.5 AND TRUE", []),
    ("FALSE", [0, 1, 2, 3]),
    ("NULL", []),
])
def test_a_predicate_is_false_for_the_rows_it_names(predicate: str, violating: list[int]) -> None:
    assert _violating(predicate) == violating


def test_the_columns_read_are_listed_dotted() -> None:
    assert columns_of(parse("customer.tier = 'a' AND coalesce(id, amount) > 0 OR `Email` LIKE 'x'")) == {
        "customer.tier", "id", "amount", "Email"}


@pytest.mark.parametrize(("predicate", "message"), [
    ("", "the predicate is empty"),
    ("id >", "the predicate ends too soon"),
    ("id = = 2", "unexpected '=' at 6"),
    ("id IN 1", "expected '(' at 7"),
    ("id NOT 1", "expected IN, BETWEEN or LIKE after NOT at 8"),
    ("id BETWEEN 1 OR 2", "expected AND at 14"),
    ("email LIKE email", "LIKE takes a string pattern at 12"),
    ("select 1", "unexpected number at 8"),
    ("id = 1; DROP TABLE t", "unexpected character at 7"),
    ("exec('x') = 1", "a predicate calls only length, lower, upper, trim, abs, coalesce (at 1)"),
    ("length(email, id) > 1", "length takes 1 argument (at 1)"),
    ("customer. = 1", "expected a field name at 11"),
])
def test_what_is_not_in_the_language_is_refused_where_it_leaves_it(predicate: str, message: str) -> None:
    with pytest.raises(PredicateError) as refused:
        parse(predicate)
    assert str(refused.value) == message


def test_size_and_depth_are_bounded() -> None:
    with pytest.raises(PredicateError, match=f"longer than {MAX_LENGTH}"):
        parse("id = 1 OR " * 300 + "id = 2")
    with pytest.raises(PredicateError, match=f"deeper than {MAX_DEPTH}"):
        parse("(" * (MAX_DEPTH + 1) + "id" + ")" * (MAX_DEPTH + 1) + " = 1")
    with pytest.raises(PredicateError, match=f"deeper than {MAX_DEPTH}"):
        parse("NOT " * (MAX_DEPTH + 1) + "id = 1")
    for nested in ("lower(" * 200 + "email" + ")" * 200 + " = 'a'", "- " * 600 + "id = 1"):
        with pytest.raises(PredicateError, match=f"deeper than {MAX_DEPTH}"):  # not Python's recursion limit
            parse(nested)
    assert _violating("(" * 10 + "id = 1" + ")" * 10) == [1, 3]


@pytest.mark.parametrize(("predicate", "message"), [
    ("id = 'a'", "= does not apply to int64, string"),
    ("email + 1 > 2", "+ does not apply to string, int64"),
    ("NOT id", "NOT does not apply to int64"),
    ("nope > 1", "column nope is not in the rows"),
    ("customer.nope = 1", "column customer.nope is not in the rows"),
    ("id.x = 1", "column id.x: 'x' is not a field of a struct"),
    ("id + 1", "the predicate is not a condition (it gives a value, not true or false)"),
])
def test_a_predicate_that_does_not_fit_the_rows_says_why_without_their_values(predicate: str, message: str) -> None:
    with pytest.raises(PredicateError) as refused:
        violations(parse(predicate), ROWS)
    assert str(refused.value) == message
    assert "bad" not in str(refused.value) and "gold" not in str(refused.value)


def test_two_columns_differing_only_in_case_are_refused_as_ambiguous() -> None:
    rows = pa.table({"a": [1], "A": [2]})
    assert violations(parse("a = 1"), rows).to_pylist() == [False]  # an exact match wins
    with pytest.raises(PredicateError, match="names 2 columns differing in case"):
        violations(parse("Ab = 1"), pa.table({"ab": [1], "AB": [2]}))


def test_an_empty_batch_has_no_violations() -> None:
    assert violations(parse("id > 0"), ROWS.slice(0, 0)).to_pylist() == []


SPARK_READS = [
    ("amount > 0", [1, 3]), ("amount IS NOT NULL AND amount > 0", [1, 2, 3]), ("amount >= 1.5", [1, 3]),
    ("id NOT IN (1, NULL)", [0]), ("id NOT BETWEEN 2 AND 4", [1, 3]), ("email NOT LIKE 'b_d'", [1]),
    ("lower(EMAIL) <> 'bad'", [1]), ("upper(trim(email)) = 'BAD'", [0, 3]),
    ("customer.tier = 'gold' OR customer.tier IS NULL", [1]), ("coalesce(id, 0) <=> 0", [0, 1, 3]),
    ("id / 0 > 1", []), ("id / 2 = 0.5", [1, 3]), ("NOT id = 2", [1]), ("id = 1 OR id = 2 AND amount > 0", [1, 3]),
    ("id + 1 * 2 = 3", [1, 3]), ("abs(amount) < 2", [1]), ("NULL", []),
]


@pytest.mark.parametrize(("predicate", "violating"), SPARK_READS)
def test_spark_sql_finds_the_same_rows_false(predicate: str, violating: list[int]) -> None:
    """The same predicates through Spark SQL on the same rows (ANSI off: a zero divisor gives NULL), as
    a Delta CHECK reads them: a row violates when the predicate is FALSE."""
    from tests.fixtures.local_spark import local_spark

    spark = local_spark()
    ansi = spark.conf.get("spark.sql.ansi.enabled")
    spark.conf.set("spark.sql.ansi.enabled", "false")
    try:
        frame = spark.createDataFrame(ROWS.append_column("position", pa.array(range(ROWS.num_rows))))
        found = frame.where(f"NOT coalesce(({predicate}), true)").select("position").collect()
    finally:
        spark.conf.set("spark.sql.ansi.enabled", ansi)
    assert sorted(row.position for row in found) == violating == _violating(predicate)
