"""An expectation's predicate (``contract.expectations[].predicate``): a small, closed subset of Spark
SQL over a decoded row's columns, parsed when the pipeline is written and evaluated on Arrow batches in
the executors. No subqueries, no user functions, nothing that runs code: a predicate is data.

The language:
- literals: integers, decimals (``1.50``: exact), doubles (``1e3``), strings (``'it''s'``), ``TRUE``,
  ``FALSE``, ``NULL``;
- columns: names, dotted into structs (``customer.email``), backquoted (```order id```), resolved as
  Spark does, case-insensitively;
- ``+ - * /`` (``/`` is a division into DOUBLE, as Spark's; by zero: NULL), unary ``-``;
- comparisons ``= == <> != < <= > >=`` and null-safe ``<=>``; ``IS [NOT] NULL``, ``[NOT] IN (…)``,
  ``[NOT] BETWEEN … AND …``, ``[NOT] LIKE '…'``;
- ``AND``, ``OR``, ``NOT`` with SQL's three-valued logic, and Spark's precedence;
- functions ``length``, ``lower``, ``upper``, ``trim``, ``abs``, ``coalesce``.

A row *violates* a predicate when it evaluates to FALSE; NULL passes, as in a Delta CHECK constraint
(``amount > 0`` says nothing of a row without an amount: ``amount IS NOT NULL AND amount > 0`` does).
Messages name a position, never the predicate's text or a row's value.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, TypeAlias

import pyarrow as pa
import pyarrow.compute as pc

MAX_LENGTH = 2000  # characters of a predicate
MAX_DEPTH = 32  # nesting of expressions: the parser recurses once per level


class PredicateError(ValueError):
    """A predicate that is not in the language, or that cannot apply to the rows' columns."""


# --- The tree ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Literal:
    value: bool | int | Decimal | float | str | None


@dataclass(frozen=True)
class Column:
    path: tuple[str, ...]  # the name, then struct fields

    @property
    def dotted(self) -> str:
        return ".".join(self.path)


@dataclass(frozen=True)
class Call:
    op: str  # an operator (and, or, not, =, <, +, …, is_null, in, between, like) or a function's name
    args: tuple[Node, ...]


Node = Literal | Column | Call


def columns_of(node: Node) -> set[str]:
    """The columns a predicate reads, dotted: for checking them against a pipeline's schema."""
    if isinstance(node, Column):
        return {node.dotted}
    if isinstance(node, Call):
        return set().union(*(columns_of(arg) for arg in node.args)) if node.args else set()
    return set()


# --- Parsing -------------------------------------------------------------------------------------

_TOKEN = re.compile(
    r"""(?P<space>\s+)
      | (?P<name>`(?:[^`]|``)*`)
      | (?P<string>'(?:[^'\\]|''|\\.)*')
      | (?P<number>(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?)
      | (?P<word>[A-Za-z_][A-Za-z0-9_]*)
      | (?P<op><=>|<>|!=|==|<=|>=|[-+*/=<>(),.])""",
    re.VERBOSE | re.DOTALL,
)
_KEYWORDS = frozenset({"and", "or", "not", "is", "null", "in", "between", "like", "true", "false"})
_COMPARISONS = {"=": "=", "==": "=", "<>": "<>", "!=": "<>", "<": "<", "<=": "<=", ">": ">", ">=": ">=",
                "<=>": "<=>"}
FUNCTIONS = {"length": 1, "lower": 1, "upper": 1, "trim": 1, "abs": 1, "coalesce": -1}  # -1: one or more


@dataclass(frozen=True)
class _PredicateToken:
    kind: str  # name, string, number, word, op, end
    text: str
    at: int


def _tokens(text: str) -> list[_PredicateToken]:
    tokens, at = [], 0
    while at < len(text):
        match = _TOKEN.match(text, at)
        if match is None:
            raise PredicateError(f"unexpected character at {at + 1}")
        if match.lastgroup != "space":
            tokens.append(_PredicateToken(match.lastgroup or "", match.group(), at))
        at = match.end()
    tokens.append(_PredicateToken("end", "", len(text)))
    return tokens


