"""What a Delta table says about a pipeline's runs: the newest transaction version it committed.

Read with delta-rs, without Spark: it is how a worker tells, after a crash or a kill, whether a run's
data already reached the table (and so its offsets must be committed, not the data written again).
"""

from __future__ import annotations

from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError


def app_id(pipeline_id: object) -> str:
    return f"inlet-pipeline-{pipeline_id}"


def committed_txn_version(table_uri: str, pipeline_id: object) -> int | None:
    """The newest run sequence number committed to ``table_uri`` for this pipeline, if any."""
    try:
        return DeltaTable(table_uri).transaction_version(app_id(pipeline_id))
    except TableNotFoundError:
        return None
