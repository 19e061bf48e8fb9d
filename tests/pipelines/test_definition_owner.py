"""A pipeline's definition has one owner (``api.pipelines``): everything else reads it typed, with the
schema's defaults, through ``api.pipelines.definition``; the document as written serves round trips only.

Read from the code itself (its syntax tree and the portal's templates), so that a new string-keyed
read of a definition, which would restate a default the schema keeps, fails here."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OWNER = "api/pipelines/"
CHECKED = ("api", "worker", "cli")
AS_WRITTEN = frozenset({"source_as_written", "target_as_written", "schedule_as_written"})
# The round trips the owner serves the document for: the portal's edit form writes back what it read.
ROUND_TRIPS = frozenset({"api/portal/pipelines.py"})
# Names the definition's parts go by; a string key read from one is a read of the stored document.
PARTS = frozenset({"source", "target", "schedule", "create_topic", "definition"})


def _modules() -> Iterator[tuple[str, ast.Module]]:
    for package in CHECKED:
        for path in sorted((ROOT / package).rglob("*.py")):
            name = path.relative_to(ROOT).as_posix()
            if not name.startswith(OWNER):
                yield name, ast.parse(path.read_text(), name)


def _named(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _string(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _keyed_read(node: ast.AST) -> ast.expr | None:
    """What ``node`` reads by a string key, if it does: ``x["k"]``, ``x.get("k")``, ``"k" in x``."""
    if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _string(node.slice):
        return node.value
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
            and node.args and _string(node.args[0])):
        return node.func.value
    if isinstance(node, ast.Compare) and _string(node.left) and isinstance(node.ops[0], (ast.In, ast.NotIn)):
        return node.comparators[0]
    return None


def test_the_stored_document_is_read_only_by_its_owner() -> None:
    found = [f"{name}:{node.lineno}: {ast.unparse(node)}" for name, tree in _modules() for node in ast.walk(tree)
             if isinstance(node, ast.Attribute) and node.attr in AS_WRITTEN]
    templates = [f"{path.name}: {word}" for path in sorted((ROOT / "api/portal/templates").glob("*.html"))
                 for word in AS_WRITTEN | {"pipeline.source", "pipeline.target", "pipeline.schedule", "p.schedule"}
                 if word in path.read_text()]
    assert found == [] and templates == [], "read api.pipelines.definition.definition_of(pipeline) instead"


def test_only_round_trips_take_the_document_as_written() -> None:
    callers = {name for name, tree in _modules() for node in ast.walk(tree)
               if isinstance(node, ast.Call) and _named(node.func) == "as_written"}
    assert callers <= ROUND_TRIPS


def test_no_definition_is_read_by_string_key_outside_its_owner() -> None:
    reads = [f"{name}:{node.lineno}: {ast.unparse(node)}" for name, tree in _modules() for node in ast.walk(tree)
             if (read := _keyed_read(node)) is not None and _named(read) in PARTS]
    assert reads == []


def test_the_check_sees_the_reads_it_forbids() -> None:
    """The checks above find nothing; here they find what they look for."""
    tree = ast.parse('pipeline.source["topics"]; pipeline.target.get("type"); "cron" in schedule; '
                     'x = row.schedule_as_written')
    reads = [_named(read) for node in ast.walk(tree) if (read := _keyed_read(node)) is not None]
    assert sorted(r or "" for r in reads) == ["schedule", "source", "target"]
    assert [node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute) and node.attr in AS_WRITTEN] == [
        "schedule_as_written"]
