#!/usr/bin/env bash
# make test: the lint first (scripts/lint.sh: its findings fail the run before anything starts), then
# start what the suite needs (PostgreSQL, Redis, an S3 emulator, a Spark standalone
# cluster) on loopback, run the whole suite on PostgreSQL, then the database-backed fast suite on
# SQLite; stop what was started.
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

start_postgres
start_redis
start_s3
start_spark_cluster

PYTEST=(.venv/bin/python -m pytest -p no:cacheprovider -n 2 --durations=15)
# Extra pytest arguments for a local loop, shell-quoted: PYTEST_ARGS='-k offsets'
eval "EXTRA=(${PYTEST_ARGS:-})"

echo "== full suite on PostgreSQL =="
"${PYTEST[@]}" "${EXTRA[@]}"

echo "== database suite on SQLite =="
INLET_TEST_DATABASE_URL= "${PYTEST[@]}" -m "db and not slow and not real_kafka" -q "${EXTRA[@]}"
