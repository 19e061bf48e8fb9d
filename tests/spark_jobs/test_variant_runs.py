"""VARIANT columns of a json pipeline, through a run into Delta (local Spark, the sandbox Kafka), read
back by every reader in the suite: delta-spark reads each as the VARIANT Spark's own ``parse_json`` makes
of the same text (``to_json`` of both alike); DuckDB 1.4.4 and delta-rs read the table, a VARIANT as its
struct of two binaries, which decode to the record's JSON. A field named ``value`` of type VARIANT is
the whole value, any JSON; a column of shapeless JSON added to an existing table arrives as a VARIANT;
a key twice in one object sends its record to quarantine; a replay or a compaction of a VARIANT table
is refused before anything is written."""

from __future__ import annotations

import json
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from spark_jobs.delta_tables import Table
from spark_jobs.delta_tables.commit import commit_files
from spark_jobs.errors import JobError
from spark_jobs.formats import variant
from spark_jobs.spec import Txn
from spark_jobs.storage import Store
from spark_jobs.table_features import writer_for
from tests.fixtures.delta_spark import DeltaSpark
from tests.spark_jobs.helpers import duckdb_connection, make_spec, run_job

pytestmark = pytest.mark.slow

ATTRS = [{"color": "red", "sizes": [38, 40.5], "stock": {"paris": 3, "lyon": None}},
         [1, "two", True, None, 12345678901234567890123],
         "just text" * 10, -7, 0.000001, 1.5e300, None, {}]


def _record(i: int) -> bytes:
    if i == len(ATTRS):
        return b'{"id": 99, "attrs": {"k": 1, "k": 2}}'  # a key twice: to the quarantine
    return json.dumps({"id": i, "attrs": ATTRS[i], "meta": {"src": f"s{i}", "extra": {"n": i}}}).encode()


def _decoded(cell: dict[str, bytes] | None) -> Any:
    return None if cell is None else variant.decode(cell["metadata"], cell["value"])


def _json(value: Any) -> Any:
    """``value`` as the decoder gives its JSON back: numbers with a fraction as Decimals, with an exponent as floats."""
    return json.loads(json.dumps(value), parse_float=lambda t: float(t) if "e" in t.lower() else Decimal(t))


def _run(bootstrap: str, topic: str, n: int, uri: str, schema: str, tmp_path: Path, version: int) -> Any:
    spec = make_spec(bootstrap, {topic: {"0": (0, n)}}, {"type": "delta", "uri": uri, "quarantine_uri": f"{uri}__quarantine"},
                     value_format="json", schema=schema, version=version, pipeline_id=Path(uri).name)
    result = run_job(spec, tmp_path)
    assert result.status == "succeeded", result.error
    return result


