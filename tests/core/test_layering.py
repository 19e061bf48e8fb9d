"""The architecture checks itself: the import contracts and the type check, both configured in
``pyproject.toml``, run here so that ``make test`` fails when a change breaks either."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHECKED = ("api", "worker", "spark_jobs")
# A ``type: ignore`` says what it silences and, after a second ``#``, why.
_IGNORE = re.compile(r"#\s*type:\s*ignore(?P<codes>\[[^\]]*\])?(?P<rest>.*)$")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=ROOT, check=False, capture_output=True, text=True, timeout=600)


def test_the_import_contracts_hold() -> None:
    """``api/core`` imports no domain, the domains import each other in one order, ``spark_jobs``
    imports nothing of the API or the worker, ``cli`` and ``sandbox`` are leaves."""
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, check=False, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


def _mypy_cache() -> Path:
    """mypy's incremental cache outside the checkout, by mypy's version: a clean clone (CI's) checks again
    only the modules whose contents changed (0.9 s instead of 33 s here), each module known by its hash."""
    from importlib.metadata import version

    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "inlet-mypy" / version("mypy")


def test_the_type_check_passes() -> None:
    done = _run("-m", "mypy", "--cache-dir", str(_mypy_cache()))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("Success: no issues found"), done.stdout


def test_every_type_ignore_names_its_error_and_says_why() -> None:
    bare = []
    for package in CHECKED:
        for path in sorted((ROOT / package).rglob("*.py")):
            for number, line in enumerate(path.read_text().splitlines(), 1):
                found = _IGNORE.search(line)
                if found and (not found["codes"] or not found["rest"].strip().startswith("#")):
                    bare.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert bare == []
