"""A checker for Spark DDL schemas (``id BIGINT, tags ARRAY<STRING>, …``), so a json pipeline with a
schema Spark would refuse fails at definition time, not at its first run.

It follows the grammar of Spark's own parser (``tests/pipelines/test_ddl_conformance.py`` feeds both
the same schemas), and refuses more where Spark parses a schema that a run would then fail on:
``from_json`` refuses CHAR/VARCHAR and maps keyed by anything but STRING, Arrow and Delta have no form of INTERVAL,
TIME, empty structs or DECIMAL(0, …), and the job selects each column by its
backquoted name, which two names differing only in case (Spark resolves names case-insensitively)
or a name holding a backquote break.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_PRIMITIVES = frozenset({
    "string", "int", "integer", "bigint", "long", "smallint", "short", "tinyint", "byte", "double", "float", "real",
    "boolean", "binary", "date", "timestamp", "timestamp_ntz", "timestamp_ltz", "variant", "void",
})
_DECIMALS = frozenset({"decimal", "dec", "numeric"})
_MAX_PRECISION = 38
# How deep types may nest (STRUCT<a: ARRAY<MAP<…>>>). The parser recurses once per level, so a schema
# nested thousands deep would exhaust Python's stack; Parquet readers also slow down long before this.
MAX_NESTING = 64
# Types Spark's parser knows that no run can carry, and why (the reason is the message).
_UNSUPPORTED = {
    "char": "CHAR is refused by Spark's JSON reader: use STRING",
    "varchar": "VARCHAR is refused by Spark's JSON reader: use STRING",
    "interval": "INTERVAL types cannot be written to Delta",
    "time": "TIME cannot be written to Delta",
}

_TOKEN = re.compile(
    r"""(?P<space>\s+)
      | (?P<line_comment>--(?:\\\n|[^\r\n])*)
      | (?P<name>`(?:[^`]|``)*`)
      | (?P<string>[rR]'[^']*'|[rR]"[^"]*"|'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
      | (?P<word>[A-Za-z0-9_]+)
      | (?P<punct>[<>(),:])""",
    re.VERBOSE | re.DOTALL,
)
# Words Spark's lexer reads as numbers, not names: 12, 12L, 12S, 12Y, 1e5, 2D, 2e3F, 3BD (any case).
_NUMBER = re.compile(r"\d+([LSY]|([eE][+-]?\d+)?(D|F|BD)|[eE][+-]?\d+)?", re.IGNORECASE)


_JAVA_TRIMMED = "".join(map(chr, range(0x21)))


@dataclass(frozen=True)
class _Token:
    kind: str  # name (backquoted), string, word or punct
    text: str
    at: int  # character offset, for messages that must not echo the schema itself


def _tokens(ddl: str) -> tuple[list[_Token], bool]:
    """The tokens, and whether a ``--`` comment runs to the very end."""
    tokens, at, kind = [], 0, ""
    while at < len(ddl):
        if ddl.startswith("/*", at):
            at, kind = _skip_block_comment(ddl, at), "block_comment"
            continue
        match = _TOKEN.match(ddl, at)
        if match is None:
            raise ValueError(f"unexpected character {ddl[at]!r} (at character {at + 1})")
        kind = match.lastgroup or ""
        if kind not in ("space", "line_comment"):
            tokens.append(_Token(kind, match.group(), at))
        at = match.end()
    return tokens, kind == "line_comment"


def _skip_block_comment(ddl: str, at: int) -> int:
    if ddl.startswith("/*+", at):  # Spark reads /*+ … */ as a query hint, which has no place here
        raise ValueError(f"unexpected query hint (at character {at + 1})")
    depth, i = 0, at
    while i < len(ddl):
        if ddl.startswith("/*", i):
            depth, i = depth + 1, i + 2
        elif ddl.startswith("*/", i):
            depth, i = depth - 1, i + 2
            if depth == 0:
                return i
        else:
            i += 1
    raise ValueError(f"unclosed comment (at character {at + 1})")


class _Parser:
    def __init__(self, ddl: str):
        # Trailing white space gives no token; Spark trims it (as Java's trim does) before its fallback.
        self.tokens, self.ends_in_line_comment = _tokens(ddl.rstrip(_JAVA_TRIMMED))
        self.i = 0
        self.depth = 0  # of the nested type being parsed
        self.variants: list[str] = []  # the top-level columns of type VARIANT
        self.holds_variant = False  # a VARIANT anywhere

    def peek(self, ahead: int = 0) -> _Token | None:
        i = self.i + ahead
        return self.tokens[i] if i < len(self.tokens) else None

    def take(self, what: str) -> _Token:
        token = self.peek()
        if token is None:
            raise ValueError(f"expected {what} at the end")
        self.i += 1
        return token

    def at_punct(self, text: str) -> bool:
        token = self.peek()
        return token is not None and token.kind == "punct" and token.text == text

    def at_word(self, *words: str) -> bool:
        token = self.peek()
        return token is not None and token.kind == "word" and token.text.lower() in words

    def expect(self, text: str) -> None:
        token = self.take(f"'{text}'")
        if token.kind != "punct" or token.text != text:
            raise self.fail(f"expected '{text}'", token)

    def fail(self, message: str, token: _Token) -> ValueError:
        return ValueError(f"{message} (at character {token.at + 1})")


def _field_list(p: _Parser, closing: str | None) -> list[str]:
    """``name [:] TYPE [NOT NULL] [COMMENT 'text']``, comma-separated, up to ``closing`` (or the end)."""
    names = []
    while True:
        names.append(_field(p))
        if not p.at_punct(","):
            break
        p.take("','")
    if closing is not None:
        p.expect(closing)
    elif (leftover := p.peek()) is not None:
        raise p.fail("expected ',' or the end", leftover)
    return names


def _field(p: _Parser) -> str:
    token = p.take("a column name")
    if token.kind == "name":
        name = token.text[1:-1].replace("``", "`")
        if "`" in name:
            raise p.fail("a column name may not hold a backquote", token)
    elif token.kind == "word" and not _NUMBER.fullmatch(token.text):
        name = token.text
    else:
        raise p.fail("expected a column name", token)
    if p.at_punct(":"):
        p.take("':'")
    if _type(p) == "variant" and p.depth == 0:
        p.variants.append(name)
    if p.at_word("not"):
        p.take("NOT")
        null = p.take("NULL after NOT")
        if (null.kind, null.text.lower()) != ("word", "null"):
            raise p.fail("expected NULL after NOT", null)
    if p.at_word("comment"):
        p.take("COMMENT")
        text = p.take("a quoted comment after COMMENT")
        if text.kind != "string":
            raise p.fail("expected a quoted comment after COMMENT", text)
        while (more := p.peek()) is not None and more.kind == "string":  # adjacent literals make one string
            p.take("a string")
    return name


