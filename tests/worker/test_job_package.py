"""The job's code as the worker ships it to the executors (``--py-files``) and fingerprints it for its
warm engine: every module of ``spark_jobs``, subpackages included. Executors on a real cluster have
no checkout of Inlet (tests here have one, installed editable, which would hide a missing module):
what a task imports must come from the zip."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

import spark_jobs
from worker.launch.submit import package_spark_jobs
from worker.launch.warm import code_digest

PACKAGE = Path(spark_jobs.__file__).parent


def test_an_executor_imports_the_job_from_the_shipped_zip_alone(tmp_path: Path) -> None:
    shipped = package_spark_jobs(tmp_path)

    on_disk = sorted(f"spark_jobs/{path.relative_to(PACKAGE)}" for path in PACKAGE.rglob("*.py"))
    assert sorted(zipfile.ZipFile(shipped).namelist()) == on_disk
    # What the tasks of each target import. Without site (-S) the editable install is not on the
    # path: only the zip and the installed libraries are, as on a cluster's executor.
    tasks = ["spark_jobs.targets.kafka", "spark_jobs.delta_tables.files", "spark_jobs.delta_tables.direct_write",
             "spark_jobs.delta_tables.replace", "spark_jobs.kafka_source", "spark_jobs.formats.wire"]
    code = "import importlib, sys; [importlib.import_module(m) for m in sys.argv[1:]]; print(sys.modules['spark_jobs'].__file__)"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(shipped), sysconfig.get_paths()["purelib"]])}
    done = subprocess.run([sys.executable, "-S", "-c", code, *tasks], cwd=tmp_path, env=env, check=False, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(shipped / "spark_jobs" / "__init__.py")


def test_an_engine_s_code_digest_changes_with_any_module_of_the_job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    copy = tmp_path / "spark_jobs"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(spark_jobs, "__file__", str(copy / "__init__.py"))
    before = code_digest()

    module = copy / "targets" / "delta_append.py"
    module.write_text(module.read_text() + "\n# new code\n")

    assert code_digest() != before
