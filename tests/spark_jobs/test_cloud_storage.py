"""Tables on ADLS Gen2 and GCS: runs of the job into ``abfss://`` and ``gs://``, a replace-mode replay,
concurrent commits that all land, and no process asking a cloud metadata address for credentials.

ADLS Gen2 is Azurite, Microsoft's emulator (tests/fixtures/azure_storage.py). GCS is fake-gcs-server
behind a STAND-IN proxy that serves the XML API delta-rs speaks and enforces its create-only
precondition (tests/fixtures/gcs_storage.py): the GCS race test shows Inlet relies on the precondition,
not that a real GCS keeps it.

Each table is read back by an independent reader, rows exact. On Azurite that is DuckDB (1.4.4 with
its azure extension from PyPI, loaded from its file): it reads the Delta log and the Parquet files from
the emulator itself, sharing no code with the job. Its ``delta_scan`` is not used because it reaches an
emulator only at the emulator's fixed default port (10000), whatever endpoint the secret names. DuckDB
cannot be pointed at the GCS stand-in (its GCS support is HMAC keys on the S3 API), so GCS tables are
read by delta-rs in a spawned process of its own.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spark_jobs.delta_tables import Table
from spark_jobs.delta_tables.commit import commit_files
from spark_jobs.plans import DataFile
from spark_jobs.spec import Txn
from spark_jobs.storage import Store
from tests.fixtures.azure_storage import Container
from tests.fixtures.gcs_storage import GcsBucket
from tests.spark_jobs.helpers import make_spec, run_job

STORES = ["azure", "gcs"]
_SPAWN = multiprocessing.get_context("spawn")  # deltalake panics in a forked child


def _store(request: pytest.FixtureRequest, kind: str) -> Container | GcsBucket:
    return request.getfixturevalue("azure_container" if kind == "azure" else "gcs_bucket")


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _read_rows(options: dict[str, str], uri: str, columns: list[str]) -> list[tuple[object, ...]]:
    """The independent reader (module level: it runs in a spawned process)."""
    table = Store(options).delta_table(uri).to_pyarrow_table(columns=columns)
    return sorted(zip(*(table[c].to_pylist() for c in columns), strict=True))


def read_back(store: Container | GcsBucket, uri: str, columns: list[str]) -> list[tuple[object, ...]]:
    if isinstance(store, Container):
        return _duckdb_rows(store, uri, columns)
    with _SPAWN.Pool(1) as pool:
        return pool.apply(_read_rows, (store.environment, uri, columns))


def _duckdb_rows(container: Container, uri: str, columns: list[str]) -> list[tuple[object, ...]]:
    """The table's rows as DuckDB reads them from Azurite: the live files from the log's add and remove
    actions, then those files. (Enough for these tables: no checkpoint, deletion vector or partition.)"""
    import duckdb
    import duckdb_ext

    extensions = Path(next(iter(duckdb_ext.__path__))) / "extensions" / f"v{duckdb.__version__}"
    connection = duckdb.connect(config={"allow_unsigned_extensions": "true", "autoinstall_known_extensions": "false",
                                        "autoload_known_extensions": "false"})
    connection.execute(f"LOAD '{next(extensions.glob('*/azure.duckdb_extension'))}'")
    options = container.environment
    connection.execute(
        "CREATE SECRET azurite (TYPE azure, CONNECTION_STRING 'DefaultEndpointsProtocol=http;"
        f"AccountName={options['AZURE_STORAGE_ACCOUNT_NAME']};AccountKey={options['AZURE_STORAGE_ACCOUNT_KEY']};"
        f"BlobEndpoint={options['AZURE_STORAGE_ENDPOINT']};')")
    table = f"az://{container.name}/{uri.split('.dfs.core.windows.net/', 1)[1]}"
    live: set[str] = set()
    for (content,) in connection.execute(
            f"SELECT content FROM read_text('{table}/_delta_log/*.json') ORDER BY filename").fetchall():
        for action in map(json.loads, content.splitlines()):
            if "add" in action:
                live.add(unquote(action["add"]["path"]))
            elif "remove" in action:
                live.discard(unquote(action["remove"]["path"]))
    if not live:
        return []
    listed = ", ".join(f"'{table}/{path}'" for path in sorted(live))
    selected = ", ".join(f'"{column}"' for column in columns)  # offset and partition are SQL words
    return sorted(connection.execute(f"SELECT {selected} FROM read_parquet([{listed}])").fetchall())


@pytest.mark.slow
@pytest.mark.parametrize("kind", STORES)
def test_a_run_lands_in_the_cloud_store_and_a_replay_replaces_its_rows_there(
    request: pytest.FixtureRequest, kind: str, sandbox_kafka, kafka_topic, produce_keyed, tmp_path: Path
) -> None:
    store = _store(request, kind)
    topic = kafka_topic(partitions=2)
    placed = produce_keyed(sandbox_kafka.bootstrap_servers, topic, 120, value=lambda i: f"v{i}".encode())
    ranges = {topic: {str(p): (0, len(o)) for p, o in placed.items()}}
    uri = f"{store.root}/tenants/t1/orders"
    target = {"type": "delta", "uri": uri, "storage_options": store.environment}
    spec = make_spec(sandbox_kafka.bootstrap_servers, ranges, target, value_format="string")
    log: list[str] = []

    first = run_job(spec, tmp_path / "work", log)

    assert first.status == "succeeded", first.error
    assert (first.rows_written, first.delta_version) == (120, 1)
    every = sorted((p, o) for p, offsets in placed.items() for o in offsets)
    rows = read_back(store, uri, ["partition", "offset", "value", "_inlet_run_id"])
    assert [(p, o) for p, o, _, _ in rows] == every
    # Which value went to which (partition, offset) is the broker's choice: the values are compared whole.
    assert sorted(_text(v) for _, _, v, _ in rows) == sorted(f"v{i}" for i in range(120))
    assert {r for *_, r in rows} == {spec.run_id}

    half = {topic: {p: ((end + 1) // 2, end) for p, (_, end) in parts.items()} for topic, parts in ranges.items()}
    replay = make_spec(sandbox_kafka.bootstrap_servers, half, {**target, "replace_ranges": half}, version=2,
                       pipeline_id=spec.pipeline_id, value_format="string")

    second = run_job(replay, tmp_path / "work", log)

    assert second.status == "succeeded", second.error
    replayed = {(p, o) for p, o in every if o >= half[topic][str(p)][0]}
    assert second.rows_written == len(replayed) and second.delta_version == 2
    after = read_back(store, uri, ["partition", "offset", "value", "_inlet_run_id"])
    assert [(p, o) for p, o, _, _ in after] == every, "rows lost or duplicated by the replay"
    assert {(p, o): r for p, o, _, r in after} == {c: replay.run_id if c in replayed else spec.run_id for c in every}
    assert {(p, o): v for p, o, v, _ in after} == {(p, o): v for p, o, v, _ in rows}  # the same records again
    history = Store(store.environment).delta_table(uri).history(1)[0]
    assert history["operation"] == "WRITE"  # the replay's removes and adds in one commit
    secret = next(v for k, v in store.environment.items() if k.endswith(("ACCOUNT_KEY", "SERVICE_ACCOUNT_KEY")))
    assert not [line for line in log if secret in line or "PRIVATE KEY" in line]


def _commit_one_writer(options: dict[str, str], uri: str, writer: int) -> int | None:
    """One writer's file and commit, as a run's task and driver make them (a spawned process)."""
    store = Store(options)
    rows = pa.table({"writer": pa.array([writer] * 5, pa.int64()), "seq": pa.array(range(5), pa.int64())})
    filesystem, base = store.filesystem(uri)
    path = f"part-writer-{writer}.parquet"
    pq.write_table(rows, f"{base}/{path}", filesystem=filesystem)
    size = filesystem.get_file_info(f"{base}/{path}").size
    file = DataFile(table="main", path=path, size=size, partition_values={}, num_records=5,
                    stats=json.dumps({"numRecords": 5}))
    return commit_files(Table(store, uri), Txn(app_id=f"writer-{writer}", version=1), [file], rows.schema)


@pytest.mark.parametrize("kind", STORES)
def test_four_concurrent_commits_all_land(request: pytest.FixtureRequest, kind: str) -> None:
    store = _store(request, kind)
    uri = f"{store.root}/tenants/t1/raced"
    assert _commit_one_writer(store.environment, uri, 0) == 1  # the table exists; the four race on version 2

    with _SPAWN.Pool(4) as pool:
        versions = pool.starmap(_commit_one_writer, [(store.environment, uri, n) for n in (1, 2, 3, 4)])

    assert all(2 <= v <= 5 for v in versions), versions  # the table's version each saw after its own commit
    assert read_back(store, uri, ["writer", "seq"]) == [(w, s) for w in range(5) for s in range(5)]
    table = Store(store.environment).delta_table(uri)
    # Each commit its own version: none overwrote another's log entry.
    assert table.version() == 5
    assert sorted(c.get("inlet.txn", "") for c in table.history()) == ["", *(f"writer-{n}:1" for n in range(5))]
    assert {n: table.transaction_version(f"writer-{n}") for n in range(5)} == dict.fromkeys(range(5), 1)


_CONNECT = re.compile(r'connect\(\d+, \{sa_family=AF_INET6?, .*?(?:inet_addr\(|inet_pton\(AF_INET6, )"([^"]+)"')


@pytest.mark.parametrize("kind", STORES)
def test_no_process_asks_a_cloud_metadata_address_for_credentials(
    request: pytest.FixtureRequest, kind: str, tmp_path: Path
) -> None:
    """Every connection a commit and a read make, seen by strace (never by connecting anywhere):
    loopback only, and none to 169.254.169.254, where a client looking for ambient credentials asks."""
    if not shutil.which("strace"):
        pytest.skip("needs strace to watch the connections (apt-get install strace)")
    store = _store(request, kind)
    uri = f"{store.root}/tenants/t1/watched"
    # os._exit: a process that used deltalake and pyarrow sometimes aborts in its interpreter's teardown
    # ("terminate called without an active exception", about 1 in 10 here, plain write_deltalake too).
    script = ("import os, sys, json; from tests.spark_jobs.test_cloud_storage import _commit_one_writer, _read_rows\n"
              "options, uri = json.loads(sys.argv[1]), sys.argv[2]\n"
              "assert _commit_one_writer(options, uri, 7) == 1\n"
              "print(_read_rows(options, uri, ['writer', 'seq']), flush=True)\n"
              "os._exit(0)\n")
    trace = tmp_path / "connect.trace"
    # Only what a user gives: no ambient AWS/Azure/Google settings reach the child.
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "AZURE_", "GOOGLE_", "GCE_"))}

    done = subprocess.run(["strace", "-f", "-e", "trace=connect", "-o", str(trace), sys.executable, "-c", script,
                           json.dumps(store.environment), uri], check=False, capture_output=True, text=True,
                          timeout=120,
                          env=environment, cwd=Path(__file__).parents[2])

    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == str([(7, s) for s in range(5)])
    calls = [line for line in trace.read_text().splitlines() if "connect(" in line and "AF_INET" in line]
    addresses = [found.group(1) for line in calls if (found := _CONNECT.search(line))]
    assert calls and len(addresses) == len(calls), calls
    assert set(addresses) <= {"127.0.0.1", "::1"}, addresses
    assert "169.254.169.254" not in trace.read_text()
