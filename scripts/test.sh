#!/usr/bin/env bash
# make test: the lint first (scripts/lint.sh: its findings fail the run before anything starts), then
# start what the suite needs (PostgreSQL, Redis, an S3 emulator, a Spark standalone
# cluster) on loopback, run the whole suite on PostgreSQL, then the database-backed fast suite on
# SQLite (below: which part); stop what was started.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/lint.sh

# Every JVM the suite starts (Spark drivers and engines, the standalone cluster and its executors, the
# Kafka brokers) is short-lived and holds little data: compiled by C1 alone, it saves the C2 compiler's
# work, about a third of the CPU a Spark start takes (a collector of its own would clash with the
# brokers' G1). Measured here: one Spark session and job 28 -> 17-19 CPU-s; tests/spark_jobs/test_ingest_delta.py
# and tests/runs/test_crash_recovery.py 241 -> 199 s (that with the serial collector too); the whole
# PostgreSQL suite 46 min 56 s -> 36 min 43 s. The product's JVMs keep their defaults
# (worker/launch/submit.py chooses its own for a spark-submit that only schedules).
export JDK_JAVA_OPTIONS="-XX:TieredStopAtLevel=1"

source scripts/services.sh
trap stop_started EXIT

# Every Spark driver the suite starts (the warm engines, each spark-submit run, the tests' own
# sessions) maps the classes a Spark start loads from one archive (the JDK's AppCDS, made afresh for
# this JDK and these jars by a small job, scripts/spark_class_archive.py) instead of reading and
# verifying them again. Measured here: a Spark start and small job 21 -> 12 CPU-s; a spark-submit run
# and a warm engine's two runs (tests/spark_jobs/test_ingest_kafka.py[local], one warm engine test)
# 51 -> 43 CPU-s; making the archive costs 36 s. spark-submit passes SPARK_SUBMIT_OPTS to the driver's
# JVM only; a JVM that cannot map the archive says so in one line and starts as before. The product's
# JVMs are left as they are. The archive is made while the services start (they mostly wait).
classes="$INLET_RUN_DIR/spark-classes"
rm -rf "$classes" && mkdir -p "$classes"
SPARK_SUBMIT_OPTS="-XX:ArchiveClassesAtExit=$classes/classes.jsa" PATH="$(pwd)/.venv/bin:$PATH" \
    spark-submit --master "local[2]" scripts/spark_class_archive.py "$classes/out" >"$classes/log" 2>&1 &
archiving=$!

start_postgres
start_redis
start_s3
start_spark_cluster

if wait "$archiving" && [[ -s $classes/classes.jsa ]]; then
    export SPARK_SUBMIT_OPTS="-XX:SharedArchiveFile=$classes/classes.jsa${SPARK_SUBMIT_OPTS:+ $SPARK_SUBMIT_OPTS}"
    echo "services: Spark's classes archived for the suite's drivers ($classes/classes.jsa)"
else
    echo "services: no class archive (the suite's Spark drivers load their classes as usual): see $classes/log"
fi
echo "services: ready after ${SECONDS} s"

PYTEST=(.venv/bin/python -m pytest -p no:cacheprovider -n 2 --durations=15)
# Extra pytest arguments for a local loop, shell-quoted: PYTEST_ARGS='-k offsets'
eval "EXTRA=(${PYTEST_ARGS:-})"

echo "== full suite on PostgreSQL (at ${SECONDS} s) =="
"${PYTEST[@]}" "${EXTRA[@]}"

# SQLite (make demo's and the quick loop's database) again runs every fast test whose SQL is the
# product's: the API's tables, queries, locks, quotas and migrations. Not the suites whose SQL is the
# same CRUD those run, over half this pass's time: the portal (forms and a browser over the same
# services), the contract fuzz (the HTTP contract), the pipeline bodies' validation (refusals, before
# any SQL), webhook deliveries through Redis and a webhook worker process (waits on a silent receiver's
# timeouts; the delivery queue's SQL is tests/webhooks/test_delivery.py's), the egress policy, and the
# secret backends and connection probes.
# `make test-fast` still runs them on SQLite.
echo "== database suite on SQLite (at ${SECONDS} s) =="
INLET_TEST_DATABASE_URL= "${PYTEST[@]}" -m "db and not slow and not real_kafka" -q \
    --ignore=tests/portal --ignore=tests/fuzz --ignore=tests/pipelines/test_validation.py \
    --ignore=tests/webhooks/test_delivery_stack.py --ignore=tests/hostile/test_egress.py \
    --ignore=tests/connections/test_vault_connections.py --ignore=tests/connections/test_secret_orphans.py \
    --ignore=tests/connections/test_connection_probe.py --ignore=tests/connections/test_connection_registry_probe.py \
    "${EXTRA[@]}"
echo "make test: done in ${SECONDS} s"