class _PredicateParser:
    def __init__(self, text: str) -> None:
        self.tokens = _tokens(text)
        self.i = 0
        self.depth = 0

    # Tokens.

    @property
    def token(self) -> _PredicateToken:
        return self.tokens[self.i]

    def _is(self, *words: str) -> bool:
        token = self.token
        return (token.kind == "word" and token.text.lower() in words) or (token.kind == "op" and token.text in words)

    def _take(self, *words: str) -> bool:
        if self._is(*words):
            self.i += 1
            return True
        return False

    def _expect(self, word: str) -> None:
        if not self._take(word):
            raise PredicateError(f"expected {word.upper() if word.isalpha() else repr(word)} at "
                                 f"{self.token.at + 1}")

    def _nested(self, parse: Callable[[], Node]) -> Node:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise PredicateError(f"nested deeper than {MAX_DEPTH} levels")
        try:
            return parse()
        finally:
            self.depth -= 1

    # The grammar, loosest first: OR, AND, NOT, predicates, + -, * /, unary -, primaries.

    def parse(self) -> Node:
        node = self._or()
        if self.token.kind != "end":
            raise PredicateError(f"unexpected {self._what()} at {self.token.at + 1}")
        return node

    def _or(self) -> Node:
        node = self._and()
        while self._take("or"):
            node = Call("or", (node, self._and()))
        return node

    def _and(self) -> Node:
        node = self._not()
        while self._take("and"):
            node = Call("and", (node, self._not()))
        return node

    def _not(self) -> Node:
        if self._take("not"):
            return Call("not", (self._nested(self._not),))
        return self._predicate()

    def _predicate(self) -> Node:
        left = self._additive()
        if self.token.kind == "op" and self.token.text in _COMPARISONS:
            op = _COMPARISONS[self.token.text]
            self.i += 1
            return Call(op, (left, self._additive()))
        if self._take("is"):
            negated = self._take("not")
            self._expect("null")
            node: Node = Call("is_null", (left,))
            return Call("not", (node,)) if negated else node
        negated = self._take("not")
        if self._take("in"):
            node = Call("in", (left, *self._list()))
        elif self._take("between"):
            low = self._additive()
            self._expect("and")
            node = Call("between", (left, low, self._additive()))
        elif self._take("like"):
            if self.token.kind != "string":
                raise PredicateError(f"LIKE takes a string pattern at {self.token.at + 1}")
            node = Call("like", (left, self._primary()))
        elif negated:
            raise PredicateError(f"expected IN, BETWEEN or LIKE after NOT at {self.token.at + 1}")
        else:
            return left
        return Call("not", (node,)) if negated else node

    def _list(self) -> tuple[Node, ...]:
        self._expect("(")
        items = [self._additive()]
        while self._take(","):
            items.append(self._additive())
        self._expect(")")
        return tuple(items)

    def _additive(self) -> Node:
        return self._left_to_right(("+", "-"), self._multiplicative)

    def _multiplicative(self) -> Node:
        return self._left_to_right(("*", "/"), self._unary)

    def _left_to_right(self, ops: tuple[str, ...], operand: Callable[[], Node]) -> Node:
        node = operand()
        while self._is(*ops):
            op = self.token.text
            self.i += 1
            node = Call(op, (node, operand()))
        return node

    def _unary(self) -> Node:
        if self._take("-"):
            return Call("negate", (self._nested(self._unary),))
        self._take("+")
        return self._primary()

    def _primary(self) -> Node:
        token = self.token
        if token.kind == "end":
            raise PredicateError("the predicate ends too soon")
        self.i += 1
        if token.kind == "number":
            return Literal(_number(token.text))
        if token.kind == "string":
            return Literal(_string(token.text))
        if token.kind == "op" and token.text == "(":
            node = self._nested(self._or)
            self._expect(")")
            return node
        if token.kind == "word" and token.text.lower() in ("true", "false", "null"):
            return Literal({"true": True, "false": False, "null": None}[token.text.lower()])
        if token.kind == "word" and self._is("("):
            if token.text.lower() not in FUNCTIONS:
                raise PredicateError(f"a predicate calls only {', '.join(FUNCTIONS)} (at {token.at + 1})")
            return self._nested(lambda: self._call(token))
        if token.kind == "name" or (token.kind == "word" and token.text.lower() not in _KEYWORDS):
            return self._column(token)
        self.i -= 1
        raise PredicateError(f"unexpected {self._what()} at {token.at + 1}")

    def _call(self, name: _PredicateToken) -> Node:
        function = name.text.lower()
        args = self._list()
        arity = FUNCTIONS[function]
        if arity >= 0 and len(args) != arity:
            raise PredicateError(f"{function} takes {arity} argument{'s' if arity > 1 else ''} (at {name.at + 1})")
        return Call(function, args)

    def _column(self, first: _PredicateToken) -> Node:
        path = [_name(first)]
        while self._is("."):
            self.i += 1
            if self.token.kind not in ("name", "word"):
                raise PredicateError(f"expected a field name at {self.token.at + 1}")
            path.append(_name(self.token))
            self.i += 1
        return Column(tuple(path))

    def _what(self) -> str:
        token = self.token
        return token.kind if token.kind in ("word", "name", "string", "number") else repr(token.text)


def _name(token: _PredicateToken) -> str:
    return token.text[1:-1].replace("``", "`") if token.kind == "name" else token.text


def _number(text: str) -> int | Decimal | float:
    if "e" in text.lower():
        return float(text)
    return Decimal(text) if "." in text else int(text)


def _string(text: str) -> str:
    body = text[1:-1].replace("''", "'")
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), body)


def parse(text: str) -> Node:
    """The predicate's tree; ``PredicateError`` naming where it leaves the language."""
    if not text.strip():
        raise PredicateError("the predicate is empty")
    if len(text) > MAX_LENGTH:
        raise PredicateError(f"the predicate is longer than {MAX_LENGTH} characters")
    return _PredicateParser(text).parse()


