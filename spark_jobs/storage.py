"""Where a run's tables live, and how every process of the job reaches them.

A table is a local folder or an object-storage URL: ``s3://bucket/prefix`` (S3 and S3-compatible
stores), ``abfss://container@account.dfs.core.windows.net/prefix`` or ``az://container/prefix``
(ADLS Gen2 / Azure Blob), ``gs://bucket/prefix`` (GCS). Object storage needs its endpoint and
credentials in every process that touches the table: the driver (delta-rs commits and reads) and
each executor (pyarrow writes Parquet files). Executors on a cluster do not inherit the worker's
environment, so the options travel inside the job: the spec (a 0600 file) and the task plans
(pickled with the tasks), never argv, Spark conf or a data source option, which show in logs and UIs.

Options use delta-rs's names (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``,
``AWS_REGION``, ``AWS_ENDPOINT_URL``, ``AWS_ALLOW_HTTP``, ``AWS_CA_BUNDLE``...); for S3 ``filesystem`` maps them
to pyarrow's S3 filesystem, and absent credentials fall back, in both libraries, to the process's own
(environment, instance role). Azure and GCS files go through delta-rs's own object store
(``deltalake.fs.DeltaStorageHandler`` behind a pyarrow filesystem), so one set of options
(``AZURE_STORAGE_ACCOUNT_KEY``, ``GOOGLE_SERVICE_ACCOUNT_KEY``...) serves the commit and the files alike:
pyarrow's own GCS filesystem cannot take a service-account key, nor its ``from_uri`` an Azure account key.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from deltalake import DeltaTable
    from pyarrow import fs as pafs

S3_SCHEMES = frozenset({"s3", "s3a"})
AZURE_SCHEMES = frozenset({"abfss", "az"})
GCS_SCHEMES = frozenset({"gs"})
OBJECT_STORE_SCHEMES = S3_SCHEMES | AZURE_SCHEMES | GCS_SCHEMES


def scheme_of(uri: str) -> str:
    """``s3`` for ``s3://b/p``; ``file`` for a path or ``file://`` URL."""
    return uri.split("://", 1)[0].lower() if "://" in uri else "file"


@dataclass(frozen=True)
class Store:
    """The storage options of one run's tables; cheap to pickle, filesystems built where used."""

    options: Mapping[str, str] = field(default_factory=dict)

    def filesystem(self, uri: str) -> tuple[pafs.FileSystem, str]:
        """pyarrow's filesystem for ``uri`` and the path inside it (``bucket/key`` on S3, ``key`` in an
        Azure container or a GCS bucket)."""
        from pyarrow import fs as pafs  # here, not at import: every process that reads Settings imports this module

        scheme = scheme_of(uri)
        if scheme in S3_SCHEMES:
            return _s3(tuple(sorted(self.options.items()))), uri.split("://", 1)[1].rstrip("/")
        if scheme in OBJECT_STORE_SCHEMES:
            container, _, key = uri.split("://", 1)[1].partition("/")
            return _object_store(f"{scheme}://{container}", tuple(sorted(self.options.items()))), key.rstrip("/")
        return pafs.FileSystem.from_uri(uri)

    @property
    def delta_options(self) -> dict[str, str] | None:
        return dict(self.options) or None

    def is_delta_table(self, uri: str) -> bool:
        from deltalake import DeltaTable

        return DeltaTable.is_deltatable(uri, storage_options=self.delta_options)

    def delta_table(self, uri: str) -> DeltaTable:
        from deltalake import DeltaTable

        return DeltaTable(uri, storage_options=self.delta_options)

    def delete_files_named(self, uri: str, prefix: str, *, keep: Collection[str] = ()) -> int:
        """Delete every file whose name begins with ``prefix`` anywhere under the folder ``uri``, but
        those named in ``keep``: the files of a job's attempt (a run's, a compaction's) that its commit
        did not add; how many there were."""
        from pyarrow import fs as pafs

        filesystem, base = self.filesystem(uri)
        try:
            found = filesystem.get_file_info(pafs.FileSelector(base, recursive=True, allow_not_found=True))
        except OSError:
            return 0
        mine = [f.path for f in found
                if f.type == pafs.FileType.File and f.base_name.startswith(prefix) and f.base_name not in keep]
        for path in mine:
            try:
                filesystem.delete_file(path)
            except OSError:
                pass
        return len(mine)


@lru_cache(maxsize=8)
def _s3(options: tuple[tuple[str, str], ...]) -> pafs.S3FileSystem:
    """One S3 filesystem per set of options and process (a task reuses its worker's)."""
    from pyarrow import fs as pafs

    given = {key.upper(): value for key, value in options}
    endpoint = given.get("AWS_ENDPOINT_URL") or given.get("AWS_ENDPOINT")
    scheme, endpoint_override = None, None
    if endpoint:
        parts = urlsplit(endpoint if "://" in endpoint else f"https://{endpoint}")
        scheme, endpoint_override = parts.scheme, parts.netloc
    return pafs.S3FileSystem(
        access_key=given.get("AWS_ACCESS_KEY_ID"),
        secret_key=given.get("AWS_SECRET_ACCESS_KEY"),
        session_token=given.get("AWS_SESSION_TOKEN"),
        region=given.get("AWS_REGION") or given.get("AWS_DEFAULT_REGION"),
        scheme=scheme,
        endpoint_override=endpoint_override,
        tls_ca_file_path=given.get("AWS_CA_BUNDLE"),
    )


@lru_cache(maxsize=8)
def _object_store(root: str, options: tuple[tuple[str, str], ...]) -> pafs.PyFileSystem:
    """delta-rs's object store for one Azure container or GCS bucket, as a pyarrow filesystem."""
    from deltalake.fs import DeltaStorageHandler
    from pyarrow import fs as pafs

    return pafs.PyFileSystem(DeltaStorageHandler(root, dict(options)))
