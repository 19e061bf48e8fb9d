"""One meaning per name: a class name means one thing across the API and the Spark job.

The job's contract has names of its own (``SourceSpec``, ``DeltaTargetSpec``, ``JobFailure``...)
where the API's schemas describe the same ideas for its clients (``KafkaSource``, ``DeltaTarget``,
``RunError``): a reader who meets a name knows which side of the spec it is on. Read from the
source files' syntax trees, so nothing is imported.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _classes(package: str) -> dict[str, list[str]]:
    """Every class name defined anywhere in ``package`` (nested ones too), with where."""
    found: dict[str, list[str]] = defaultdict(list)
    for path in sorted((ROOT / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                found[node.name].append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_no_class_name_is_defined_in_both_the_api_and_the_job() -> None:
    api, job = _classes("api"), _classes("spark_jobs")
    assert {name: api[name] + job[name] for name in sorted(api.keys() & job.keys())} == {}


def test_the_job_defines_each_public_class_once() -> None:
    job = _classes("spark_jobs")
    assert {name: where for name, where in sorted(job.items()) if len(where) > 1 and not name.startswith("_")} == {}
