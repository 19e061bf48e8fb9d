"""The evolution policy (``contract.evolution``) through a run into Delta (local Spark, the sandbox
Kafka, a real Schema Registry): an Avro subject whose int and float fields become long and double
mid-stream lands both versions in one column under ``widen`` (Delta's type widening, by delta-spark),
read by delta-spark and DuckDB, not by delta-rs 1.6; ``add`` fails such a run as before it,
``fail`` fails a new field; nothing is written by a run that fails (``merge_schema``'s rules for each
change: tests/formats/test_type_mapping.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from deltalake.exceptions import DeltaProtocolError

from spark_jobs.spec import Egress, RunSpec
from tests.fixtures.delta_spark import DeltaSpark
from tests.fixtures.schema_registry import unique_subject
from tests.fixtures.wire_format import avro_encoder, confluent_frame, produce_framed
from tests.spark_jobs.helpers import duckdb_connection, make_spec, run_job

pytestmark = pytest.mark.slow

V1 = {"type": "record", "name": "Reading", "fields": [
    {"name": "id", "type": "long"}, {"name": "qty", "type": "int"}, {"name": "price", "type": "float"}]}
WIDER = {**V1, "fields": [{"name": "id", "type": "long"}, {"name": "qty", "type": "long"},
                          {"name": "price", "type": "double"}]}
WITH_NOTE = {**V1, "fields": [*WIDER["fields"], {"name": "note", "type": ["null", "string"], "default": None}]}


def _records(schema: dict[str, Any], schema_id: int, ids: range) -> list[bytes]:
    encode = avro_encoder(json.dumps(schema))
    wide = schema is not V1
    return [confluent_frame(schema_id, encode({"id": i, "qty": i + (2**40 if wide else 0), "price": i + 0.25,
                                               **({"note": f"n{i}"} if "note" in json.dumps(schema) else {})}))
            for i in ids]


def _spec(bootstrap: str, registry: str, topic: str, subject: str, uri: str, span: tuple[int, int], version: int,
          policy: str, subject_version: int | None = None) -> RunSpec:
    made = make_spec(bootstrap, {topic: {"0": span}}, {"type": "delta", "uri": uri, "quarantine_uri": f"{uri}__quarantine"},
                     value_format="avro", registry={"url": registry},
                     value_subject={"subject": subject, **({"version": subject_version} if subject_version else {})},
                     version=version, pipeline_id=Path(uri).name)
    contract = made.contract.model_copy(update={"evolution": policy})
    return made.model_copy(update={"egress": Egress(allow=("127.0.0.0/8",)), "contract": contract})


def test_widen_lands_an_int_become_long_in_one_column_and_the_other_policies_fail(
        sandbox_kafka, kafka_topic, real_registry, delta_spark: DeltaSpark, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    bootstrap, subject, topic = sandbox_kafka.bootstrap_servers, unique_subject("widen"), kafka_topic(partitions=1)
    narrow_id = real_registry.register(subject, json.dumps(V1))
    wide_id = real_registry.register(subject, json.dumps(WIDER))
    produce_framed(bootstrap, topic, _records(V1, narrow_id, range(6)) + _records(WIDER, wide_id, range(6, 12)))
    uri = str(tmp_path / "readings")

    def run(span: tuple[int, int], version: int, policy: str, subject_version: int | None = None) -> Any:
        return run_job(_spec(bootstrap, real_registry.url, topic, subject, uri, span, version, policy, subject_version),
                       tmp_path / f"work{version}-{policy}")

    first = run((0, 6), 1, "widen", subject_version=1)
    assert first.status == "succeeded", first.error
    created = DeltaTable(uri).version()
    # add (today's policy) cannot put a long into the int column: the run fails before it reads or writes.
    refused = run((6, 12), 2, "add")
    assert (refused.status, refused.error.kind if refused.error else None) == ("failed", "schema_incompatible")
    assert "field qty is int32 in the table and int64 in the schema" in refused.error.message
    assert DeltaTable(uri).version() == created

    widened = run((6, 12), 2, "widen")
    assert widened.status == "succeeded", widened.error
    assert widened.rows_written == 6
    table = DeltaTable(uri)
    assert "typeWidening" in (table.protocol().writer_features or [])
    fields = {f["name"]: f for f in json.loads(table.schema().to_json())["fields"]}
    assert (fields["qty"]["type"], fields["price"]["type"]) == ("long", "double")
    assert fields["qty"]["metadata"]["delta.typeChanges"]  # how readers know the old files hold ints
    wanted = sorted((i, i + (2**40 if i >= 6 else 0), i + 0.25) for i in range(12))
    # delta-spark (what Databricks users run) reads both versions in the one wider column.
    spark_rows = delta_spark.spark.read.format("delta").load(uri).selectExpr("id", "qty", "price").collect()
    assert sorted((r["id"], r["qty"], r["price"]) for r in spark_rows) == wanted
    assert dict(delta_spark.spark.read.format("delta").load(uri).select("qty", "price").dtypes) == {
        "qty": "bigint", "price": "double"}
    # DuckDB 1.4.4's delta_scan reads it too, the old files' ints as BIGINT.
    duck = duckdb_connection().execute(f"SELECT id, qty, price FROM delta_scan('{uri}') ORDER BY id").fetchall()
    assert duck == wanted
    # delta-rs 1.6 does not read it (nor write it: Inlet's later commits are delta-spark's).
    with pytest.raises(DeltaProtocolError, match="typeWidening"):
        DeltaTable(uri).to_pyarrow_table()

    # Later runs commit by delta-spark (delta-rs 1.6 cannot write typeWidening) and land once.
    produce_framed(bootstrap, topic, _records(WIDER, wide_id, range(12, 14)))
    later = run((12, 14), 3, "widen")
    assert (later.status, later.rows_written) == ("succeeded", 2), later.error
    assert delta_spark.spark.read.format("delta").load(uri).count() == 14

    # fail refuses a new field and writes nothing; add takes it.
    noted_id = real_registry.register(subject, json.dumps(WITH_NOTE))
    produce_framed(bootstrap, topic, _records(WITH_NOTE, noted_id, range(14, 16)))
    before = DeltaTable(uri).version()
    failed = run((14, 16), 4, "fail")
    assert (failed.status, failed.error.kind if failed.error else None) == ("failed", "schema_incompatible")
    assert "field note (string) is not in the table, and the pipeline's evolution policy is fail" in failed.error.message
    assert DeltaTable(uri).version() == before
    added = run((14, 16), 4, "add")
    assert (added.status, added.rows_written) == ("succeeded", 2), added.error


def test_a_json_schema_changed_by_its_pipeline_follows_the_policy_too(
        sandbox_kafka, kafka_topic, produce_keyed, delta_spark: DeltaSpark, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    bootstrap, topic = sandbox_kafka.bootstrap_servers, kafka_topic(partitions=1)
    produce_keyed(bootstrap, topic, 6, value=lambda i: json.dumps({"id": i, "qty": i * 2**31 if i >= 3 else i}).encode())
    uri = str(tmp_path / "json_readings")

    def run(span: tuple[int, int], version: int, schema: str, policy: str) -> Any:
        spec = make_spec(bootstrap, {topic: {"0": span}}, {"type": "delta", "uri": uri, "quarantine_uri": f"{uri}__quarantine"},
                         value_format="json", schema=schema, version=version, pipeline_id=Path(uri).name)
        spec = spec.model_copy(update={"contract": spec.contract.model_copy(update={"evolution": policy})})
        return run_job(spec, tmp_path / f"work-{Path(uri).name}{version}-{policy}")

    assert run((0, 3), 1, "id INT, qty INT", "fail").status == "succeeded"
    failed = run((3, 6), 2, "id INT, qty BIGINT, note STRING", "fail")
    assert (failed.status, failed.error.kind if failed.error else None) == ("failed", "schema_incompatible")
    widened = run((3, 6), 2, "id INT, qty BIGINT", "widen")
    assert (widened.status, widened.rows_written) == ("succeeded", 3), widened.error
    rows = delta_spark.spark.read.format("delta").load(uri).selectExpr("id", "qty").collect()
    assert sorted((r["id"], r["qty"]) for r in rows) == [(i, i * 2**31 if i >= 3 else i) for i in range(6)]

    # A table delta-spark could not write once widened (a VARIANT column) is refused, and left as it was.
    uri = str(tmp_path / "json_variant")
    assert run((0, 3), 1, "id INT, qty INT, extra VARIANT", "widen").status == "succeeded"
    before = DeltaTable(uri).version()
    refused = run((3, 6), 2, "id INT, qty BIGINT, extra VARIANT", "widen")
    assert (refused.status, refused.error.kind if refused.error else None) == ("failed", "schema_incompatible")
    assert "widening qty would leave a table Inlet cannot write" in refused.error.message
    assert DeltaTable(uri).version() == before and "typeWidening" not in (DeltaTable(uri).protocol().writer_features or [])


@pytest.mark.parametrize("scd_type", [1, 2])
def test_fail_on_a_keyed_table_refuses_a_new_field_and_passes_the_same_columns(
        sandbox_kafka, kafka_topic, produce_keyed, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scd_type: int) -> None:
    """A keyed table holds Inlet's own columns beside the record's (a sequence, a delete mark, a
    version's validity): the policy compares the record's columns, so the same schema passes."""
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    bootstrap, topic = sandbox_kafka.bootstrap_servers, kafka_topic(partitions=1)
    produce_keyed(bootstrap, topic, 6, value=lambda i: json.dumps({"id": i % 3, "name": f"n{i}", "tier": i}).encode())
    uri = str(tmp_path / f"customers{scd_type}")
    keyed = {"type": "delta", "uri": uri, "quarantine_uri": f"{uri}__quarantine", "mode": "upsert", "key": ["id"],
             **({"scd_type": 2} if scd_type == 2 else {})}

    def run(span: tuple[int, int], version: int, schema: str) -> Any:
        spec = make_spec(bootstrap, {topic: {"0": span}}, keyed, value_format="json", schema=schema, version=version,
                         pipeline_id=f"customers{scd_type}")
        spec = spec.model_copy(update={"contract": spec.contract.model_copy(update={"evolution": "fail"})})
        return run_job(spec, tmp_path / f"work{version}")

    assert run((0, 2), 1, "id INT, name STRING").status == "succeeded"
    same = run((2, 4), 2, "id INT, name STRING")
    assert same.status == "succeeded", same.error
    refused = run((4, 6), 3, "id INT, name STRING, tier INT")
    assert (refused.status, refused.error.kind if refused.error else None) == ("failed", "schema_incompatible")
    assert "field tier (int32) is not in the table" in refused.error.message