def _type(p: _Parser) -> str:
    """Parse one type; returns its lower-case keyword (``string``, ``array``, ``decimal`` …)."""
    token = p.take("a type")
    if token.kind != "word":
        raise p.fail("expected a type", token)
    kind = token.text.lower()
    if kind in _UNSUPPORTED:
        raise p.fail(_UNSUPPORTED[kind], token)
    if kind in _PRIMITIVES:
        p.holds_variant |= kind == "variant"
        if kind == "string" and p.at_word("collate"):
            # Delta keeps no collation, and its names (ICU locales) cannot be checked without Spark.
            raise p.fail("COLLATE has no effect on what a pipeline writes: leave it out", p.take("COLLATE"))
        return kind
    if kind in _DECIMALS:
        if p.at_punct("("):
            _decimal_arguments(p)
        return "decimal"
    if kind not in ("array", "map", "struct"):
        raise p.fail(f"unknown type {token.text!r}", token)
    if p.depth == MAX_NESTING:
        raise p.fail(f"types nest more than {MAX_NESTING} deep", token)
    p.depth += 1
    _nested_type(p, token, kind)
    p.depth -= 1
    return kind


def _nested_type(p: _Parser, token: _Token, kind: str) -> None:
    """The ``<…>`` of an ARRAY, MAP or STRUCT."""
    p.expect("<")
    if kind == "array":
        _type(p)
    elif kind == "map":
        key = p.peek() or token
        if _type(p) != "string":
            raise p.fail("a map's keys must be STRING for Spark's JSON reader", key)
        p.expect(",")
        _type(p)
    else:
        if p.at_punct(">"):
            raise p.fail("an empty STRUCT cannot be written to Parquet", token)
        _field_list(p, ">")
        return
    p.expect(">")


