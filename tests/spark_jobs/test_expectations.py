"""A pipeline's expectations (``contract.expectations``) in its runs, the whole job: the warm engine,
local Spark, the sandbox Kafka, the tables read back by DuckDB's delta extension (not Inlet's writer).

Each action with exact counts: ``warn`` writes every row and counts; ``quarantine`` sends the
violating rows' records to the quarantine table with the rule's name, beside the records that did not
decode; ``fail`` fails the run before its commit (no table, no quarantine, no file left). A keyed
table quarantines a violating change and tests no delete. A rule that does not fit the rows' types
fails the run before anything is read."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any, cast

import pytest

from spark_jobs.contract.expectations import REASON
from spark_jobs.formats.json_values import NOT_SCHEMA
from spark_jobs.spec import RunSpec
from tests.spark_jobs.helpers import duckdb_connection, make_spec, run_job

pytestmark = pytest.mark.slow

SCHEMA = "id INT, amount DECIMAL(10,2), email STRING"
N = 60


def _order(i: int) -> bytes:
    """Every tenth record is not JSON; amounts of i % 6 == 1 are negative; emails of i % 4 == 2 are null."""
    if i % 10 == 0:
        return b"{not json"
    amount = f"-{i}.50" if i % 6 == 1 else f"{i}.25"
    return json.dumps({"id": i, "amount": amount, "email": None if i % 4 == 2 else f"u{i}@x.org"}).encode()


DECODED = [i for i in range(N) if i % 10]
NEGATIVE = [i for i in DECODED if i % 6 == 1]
NO_EMAIL = [i for i in DECODED if i % 4 == 2]


def _rules(*rules: tuple[str, str, str]) -> dict[str, Any]:
    return {"expectations": [{"name": name, "predicate": predicate, "action": action} for name, predicate, action in rules]}


def _query(sql: str) -> list[tuple]:
    return sorted(duckdb_connection().execute(sql).fetchall())


def _orders_run(bootstrap: str, topic: str, uri: str, contract: dict[str, Any], produce: Any) -> RunSpec:
    placed = produce(bootstrap, topic, N, value=_order, key=lambda i: f"k{i}")
    ranges = {topic: {str(p): (0, len(offsets)) for p, offsets in placed.items()}}
    spec = make_spec(bootstrap, ranges, {"type": "delta", "uri": uri, "quarantine_uri": f"{uri}__quarantine"},
                     value_format="json", schema=SCHEMA)
    return _with(spec, contract)


def _with(spec: RunSpec, contract: dict[str, Any]) -> RunSpec:
    return RunSpec.model_validate({**spec.model_dump(by_alias=True), "contract": contract})


def test_warn_counts_and_writes_and_quarantine_sets_rows_aside_by_name(sandbox_kafka, kafka_topic, produce_keyed,
                                                                       tmp_path: Path) -> None:
    uri = str(tmp_path / "orders")
    spec = _orders_run(sandbox_kafka.bootstrap_servers, kafka_topic(partitions=2), uri, _rules(
        ("has_email", "email IS NOT NULL", "warn"), ("positive_amount", "amount > 0", "quarantine")), produce_keyed)

    result = run_job(spec, tmp_path / "work")

    assert result.status == "succeeded", result.error
    assert [(e.name, e.action, e.rows_violating) for e in result.expectations] == [
        ("has_email", "warn", len(NO_EMAIL)), ("positive_amount", "quarantine", len(NEGATIVE))]
    assert result.rows_violating == len(set(NO_EMAIL) | set(NEGATIVE))
    assert result.rows_written == len(DECODED) - len(NEGATIVE)
    assert result.rows_quarantined == N - len(DECODED) + len(NEGATIVE)
    # warn: the rows without an email are written, as they came; quarantine: no negative amount is.
    assert _query(f"SELECT id, amount, email FROM delta_scan('{uri}')") == sorted(
        (i, Decimal(f"{i}.25"), None if i % 4 == 2 else f"u{i}@x.org") for i in DECODED if i not in NEGATIVE)
    quarantined = _query(f"SELECT decode(key), _inlet_quarantine_reason FROM delta_scan('{uri}__quarantine')")
    assert quarantined == sorted([(f"k{i}", NOT_SCHEMA) for i in range(N) if i % 10 == 0]
                                 + [(f"k{i}", REASON + "positive_amount") for i in NEGATIVE])


def test_fail_fails_the_run_before_its_commit_and_leaves_nothing(sandbox_kafka, kafka_topic, produce_keyed,
                                                                tmp_path: Path) -> None:
    uri = str(tmp_path / "orders")
    spec = _orders_run(sandbox_kafka.bootstrap_servers, kafka_topic(partitions=2), uri, _rules(
        ("has_email", "email IS NOT NULL", "warn"), ("positive_amount", "amount > 0", "fail")), produce_keyed)

    result = run_job(spec, tmp_path / "work")

    assert result.status == "failed" and result.error is not None
    assert result.error.kind == "expectation_failed"
    assert "expectation positive_amount (action fail)" in result.error.message
    assert (result.rows_written, result.rows_quarantined, result.delta_version) == (0, 0, None)
    for table in (uri, f"{uri}__quarantine"):  # neither committed, and no file of the run's tasks is left
        assert not list(Path(table).rglob("*.parquet")) and not (Path(table) / "_delta_log").exists()


def test_a_rule_that_does_not_fit_the_rows_fails_the_run_before_it_reads(sandbox_kafka, kafka_topic, produce_keyed,
                                                                        tmp_path: Path) -> None:
    uri = str(tmp_path / "orders")
    spec = _orders_run(sandbox_kafka.bootstrap_servers, kafka_topic(partitions=1), uri,
                       _rules(("short_email", "length(amount) < 40", "warn")), produce_keyed)

    result = run_job(spec, tmp_path / "work")

    assert result.error is not None and result.error.kind == "invalid_spec", result.error
    assert result.error.message.startswith("expectation short_email: length does not apply to decimal")
    assert sum(p.records_read for p in result.partitions) == 0


def test_a_keyed_table_quarantines_a_violating_change_and_tests_no_delete(sandbox_kafka, kafka_topic, produce_keyed,
                                                                         tmp_path: Path) -> None:
    """Changes of 10 keys, the last 4 records tombstones of keys 0-3: a change with a negative amount
    is quarantined and leaves its key's row as the previous change set it; deletes carry no amount and
    break neither rule."""
    bootstrap, topic, uri = sandbox_kafka.bootstrap_servers, kafka_topic(partitions=1), str(tmp_path / "accounts")

    def change(i: int) -> bytes:
        if i >= 30:
            return cast(bytes, None)  # a tombstone of key i - 30
        return json.dumps({"id": i % 10, "amount": f"-{i}" if i in (21, 25) else f"{i}.5", "email": "a@x.org"}).encode()

    produce_keyed(bootstrap, topic, 34, value=change, key=lambda i: json.dumps({"id": i % 10 if i < 30 else i - 30}))
    spec = make_spec(bootstrap, {topic: {"0": (0, 34)}},
                     {"type": "delta", "uri": uri, "quarantine_uri": f"{uri}__quarantine", "mode": "upsert",
                      "key": ["id"]}, value_format="json", schema=SCHEMA)
    spec = _with(spec, _rules(("positive_amount", "amount > 0", "quarantine"), ("has_amount", "amount IS NOT NULL", "warn")))

    result = run_job(spec, tmp_path / "work")

    assert result.status == "succeeded", result.error
    assert [(e.name, e.rows_violating) for e in result.expectations] == [("positive_amount", 2), ("has_amount", 0)]
    assert result.rows_quarantined == 2
    # Keys 1 and 5 keep their previous change (11 and 15); keys 0-3 are deleted.
    assert _query(f"SELECT id, amount FROM delta_scan('{uri}') WHERE NOT _inlet_deleted") == [
        (k, Decimal(f"{20 + k if k not in (1, 5) else 10 + k}.5")) for k in range(4, 10)]
    assert _query(f"SELECT decode(key), _inlet_quarantine_reason FROM delta_scan('{uri}__quarantine')") == [
        ('{"id": 1}', REASON + "positive_amount"), ('{"id": 5}', REASON + "positive_amount")]
