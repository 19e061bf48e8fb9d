"""A keyed table (``target.mode`` upsert) from a Debezium-shaped topic, the whole job: the warm engine,
local Spark, the sandbox Kafka. Inserts, updates, deletes with their tombstones, snapshot reads, keys
that move partition, and runs whose ranges cut the partitions unevenly (so a key's later changes are
merged before its earlier ones) land as exactly the state a reference computes; a retried run and a
replay of everything leave the table as it is. Read back with delta-rs, DuckDB's delta extension and delta-spark."""

from __future__ import annotations

import json
from pathlib import Path
from typing import cast

import pytest
from deltalake import DeltaTable

from tests.fixtures.debezium import (
    SCHEMA,
    change_log,
    changes_in,
    final_rows,
    history_rows,
    live_rows,
    produce_changes,
    rows_set,
)
from tests.spark_jobs.helpers import duckdb_connection, make_spec, run_job
from worker.launch import SparkSubmitSettings

pytestmark = pytest.mark.slow

def _duckdb_rows(uri: str) -> list[tuple]:
    return sorted(duckdb_connection().execute(f"SELECT id, name, tier FROM delta_scan('{uri}') WHERE NOT _inlet_deleted").fetchall())


def _debezium_topic(bootstrap: str, topic: str, seed: int, keys: int, n: int, uri: str,
                    **target: object) -> tuple[list, dict[int, int], dict, list[dict]]:
    """A Debezium change log on ``topic`` (keys moved partition halfway), a keyed target at ``uri``, and
    two runs' ranges: partition 0 whole in the first, the others a third, so later changes of moved keys
    go in first."""
    log = change_log(seed=seed, keys=keys, n=n)
    ends = produce_changes(bootstrap, topic, log)
    spec = {"type": "delta", "uri": uri, "quarantine_uri": f"{uri}__quarantine", "mode": "upsert", "key": ["id"],
            "sequence_by": "source.lsn", "changes": "debezium", **target}
    cuts = {p: end if p == 0 else end // 3 for p, end in ends.items()}
    runs = [{topic: {str(p): (0, cuts[p]) for p in ends}}, {topic: {str(p): (cuts[p], ends[p]) for p in ends}}]
    return log, ends, spec, runs


def _ranges(run: dict, topic: str) -> dict[int, tuple[int, int]]:
    return {int(p): r for p, r in run[topic].items()}


def _engines(uri: str) -> set[str]:
    """Which writer made each MERGE of the table (its commits' ``engineInfo`` or ``clientVersion``)."""
    commits = [json.loads(line)["commitInfo"] for entry in sorted((Path(uri) / "_delta_log").glob("*.json"))
               for line in entry.read_text().splitlines() if '"commitInfo"' in line]
    return {("delta-spark" if "Delta-Lake" in c.get("engineInfo", "") else "delta-rs") for c in commits if c["operation"] == "MERGE"}


# delta-spark: every MERGE on the run's Spark (``target.merge_on_spark_bytes`` 0, ``delta_tables.spark_merge``).
@pytest.mark.parametrize("merged_by", ["delta-rs", "delta-spark"])
def test_a_debezium_topic_lands_as_the_final_state_and_retries_and_replays_change_nothing(
        sandbox_kafka, kafka_topic, tmp_path: Path, request: pytest.FixtureRequest, merged_by: str) -> None:
    topic = kafka_topic(partitions=3)
    uri = str(tmp_path / "customers")
    log, ends, target, runs = _debezium_topic(sandbox_kafka.bootstrap_servers, topic, 30, 40, 600, uri,
                                              merge_on_spark_bytes=0 if merged_by == "delta-spark" else None)
    deletes = sum(1 for change in log if change[1] == "d")

    results = []
    for version, ranges in enumerate(runs, start=1):
        spec = make_spec(sandbox_kafka.bootstrap_servers, ranges, target, version=version, pipeline_id="keyed",
                         value_format="json", schema=SCHEMA)
        results.append(run_job(spec, tmp_path / f"work{version}"))
        assert results[-1].status == "succeeded", results[-1].error
    # The rows each MERGE set: a key's latest change in the run, where newer than the row the table holds.
    assert [r.rows_written for r in results] == rows_set([changes_in(log, _ranges(run, topic)) for run in runs])
    assert sum(r.rows_quarantined for r in results) == 0
    assert all(r.files_written for r in results)  # what table maintenance counts
    # What a tenant's usage counts: the bytes of the files each MERGE added, as its log entry has them.
    log_adds = [sum(a["add"]["size"] for a in map(json.loads, (Path(uri) / "_delta_log" / f"{v:020d}.json").read_text().splitlines())
                    if "add" in a) for v in (r.delta_version for r in results)]
    assert [r.bytes_written for r in results] == log_adds and all(log_adds)
    assert sum(p.records_read for r in results for p in r.partitions) == len(log) + deletes
    expected = final_rows(log)
    assert live_rows(uri) == expected
    assert _duckdb_rows(uri) == expected
    version = DeltaTable(uri).version()

    retried = run_job(spec, tmp_path / "retry")  # the second run again: its txn is in the table
    assert retried.status == "succeeded" and retried.already_committed, retried.error
    assert DeltaTable(uri).version() == version

    replay = make_spec(sandbox_kafka.bootstrap_servers, {topic: {str(p): (0, end) for p, end in ends.items()}}, target,
                       version=3, pipeline_id="keyed", value_format="json", schema=SCHEMA)
    replayed = run_job(replay, tmp_path / "replay")
    assert replayed.status == "succeeded" and not replayed.already_committed, replayed.error
    assert replayed.rows_written == 0  # every change is already in the table
    assert live_rows(uri) == expected
    assert _duckdb_rows(uri) == expected
    table = DeltaTable(uri)
    assert table.transaction_version("inlet-pipeline-keyed") == 3
    # One row per key ever seen; the deleted ones flagged, with only their key.
    rows = table.to_pyarrow_table().to_pylist()
    assert sorted(r["id"] for r in rows) == sorted({change[0] for change in log})
    assert all(r["name"] is None for r in rows if r["_inlet_deleted"])
    request.getfixturevalue("delta_spark").assert_reads_alike(uri, table.to_pyarrow_table())  # MERGE's files too
    assert _engines(uri) == {merged_by}


def test_a_spark_submit_run_on_the_cluster_merges_on_its_executors(
        sandbox_kafka, kafka_topic, spark_cluster: SparkSubmitSettings, tmp_path: Path) -> None:
    """The spark-submit driver has only a context: the MERGE takes a session on it, with delta-spark's
    extension from the submit's conf, and rewrites the table's files on the standalone cluster's
    executors (another process, reaching the table on this machine's disk as on a shared one)."""
    topic = kafka_topic(partitions=3)
    uri = str(tmp_path / "customers")
    log, ends, target, _ = _debezium_topic(sandbox_kafka.bootstrap_servers, topic, 31, 20, 200, uri, merge_on_spark_bytes=0)
    spec = make_spec(sandbox_kafka.bootstrap_servers, {topic: {str(p): (0, end) for p, end in ends.items()}}, target,
                     pipeline_id="keyed-submit", value_format="json", schema=SCHEMA)
    result = run_job(spec, tmp_path / "work", settings=spark_cluster, engine="submit")
    assert result.status == "succeeded" and result.rows_written, result.error
    assert live_rows(uri) == final_rows(log)
    assert _engines(uri) == {"delta-spark"}


@pytest.mark.parametrize("deletes", ["mark", "soft"])
def test_a_compacted_topic_of_rows_and_tombstones_lands_as_its_latest_rows(
        sandbox_kafka, kafka_topic, produce_keyed, tmp_path: Path, deletes: str) -> None:
    topic = kafka_topic(partitions=2)
    # Key i % 11 (each key in one partition, as Kafka's partitioner places it); every 7th record a tombstone.
    def value(i: int) -> bytes | None:
        return None if i % 7 == 3 else json.dumps({"id": i % 11, "name": f"v{i}", "tier": i}).encode()

    placed = produce_keyed(sandbox_kafka.bootstrap_servers, topic, 120, key=lambda i: json.dumps({"id": i % 11}),
                           value=lambda i: cast(bytes, value(i)))
    final: dict[int, bytes | None] = {}
    for i in range(120):
        final[i % 11] = value(i)
    expected = sorted((v["id"], v["name"], v["tier"]) for v in (json.loads(b) for b in final.values() if b is not None))
    uri = str(tmp_path / "accounts")
    target = {"type": "delta", "uri": uri, "quarantine_uri": f"{uri}__quarantine", "mode": "upsert", "key": ["id"],
              "deletes": deletes}
    halves = [{topic: {str(p): (0, len(o) // 2) for p, o in placed.items()}},
              {topic: {str(p): (len(o) // 2, len(o)) for p, o in placed.items()}}]
    for version, ranges in enumerate(halves, start=1):
        spec = make_spec(sandbox_kafka.bootstrap_servers, ranges, target, version=version, pipeline_id="rows",
                         value_format="json", schema=SCHEMA)
        result = run_job(spec, tmp_path / f"work{version}")
        assert result.status == "succeeded" and result.rows_quarantined == 0, result.error
    assert live_rows(uri) == expected
    assert _duckdb_rows(uri) == expected
    deleted = {r["id"]: r for r in DeltaTable(uri).to_pyarrow_table().to_pylist() if r["_inlet_deleted"]}
    assert sorted(deleted) == sorted(k for k, v in final.items() if v is None)
    if deletes == "soft":  # each deleted key keeps its last values before the delete, and when it was deleted
        last: dict[int, dict] = {}
        for i in range(120):
            if value(i) is not None:
                last[i % 11] = json.loads(cast(bytes, value(i)))
        assert {k: (r["name"], r["tier"]) for k, r in deleted.items()} == {k: (last[k]["name"], last[k]["tier"]) for k in deleted}
        assert all(r["_inlet_deleted_at"] is not None for r in deleted.values())
    else:
        assert {(r["name"], r["tier"]) for r in deleted.values()} == {(None, None)}


HISTORY_COLUMNS = ["id", "name", "tier", "_inlet_valid_from", "_inlet_valid_to", "_inlet_current", "_inlet_deleted"]


def _history(uri: str) -> list[tuple]:
    rows = DeltaTable(uri).to_pyarrow_table().to_pylist()
    return sorted((tuple(r[c] for c in HISTORY_COLUMNS) for r in rows), key=lambda r: (r[0], r[3]))


@pytest.mark.parametrize("merged_by", ["delta-rs", "delta-spark"])
def test_an_scd_type_2_table_keeps_every_change_as_the_reference_history_through_retries_and_replays(
        sandbox_kafka, kafka_topic, tmp_path: Path, request: pytest.FixtureRequest, merged_by: str) -> None:
    topic = kafka_topic(partitions=3)
    uri = str(tmp_path / "customers_history")
    log, ends, target, runs = _debezium_topic(sandbox_kafka.bootstrap_servers, topic, 31, 30, 500, uri, scd_type=2,
                                              merge_on_spark_bytes=0 if merged_by == "delta-spark" else None)
    for version, ranges in enumerate(runs, start=1):
        spec = make_spec(sandbox_kafka.bootstrap_servers, ranges, target, version=version, pipeline_id="history",
                         value_format="json", schema=SCHEMA)
        result = run_job(spec, tmp_path / f"work{version}")
        assert result.status == "succeeded" and result.rows_quarantined == 0, result.error
    expected = history_rows(log)
    assert len(expected) == len(log)  # every change a row: several versions of a key in one run
    assert _history(uri) == expected
    duckdb = duckdb_connection()
    assert sorted(duckdb.execute(f"SELECT {', '.join(HISTORY_COLUMNS)} FROM delta_scan('{uri}')").fetchall(),
                  key=lambda r: (r[0], r[3])) == expected
    # The current rows are what SCD type 1 holds.
    assert sorted(duckdb.execute(f"SELECT id, name, tier FROM delta_scan('{uri}') WHERE _inlet_current").fetchall()) == \
        final_rows(log)
    version = DeltaTable(uri).version()

    retried = run_job(spec, tmp_path / "retry")
    assert retried.status == "succeeded" and retried.already_committed, retried.error
    assert DeltaTable(uri).version() == version
    replay = make_spec(sandbox_kafka.bootstrap_servers, {topic: {str(p): (0, end) for p, end in ends.items()}}, target,
                       version=3, pipeline_id="history", value_format="json", schema=SCHEMA)
    replayed = run_job(replay, tmp_path / "replay")
    assert replayed.status == "succeeded" and not replayed.already_committed, replayed.error
    assert replayed.rows_written == 0  # every version is already in the history
    assert _history(uri) == expected
    assert DeltaTable(uri).transaction_version("inlet-pipeline-history") == 3
    assert _engines(uri) == {merged_by}
    request.getfixturevalue("delta_spark").assert_reads_alike(uri, DeltaTable(uri).to_pyarrow_table())

