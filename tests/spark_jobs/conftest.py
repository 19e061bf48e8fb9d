"""``placement``: the job tests that run both where a user starts (``local[2]``, a folder) and where
production runs (the standalone cluster's executors, tables in S3: tests/fixtures). Each placement
also runs them one way: locally by spark-submit per run, on the cluster on the warm engine (the
default, which every test without a placement uses locally)."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_jobs.storage import Store
from tests.spark_jobs.helpers import SETTINGS, Placement


@pytest.fixture(params=["local", "cluster+s3"])
def placement(request: pytest.FixtureRequest, tmp_path: Path) -> Placement:
    if request.param == "local":
        return Placement(SETTINGS, str(tmp_path), engine="submit")
    cluster, bucket = request.getfixturevalue("spark_cluster"), request.getfixturevalue("s3_bucket")
    return Placement(cluster, f"{bucket.root}/tenants/t1", Store(bucket.environment), engine="warm")