def _decimal_arguments(p: _Parser) -> None:
    opening = p.take("'('")
    numbers = []
    while True:
        token = p.take("a number")
        if token.kind != "word" or not token.text.isdigit():
            raise p.fail("expected a number", token)
        numbers.append(int(token.text))
        if not p.at_punct(","):
            break
        p.take("','")
    p.expect(")")
    if len(numbers) > 2:
        raise p.fail("DECIMAL takes a precision and a scale", opening)
    precision, scale = numbers[0], numbers[1] if len(numbers) == 2 else 0
    if not 1 <= precision <= _MAX_PRECISION:
        raise p.fail(f"DECIMAL precision must be 1 to {_MAX_PRECISION}", opening)
    if scale > precision:
        raise p.fail("DECIMAL scale cannot exceed its precision", opening)


def _colon_after_a_column(tokens: list[_Token]) -> bool:
    depth = 0
    for token in tokens:
        if token.kind == "punct":
            depth += {"<": 1, "(": 1, ">": -1, ")": -1}.get(token.text, 0)
            if token.text == ":" and depth == 0:
                return True
    return False


@dataclass(frozen=True)
class DdlColumns:
    """A DDL schema's top-level column names, and its VARIANT fields (top-level ones by name)."""

    names: list[str]
    variants: frozenset[str]  # the top-level columns of type VARIANT
    holds_variant: bool  # a VARIANT at any depth (a field of a struct, an array's elements, a map's values)


def ddl_field_names(ddl: str) -> list[str]:
    """Top-level column names of a DDL schema; ``ValueError`` saying what is wrong."""
    return ddl_columns(ddl).names


def ddl_columns(ddl: str) -> DdlColumns:
    """``ddl_field_names``, with the schema's VARIANT fields."""
    p = _Parser(ddl)
    if p.peek() is None:
        raise ValueError("the schema is empty")
    if p.at_word("struct") and (after := p.peek(1)) is not None and (after.kind, after.text) == ("punct", "<"):
        # Spark also takes the whole schema written as one STRUCT<…> type.
        p.take("STRUCT")
        p.expect("<")
        if p.at_punct(">"):
            raise ValueError("the schema is empty")
        names = _field_list(p, ">")
        leftover = p.peek()
        if leftover is not None:
            raise p.fail("expected the end", leftover)
    else:
        names = _field_list(p, None)
        if p.ends_in_line_comment and _colon_after_a_column(p.tokens):
            # Spark reads ``a: INT`` at the top only wrapped as ``STRUCT<a: INT>``: the comment swallows the ``>``.
            raise ValueError("a schema with 'name: TYPE' columns cannot end in a -- comment")
    folded = [n.lower() for n in names]
    duplicates = sorted({n for n in names if folded.count(n.lower()) > 1})
    if duplicates:
        raise ValueError(f"duplicate column(s), compared ignoring case: {', '.join(duplicates)}")
    return DdlColumns(names, frozenset(p.variants), p.holds_variant)
