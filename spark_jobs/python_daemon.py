"""The Python daemon Spark forks its Python workers from, with what a task imports imported once, first.

Spark starts one daemon per executor (``spark.python.daemon.module``) and forks a worker from it for
each task slot. An idle worker lives a minute, so a run more than a minute after the last one gets
fresh workers. Each of them imported the task's modules again: 1.3 s of a core here (pyspark's SQL
modules, pyarrow, confluent-kafka, msgspec, fastavro, Polars). Forked from this daemon, a worker
finds them already imported.

Some of these imports start threads: OpenBLAS's (numpy), jemalloc's background threads (pyarrow,
Polars) and Polars' spill cleanup. A fork copies none of them, and each library is made for that:
jemalloc and OpenBLAS take their locks around a fork (``pthread_atfork``) and start their threads
again in the child, and Polars' query threads start at its first query, in the worker. Every
local Spark task in the suite runs in a worker forked this way. A module that fails to import
here is left for the task to import, and to fail in with its own error.

``worker/launch/submit.py`` sets this daemon for local masters only, with the launch's
``--py-files`` zip first on its path: it imports ``spark_jobs`` from the snapshot the driver runs,
not from the checkout a deploy may have changed since. A cluster's executors get ``spark_jobs``
from ``--py-files`` only when a task starts, after the daemon has started.
"""

from __future__ import annotations

import gc
import importlib
import sys
import zipimport

# The modules a task of each target imports (each with what it imports), as Spark's own daemon
# imports its worker module before it forks.
TASK_MODULES = (
    "pyspark.worker",
    "pandas",  # pyspark's Arrow exchange imports it in a task
    "confluent_kafka",
    "spark_jobs.kafka_source",
    "spark_jobs.delta_tables.direct_write",
    "spark_jobs.delta_tables.changes",
    "spark_jobs.targets.kafka",
    "spark_jobs.formats.json_values",
    "spark_jobs.formats.wire",
    "fastavro",
    "polars",
)


def preload() -> None:
    """Imports the task modules, then freezes what they made: a worker's garbage collection (Spark's
    daemon runs one after each task) no longer walks it, nor writes to the pages it shares."""
    for name in TASK_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:  # the task meets it itself; the daemon must start (nothing on stdout: its port goes there)
            continue
    _forget_zip_finders()
    gc.freeze()


def _forget_zip_finders() -> None:
    """A worker's first task puts the job's files on its path, and pyspark's worker then calls
    ``importlib.invalidate_caches()``. On Python 3.10-3.12 every zip importer cached by then reads
    its archive's directory again (3.13 only drops it, for the next import to read): one per package
    imported from pyspark.zip (12-16 here, 28,000 entries read), 0.24 s of a core in every new worker,
    before its first task starts. Left out of the cache, an importer is made again when an import
    needs it, from the directory already read."""
    for path, finder in list(sys.path_importer_cache.items()):
        if isinstance(finder, zipimport.zipimporter):
            del sys.path_importer_cache[path]


if __name__ == "__main__":
    from pyspark import daemon

    preload()
    daemon.manager()
