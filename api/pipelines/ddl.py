"""A checker for Spark DDL schemas (``id BIGINT, tags ARRAY<STRING>, …``), so a json pipeline with a
schema Spark would refuse fails at definition time, not at its first run."""

from __future__ import annotations

import re

_PRIMITIVES = frozenset({
    "string", "varchar", "char", "int", "integer", "bigint", "long", "smallint", "short", "tinyint", "byte",
    "double", "float", "real", "boolean", "bool", "binary", "date", "timestamp", "timestamp_ntz",
    "timestamp_ltz", "decimal", "dec", "numeric", "variant",
})
_FIELD = re.compile(r"^\s*(`[^`]+`|[A-Za-z_][A-Za-z0-9_]*)\s*:?\s+(.+?)(\s+NOT\s+NULL)?(\s+COMMENT\s+'(?:[^'\\]|\\.)*')?\s*$",
                    re.IGNORECASE | re.DOTALL)
_SIZED = re.compile(r"^(decimal|dec|numeric)\s*\(\s*\d+\s*(,\s*\d+\s*)?\)$|^(varchar|char)\s*\(\s*\d+\s*\)$", re.IGNORECASE)


def _split_top(text: str, sep: str = ",") -> list[str]:
    parts, depth, current = [], 0, []
    for ch in text:
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
            if depth < 0:
                raise ValueError("unbalanced brackets")
        if ch == sep and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    if depth != 0:
        raise ValueError("unbalanced brackets")
    parts.append("".join(current))
    return parts


def _check_type(text: str) -> None:
    t = text.strip()
    lower = t.lower()
    if lower in _PRIMITIVES or _SIZED.match(t):
        return
    for kind, arity in (("array", 1), ("map", 2), ("struct", 0)):
        if lower.startswith(kind + "<") and lower.endswith(">"):
            inner = t[len(kind) + 1 : -1]
            if kind == "struct":
                for field in _split_top(inner):
                    _check_field(field.replace(":", " ", 1) if ":" in field.split("<")[0] else field)
                return
            items = _split_top(inner)
            if len(items) != arity:
                raise ValueError(f"{kind}<…> takes {arity} type(s): {t}")
            for item in items:
                _check_type(item)
            return
    raise ValueError(f"unknown type {t!r}")


def _check_field(text: str) -> str:
    match = _FIELD.match(text)
    if not match:
        raise ValueError(f"expected 'name TYPE', got {text.strip()!r}")
    _check_type(match.group(2))
    return match.group(1).strip("`")


def ddl_field_names(ddl: str) -> list[str]:
    """Top-level column names of a DDL schema; ``ValueError`` saying what is wrong."""
    if not ddl.strip():
        raise ValueError("the schema is empty")
    names = [_check_field(part) for part in _split_top(ddl)]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"duplicate column(s): {', '.join(duplicates)}")
    return names