def test_variant_columns_read_alike_in_delta_spark_duckdb_and_delta_rs(
        sandbox_kafka, kafka_topic, produce_keyed, delta_spark: DeltaSpark, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    topic, n = kafka_topic(partitions=1), len(ATTRS) + 1
    produce_keyed(sandbox_kafka.bootstrap_servers, topic, n, value=_record)
    uri = str(tmp_path / "products")

    result = _run(sandbox_kafka.bootstrap_servers, topic, n, uri, "id INT, attrs VARIANT, meta STRUCT<src: STRING, extra: VARIANT>",
                  tmp_path, 1)

    assert (result.rows_written, result.rows_quarantined) == (len(ATTRS), 1)
    assert DeltaTable(uri).protocol().reader_features == ["variantType"]
    assert DeltaTable(uri).schema().to_json().count('"type":"variant"') == 2
    # delta-spark: each VARIANT as Spark's own parse_json makes it of the same JSON text.
    spark = delta_spark.spark
    got = {r["id"]: (r["attrs"], r["extra"], r["kind"]) for r in spark.read.format("delta").load(uri).selectExpr(
        "id", "to_json(attrs) AS attrs", "to_json(meta.extra) AS extra", "schema_of_variant(attrs) AS kind").collect()}
    texts = spark.createDataFrame([(i, json.dumps(a)) for i, a in enumerate(ATTRS)], "id INT, j STRING")
    wanted = {r["id"]: (r["attrs"], json.dumps({"n": r["id"]}, separators=(",", ":")), r["kind"]) for r in texts.selectExpr(
        "id", "to_json(parse_json(j)) AS attrs", "schema_of_variant(parse_json(j)) AS kind").collect()}
    assert got == wanted
    assert spark.read.format("delta").load(uri).where("attrs:color::string = 'red'").count() == 1
    # DuckDB and delta-rs: the struct of two binaries, which decode to the record's JSON.
    duck = duckdb_connection().execute(f"SELECT id, attrs FROM delta_scan('{uri}')").fetchall()
    rows = DeltaTable(uri).to_pyarrow_table().to_pylist()
    for read in ({i: _decoded(a) for i, a in duck}, {r["id"]: _decoded(r["attrs"]) for r in rows}):
        assert read == {i: _json(a) for i, a in enumerate(ATTRS)}
    assert {r["meta"]["src"]: _decoded(r["meta"]["extra"]) for r in rows} == {f"s{i}": {"n": i} for i in range(len(ATTRS))}
    quarantined = DeltaTable(f"{uri}__quarantine").to_pyarrow_table().to_pylist()
    assert [q["value"] for q in quarantined] == [_record(len(ATTRS))]
    # Inlet appends to a VARIANT table; a replay or a compaction would rewrite files: refused.
    assert writer_for(DeltaTable(uri), "append", uri, spark=False) == "delta-rs"
    for operation in ("replace", "compact"):
        with pytest.raises(JobError, match="is a VARIANT"):
            writer_for(DeltaTable(uri), operation, uri, spark=False)


def test_the_whole_value_as_a_variant_and_a_variant_column_added_later(
        sandbox_kafka, kafka_topic, produce_keyed, delta_spark: DeltaSpark, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    values = [b'{"a": 1}', b'[1, {"b": 2.50}]', b'"text"', b'17', b'not json', b'{"c": {"d": [true, null]}}']
    topic = kafka_topic(partitions=1)
    produce_keyed(sandbox_kafka.bootstrap_servers, topic, len(values), value=lambda i: values[i])
    whole = str(tmp_path / "events")

    result = _run(sandbox_kafka.bootstrap_servers, topic, len(values), whole, "value VARIANT", tmp_path, 1)

    assert (result.rows_written, result.rows_quarantined) == (5, 1)
    read = delta_spark.spark.read.format("delta").load(whole).selectExpr("offset", "to_json(value) AS j").collect()
    assert sorted((r["offset"], r["j"]) for r in read) == [
        (0, '{"a":1}'), (1, '[1,{"b":2.5}]'), (2, '"text"'), (3, "17"), (5, '{"c":{"d":[true,null]}}')]

    # A table of id alone gains a VARIANT column when the schema does: Delta's variant, not a struct.
    later = str(tmp_path / "later")
    ids = kafka_topic(partitions=1)
    produce_keyed(sandbox_kafka.bootstrap_servers, ids, 4, value=lambda i: json.dumps({"id": i, "extra": {"i": [i]}}).encode())
    _run(sandbox_kafka.bootstrap_servers, ids, 2, later, "id INT", tmp_path, 1)
    spec = make_spec(sandbox_kafka.bootstrap_servers, {ids: {"0": (2, 4)}},
                     {"type": "delta", "uri": later, "quarantine_uri": f"{later}__quarantine"},
                     value_format="json", schema="id INT, extra VARIANT", version=2, pipeline_id="later")
    assert run_job(spec, tmp_path).status == "succeeded"

    assert '"name":"extra","type":"variant"' in DeltaTable(later).schema().to_json()
    got = delta_spark.spark.read.format("delta").load(later).selectExpr("id", "to_json(extra) AS j").collect()
    assert sorted((r["id"], r["j"]) for r in got) == [(0, None), (1, None), (2, '{"i":[2]}'), (3, '{"i":[3]}')]
    # A column added later still leaves the VARIANT one a VARIANT (delta-rs's own merge would make it a struct).
    spec = make_spec(sandbox_kafka.bootstrap_servers, {ids: {"0": (3, 4)}},
                     {"type": "delta", "uri": later, "quarantine_uri": f"{later}__quarantine"},
                     value_format="json", schema="id INT, extra VARIANT, note STRING", version=3, pipeline_id="later")
    assert run_job(spec, tmp_path).status == "succeeded"
    assert '"name":"extra","type":"variant"' in DeltaTable(later).schema().to_json()
    assert delta_spark.spark.read.format("delta").load(later).where("extra:i[0]::int = 3").count() == 2


def test_a_field_added_inside_a_column_of_a_variant_table_is_refused(tmp_path: Path) -> None:
    """delta-rs adds a nested field only by its merge, which would turn the VARIANT into a struct."""
    table = Table(Store(), str(tmp_path / "t"))
    inner = pa.struct([pa.field("a", pa.int32())])
    commit_files(table, Txn(app_id="a", version=1), [], pa.schema([pa.field("s", inner), pa.field("v", variant.ARROW)]))

    with pytest.raises(JobError, match="a field added inside an existing column") as refused:
        commit_files(table, Txn(app_id="a", version=2), [],
                     pa.schema([pa.field("s", pa.struct([*inner, pa.field("b", pa.int32())])), pa.field("v", variant.ARROW)]))

    assert refused.value.kind == "schema_incompatible"
    assert '"name":"v","type":"variant"' in DeltaTable(table.uri).schema().to_json()
