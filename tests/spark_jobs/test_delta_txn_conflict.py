"""What exactly-once leans on when two attempts of one run race (a worker taken over while its job
still runs): delta-rs refuses the second of two commits carrying the same app transaction from the
same snapshot, and a writer that loads the table after the first commit sees the version."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from deltalake.exceptions import CommitFailedError
from deltalake.transaction import AddAction

APP_ID = "inlet-pipeline-race"


def _add(table_dir: Path, name: str, value: int) -> AddAction:
    path = table_dir / name
    pq.write_table(pa.table({"x": [value]}), path)
    return AddAction(name, os.path.getsize(path), {}, int(time.time() * 1000), True, '{"numRecords":1}')


def _txn(version: int) -> CommitProperties:
    return CommitProperties(app_transactions=[Transaction(app_id=APP_ID, version=version)])


def test_two_attempts_of_one_run_commit_once(tmp_path: Path) -> None:
    write_deltalake(str(tmp_path), pa.table({"x": [0]}))
    first, second = DeltaTable(str(tmp_path)), DeltaTable(str(tmp_path))  # both loaded before either commits

    first.create_write_transaction([_add(tmp_path, "a.parquet", 1)], mode="append", schema=first.schema(),
                                   commit_properties=_txn(7))
    with pytest.raises(CommitFailedError):
        second.create_write_transaction([_add(tmp_path, "b.parquet", 2)], mode="append", schema=second.schema(),
                                        commit_properties=_txn(7))

    table = DeltaTable(str(tmp_path))
    assert sorted(table.to_pyarrow_table().column("x").to_pylist()) == [0, 1]
    assert table.transaction_version(APP_ID) == 7  # what a later attempt checks before writing anything
