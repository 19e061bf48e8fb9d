"""Tables a pipeline opts into Delta features for (``target.table_features``: deletion vectors, liquid
clustering), the whole job on the warm engine and the sandbox Kafka: delta-spark creates the table with
them (``delta_tables.create``), the runs, a replay and another engine's DELETE then leave it exact by
delta-spark's reading and DuckDB's, its features kept."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from spark_jobs.delta_tables import Table
from spark_jobs.storage import Store
from spark_jobs.table_features import TableFeatures
from tests.fixtures.debezium import SCHEMA, change_log, final_rows, produce_changes
from tests.spark_jobs.helpers import duckdb_connection, make_spec, run_job

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(("create", "features"), [
    ({"cluster_by": ["partition"]}, {"clustering", "domainMetadata"}),
    ({"deletion_vectors": True}, {"deletionVectors"}),
    ({"deletion_vectors": True, "cluster_by": ["partition", "offset"]}, {"clustering", "deletionVectors"}),
], ids=["clustered", "deletion-vectors", "both"])
def test_a_table_created_with_the_features_asked_for_is_written_exactly_once(
        sandbox_kafka, kafka_topic, produce_keyed, delta_spark, tmp_path: Path, create: dict, features: set[str]) -> None:
    topic = kafka_topic(partitions=2)
    placed = produce_keyed(sandbox_kafka.bootstrap_servers, topic, 120)
    uri = str(tmp_path / "events")
    target = {"type": "delta", "uri": uri, "table_features": create}
    half = {topic: {str(p): (0, len(o) // 2) for p, o in placed.items()}}
    rest = {topic: {str(p): (len(o) // 2, len(o)) for p, o in placed.items()}}
    first = make_spec(sandbox_kafka.bootstrap_servers, half, target)
    assert (ran := run_job(first, tmp_path / "work")).status == "succeeded", ran.error

    delta = Table(Store({}), uri).delta()
    assert features <= TableFeatures.of(delta).features
    detail = delta_spark.spark.sql(f"DESCRIBE DETAIL delta.`{uri}`").collect()[0]
    assert list(detail.clusteringColumns) == list(create.get("cluster_by", []))
    assert (detail.properties.get("delta.enableDeletionVectors") == "true") == bool(create.get("deletion_vectors"))
    delta_spark.spark.sql(f"DELETE FROM delta.`{uri}` WHERE `partition` = 0 AND `offset` < 5")  # another engine's
    second = make_spec(sandbox_kafka.bootstrap_servers, rest, target, version=2, pipeline_id=first.pipeline_id)
    assert (ran := run_job(second, tmp_path / "work")).status == "succeeded", ran.error
    replayed = {topic: {"1": (3, len(placed[1]))}}
    replay = make_spec(sandbox_kafka.bootstrap_servers, replayed, {**target, "replace_ranges": replayed}, version=3,
                       pipeline_id=first.pipeline_id)
    assert (ran := run_job(replay, tmp_path / "work")).status == "succeeded", ran.error

    expected = Counter({(p, o): 1 for p, offsets in placed.items() for o in offsets if not (p == 0 and o < 5)})
    rows = delta_spark.read(uri)
    assert Counter(zip(rows["partition"].to_pylist(), rows["offset"].to_pylist(), strict=True)) == expected
    found = duckdb_connection().execute(f"select partition, \"offset\" from delta_scan('{uri}')").fetchall()
    assert Counter(found) == expected
    runs = Counter(zip(rows["partition"].to_pylist(), rows["_inlet_run_id"].to_pylist(), strict=True))
    assert runs[(1, replay.run_id)] == len(placed[1]) - 3
    assert features <= TableFeatures.of(Table(Store({}), uri).delta()).features
    if create.get("deletion_vectors"):  # the DELETE marked its rows in a deletion vector, as on Databricks
        assert any(f.name.startswith("deletion_vector_") for f in Path(uri).iterdir())


def test_a_keyed_table_created_with_deletion_vectors_merges_exactly(sandbox_kafka, kafka_topic, delta_spark,
                                                                    tmp_path: Path) -> None:
    topic = kafka_topic(partitions=3)
    log = change_log(seed=7, keys=30, n=300)
    ends = produce_changes(sandbox_kafka.bootstrap_servers, topic, log)
    uri = str(tmp_path / "accounts")
    target = {"type": "delta", "uri": uri, "quarantine_uri": f"{uri}__quarantine", "mode": "upsert", "key": ["id"],
              "sequence_by": "source.lsn", "changes": "debezium", "table_features": {"deletion_vectors": True}}
    cuts = {p: end // 2 for p, end in ends.items()}
    for version, ranges in enumerate([{topic: {str(p): (0, cuts[p]) for p in ends}},
                                      {topic: {str(p): (cuts[p], ends[p]) for p in ends}}], start=1):
        spec = make_spec(sandbox_kafka.bootstrap_servers, ranges, target, version=version, pipeline_id="keyed-dv",
                         value_format="json", schema=SCHEMA)
        assert (ran := run_job(spec, tmp_path / f"work{version}")).status == "succeeded", ran.error

    delta = Table(Store({}), uri).delta()
    assert "deletionVectors" in TableFeatures.of(delta).features
    key = next(f for f in delta.schema().fields if f.name == "id")
    assert key.metadata, "the key column lost its mark"  # the next run checks the table's key by it
    # Another engine's UPDATE (a deletion vector), then a replay of everything: the update stays.
    expected = final_rows(log)
    updated = expected[0][0]
    delta_spark.spark.sql(f"UPDATE delta.`{uri}` SET tier = -1 WHERE id = {updated}")
    everything = {topic: {str(p): (0, end) for p, end in ends.items()}}
    spec = make_spec(sandbox_kafka.bootstrap_servers, everything, {**target, "replace_ranges": everything}, version=3,
                     pipeline_id="keyed-dv", value_format="json", schema=SCHEMA)
    assert (ran := run_job(spec, tmp_path / "work3")).status == "succeeded", ran.error

    expected = sorted((i, name, -1 if i == updated else tier) for i, name, tier in expected)
    assert any(f.name.startswith("deletion_vector_") for f in Path(uri).iterdir())
    live = delta_spark.spark.sql(f"SELECT id, name, tier FROM delta.`{uri}` WHERE NOT _inlet_deleted").collect()
    assert sorted(tuple(r) for r in live) == expected
    found = duckdb_connection().execute(f"SELECT id, name, tier FROM delta_scan('{uri}') WHERE NOT _inlet_deleted")
    assert sorted(found.fetchall()) == expected
