"""A pipeline's sensitive fields in its runs, the whole job: the warm engine, local Spark, the sandbox
Kafka, the tables read back by DuckDB's delta extension (not Inlet's writer). A hashed field lands as
the tenant's HMAC, a redacted one as the mask, a dropped one as no column; no file of the table or its
quarantine holds a raw value (the quarantine's records are sealed, and open with the tenant's key). A
keyed table's hashed key column: changes and tombstones of one key meet in one row."""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path
from typing import Any, cast

import pytest

from spark_jobs.contract.sensitive import MASK, SEALED, FieldKey, new_field_key, open_sealed
from spark_jobs.spec import RunSpec
from tests.spark_jobs.helpers import duckdb_connection, make_spec, run_job

pytestmark = pytest.mark.slow

SCHEMA = "id INT, email STRING, customer STRUCT<ssn: STRING, tier: STRING>, notes STRING"
SENSITIVE = [{"field": "email", "action": "hash"}, {"field": "customer.ssn", "action": "redact"},
             {"field": "notes", "action": "drop"}]


def _order(i: int) -> bytes:
    if i % 10 == 9:  # not JSON: to the quarantine, holding the raw email
        return f'{{"id": {i}, "email": "raw{i}@secret.example", '.encode()
    return json.dumps({"id": i, "email": f"raw{i % 7}@secret.example", "customer": {"ssn": f"SSN-{i:04}", "tier": "gold"},
                       "notes": f"private note {i}"}).encode()


def _with(spec: RunSpec, contract: dict[str, Any]) -> RunSpec:
    return RunSpec.model_validate({**spec.model_dump(by_alias=True), "contract": contract})


def _files_hold(root: Path, *needles: bytes) -> list[str]:
    """The files under ``root`` (data and log) that hold any of ``needles``."""
    return [str(p) for p in root.rglob("*") if p.is_file() and any(n in p.read_bytes() for n in needles)]


def test_hashed_redacted_and_dropped_fields_and_a_sealed_quarantine(sandbox_kafka, kafka_topic, produce_keyed,
                                                                    tmp_path: Path) -> None:
    bootstrap, topic, uri = sandbox_kafka.bootstrap_servers, kafka_topic(partitions=2), str(tmp_path / "orders")
    placed = produce_keyed(bootstrap, topic, 40, value=_order, key=lambda i: f"k{i}")
    key = new_field_key()
    spec = _with(make_spec(bootstrap, {topic: {str(p): (0, len(o)) for p, o in placed.items()}},
                           {"type": "delta", "uri": uri, "quarantine_uri": f"{uri}__quarantine"},
                           value_format="json", schema=SCHEMA),
                 {"sensitive": SENSITIVE, "field_key": key,
                  "expectations": [{"name": "real_email", "predicate": "email LIKE '%@secret.example'"}]})

    result = run_job(spec, tmp_path / "work")

    assert result.status == "succeeded", result.error
    assert (result.rows_written, result.rows_quarantined) == (36, 4)
    assert [(e.name, e.rows_violating) for e in result.expectations] == [("real_email", 0)]  # tested before the hash
    secret = FieldKey.of(key)
    rows = duckdb_connection().execute(f"SELECT * FROM delta_scan('{uri}') ORDER BY id").fetchall()
    columns = [d[0] for d in duckdb_connection().execute(f"SELECT * FROM delta_scan('{uri}') LIMIT 0").description]
    assert "notes" not in columns and {"id", "email", "customer"} <= set(columns)
    emails = {row[columns.index("id")]: row[columns.index("email")] for row in rows}
    assert emails == {i: hmac.new(secret.hmac, f"raw{i % 7}@secret.example".encode(), hashlib.sha256).hexdigest()
                      for i in range(40) if i % 10 != 9}
    assert {row[columns.index("customer")]["ssn"] for row in rows} == {MASK}
    sealed = duckdb_connection().execute(f"SELECT value FROM delta_scan('{uri}__quarantine')").fetchall()
    assert all(bytes(v).startswith(SEALED) for (v,) in sealed)
    assert sorted(open_sealed(secret, bytes(v)) for (v,) in sealed) == sorted(_order(i) for i in range(40) if i % 10 == 9)
    assert _files_hold(tmp_path / "orders", b"@secret.example", b"SSN-", b"private note") == []
    assert _files_hold(tmp_path / "orders__quarantine", b"@secret.example") == []


def test_a_keyed_tables_hashed_key_column_meets_its_changes_and_tombstones(sandbox_kafka, kafka_topic, produce_keyed,
                                                                          tmp_path: Path) -> None:
    """Accounts keyed by email: three changes of each of 4 emails, then a tombstone of the first two."""
    bootstrap, topic, uri = sandbox_kafka.bootstrap_servers, kafka_topic(partitions=1), str(tmp_path / "accounts")

    def change(i: int) -> bytes:
        return cast(bytes, None) if i >= 12 else json.dumps({"email": f"u{i % 4}@secret.example", "id": i}).encode()

    produce_keyed(bootstrap, topic, 14, value=change, key=lambda i: json.dumps({"email": f"u{i % 4 if i < 12 else i - 12}"
                                                                                          "@secret.example"}))
    key = new_field_key()
    spec = _with(make_spec(bootstrap, {topic: {"0": (0, 14)}},
                           {"type": "delta", "uri": uri, "quarantine_uri": f"{uri}__quarantine", "mode": "upsert",
                            "key": ["email"]}, value_format="json", schema="email STRING, id INT"),
                 {"sensitive": [{"field": "email", "action": "hash"}], "field_key": key})

    result = run_job(spec, tmp_path / "work")

    assert result.status == "succeeded", result.error
    digest = {k: hmac.new(FieldKey.of(key).hmac, f"u{k}@secret.example".encode(), hashlib.sha256).hexdigest()
              for k in range(4)}
    table = sorted(duckdb_connection().execute(f"SELECT email, id, _inlet_deleted FROM delta_scan('{uri}')").fetchall())
    assert table == sorted([(digest[0], None, True), (digest[1], None, True), (digest[2], 10, False),
                            (digest[3], 11, False)])
    assert _files_hold(tmp_path / "accounts", b"@secret.example") == []
