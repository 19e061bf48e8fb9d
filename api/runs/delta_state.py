"""What a Delta table says about a pipeline's runs: the newest transaction version it committed.

Read with delta-rs, without Spark: it is how a worker tells, after a crash or a kill, whether a run's
data already reached the table (and so its offsets must be committed, not the data written again).
"""

from __future__ import annotations

import logging

from deltalake.exceptions import DeltaError, TableNotFoundError

from spark_jobs.public import Store

log = logging.getLogger(__name__)


def app_id(pipeline_id: object) -> str:
    return f"inlet-pipeline-{pipeline_id}"


def committed_txn_version(store: Store, table_uri: str, pipeline_id: object) -> int | None:
    """The newest run sequence number committed to ``table_uri`` for this pipeline, if any.

    None too when the table cannot be read (object storage out of reach): the job checks the table
    again before it writes anything, and reports the storage failure as its own.
    """
    try:
        return store.delta_table(table_uri).transaction_version(app_id(pipeline_id))
    except TableNotFoundError:
        return None
    except (DeltaError, OSError) as exc:
        log.warning("cannot read %s to tell whether it holds a run: %s", table_uri, type(exc).__name__)
        return None
