"""A tenant's tables stay under ``<storage root>/tenants/<tenant id>/`` when the root is object storage,
as they do on a local root: relative paths resolve there, URLs must name it exactly."""

from __future__ import annotations

import uuid

import pytest

from api.core.errors import ValidationFailed
from api.pipelines.storage import resolve_delta_uri

ROOT = "s3://lake/inlet"
# Fixed ids: test ids must be the same in every xdist worker.
ME, OTHER = uuid.UUID("00000000-0000-4000-8000-00000000000a"), uuid.UUID("00000000-0000-4000-8000-00000000000b")


def test_a_relative_path_and_the_tenants_own_url_resolve_to_the_same_s3_table() -> None:
    own = f"{ROOT}/tenants/{ME}/bronze/orders"
    assert resolve_delta_uri(ROOT, ME, "bronze/orders") == own
    assert resolve_delta_uri(ROOT, ME, own) == own
    assert resolve_delta_uri(ROOT + "/", ME, "bronze/orders") == own


@pytest.mark.parametrize("path", [
    f"{ROOT}/tenants/{OTHER}/bronze/orders",  # another tenant's table
    f"{ROOT}/tenants/{ME}/../{OTHER}/orders",
    f"{ROOT}/tenants/{ME}",  # the tenant root itself
    f"s3://other-bucket/inlet/tenants/{ME}/orders",
    f"s3a://lake/inlet/tenants/{ME}/orders",  # another scheme for the same bucket is another store
    f"S3://lake/inlet/tenants/{ME}/orders",
    f"file:///lake/inlet/tenants/{ME}/orders",
    f"gs://lake/inlet/tenants/{ME}/orders",
], ids=["other-tenant", "dot-dot", "tenant-root", "other-bucket", "s3a", "upper-case-scheme", "file", "gs"])
def test_a_url_outside_the_tenants_s3_root_is_refused_on_target_path(path: str) -> None:
    with pytest.raises(ValidationFailed) as refused:
        resolve_delta_uri(ROOT, ME, path)
    assert [error["field"] for error in refused.value.errors] == ["target.path"]