# --- Evaluation on Arrow -------------------------------------------------------------------------

Value: TypeAlias = "pa.Array | pa.ChunkedArray | pa.Scalar"  # what an expression gives: a column, or a literal


def violations(node: Node, rows: pa.Table) -> pa.Array:
    """A mask of the rows that violate the predicate (it is FALSE for them; NULL passes)."""
    result = evaluate(node, rows)
    if isinstance(result, pa.Scalar):
        result = pa.repeat(result, rows.num_rows)
    if pa.types.is_null(result.type):  # NULL for every row: none is FALSE
        return pa.repeat(pa.scalar(False), rows.num_rows)
    if not pa.types.is_boolean(result.type):
        raise PredicateError("the predicate is not a condition (it gives a value, not true or false)")
    mask = pc.fill_null(pc.invert(result), False)
    return mask.combine_chunks() if isinstance(mask, pa.ChunkedArray) else mask


def evaluate(node: Node, rows: pa.Table) -> Value:
    """The predicate's (or a part's) value for each row."""
    if isinstance(node, Literal):
        return pa.scalar(node.value)
    if isinstance(node, Column):
        return _column(rows, node)
    args = [evaluate(arg, rows) for arg in node.args]
    try:
        return _OPS[node.op](*args)
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        kinds = ", ".join(str(arg.type) for arg in args)
        raise PredicateError(f"{_OP_NAMES.get(node.op, node.op)} does not apply to {kinds}") from exc


def _column(rows: pa.Table, column: Column) -> Value:
    value: Any = rows.column(_field(rows.schema.names, column.path[0], column))
    for name in column.path[1:]:
        if not pa.types.is_struct(value.type):
            raise PredicateError(f"column {column.dotted}: {name!r} is not a field of a struct")
        value = pc.struct_field(value, _field([f.name for f in value.type], name, column))
    return value


def _field(names: list[str], name: str, column: Column) -> str:
    if name in names:
        return name
    matches = [n for n in names if n.lower() == name.lower()]  # Spark resolves names case-insensitively
    if len(matches) != 1:
        raise PredicateError(f"column {column.dotted} is not in the rows" if not matches
                             else f"column {column.dotted} names {len(matches)} columns differing in case")
    return matches[0]


def _in(value: Value, *items: Value) -> Value:
    """SQL's IN: NULL when the value is NULL, or it is not found and the list holds a NULL."""
    found = pc.is_in(value, value_set=pa.array([item.as_py() for item in items if item.is_valid]))
    if any(not item.is_valid for item in items):
        found = pc.if_else(found, True, pa.scalar(None, pa.bool_()))
    return pc.if_else(pc.is_null(value), pa.scalar(None, pa.bool_()), found)


def _divide(left: Value, right: Value) -> Value:
    """Spark's ``/``: DOUBLE, and NULL for a zero divisor."""
    left, right = pc.cast(left, pa.float64()), pc.cast(right, pa.float64())
    return pc.if_else(pc.equal(right, 0.0), pa.scalar(None, pa.float64()), pc.divide(left, right))


def _null_safe_equal(left: Value, right: Value) -> Value:
    both_null = pc.and_(pc.is_null(left), pc.is_null(right))
    return pc.if_else(both_null, True, pc.fill_null(pc.equal(left, right), False))


def _coalesce(*values: Value) -> Value:
    return pc.coalesce(*values)


_OPS: dict[str, Callable[..., Value]] = {
    "and": pc.and_kleene, "or": pc.or_kleene, "not": pc.invert,
    "=": pc.equal, "<>": pc.not_equal, "<": pc.less, "<=": pc.less_equal, ">": pc.greater, ">=": pc.greater_equal,
    "<=>": _null_safe_equal, "is_null": pc.is_null,
    "in": _in, "between": lambda v, lo, hi: pc.and_kleene(pc.greater_equal(v, lo), pc.less_equal(v, hi)),
    "like": lambda v, pattern: pc.match_like(v, pattern.as_py()),
    "+": pc.add_checked, "-": pc.subtract_checked, "*": pc.multiply_checked, "/": _divide,
    "negate": pc.negate_checked,
    "length": pc.utf8_length, "lower": pc.utf8_lower, "upper": pc.utf8_upper,
    "trim": lambda v: pc.utf8_trim(v, " "),  # Spark's trim takes spaces only

    "abs": pc.abs_checked, "coalesce": _coalesce,
}
_OP_NAMES = {"and": "AND", "or": "OR", "not": "NOT", "is_null": "IS NULL", "in": "IN", "between": "BETWEEN",
             "like": "LIKE", "negate": "unary -"}


def walk(node: Node) -> Iterator[Node]:
    """Every node of the tree, the root first."""
    yield node
    if isinstance(node, Call):
        for arg in node.args:
            yield from walk(arg)
