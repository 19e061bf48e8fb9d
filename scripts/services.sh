# Sourced by scripts/test.sh: start PostgreSQL, Redis, an S3 emulator and a Spark standalone cluster
# on loopback for this run only, and stop exactly what was started here.
# shellcheck shell=bash

INLET_RUN_DIR=${INLET_RUN_DIR:-$(pwd)/.inlet/run}
_STARTED=()

_free_port() {
    "$(pwd)/.venv/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

start_postgres() {
    local bindir dir port
    bindir=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
    dir="$INLET_RUN_DIR/pg"
    port=$(_free_port)
    rm -rf "$dir" && mkdir -p "$dir"
    local as=()
    if [[ $(id -u) -eq 0 ]]; then
        chown postgres:postgres "$dir"
        as=(runuser -u postgres --)
    fi
    "${as[@]}" "$bindir/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 >/dev/null
    "${as[@]}" "$bindir/pg_ctl" -D "$dir/data" -l "$dir/log" -w \
        -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off -c max_connections=200" start >/dev/null
    _STARTED+=("postgres:$bindir:$dir")
    export INLET_TEST_DATABASE_URL="postgresql+psycopg://postgres@127.0.0.1:$port/postgres"
    echo "services: PostgreSQL on 127.0.0.1:$port"
}

start_redis() {
    local port dir
    port=$(_free_port)
    dir="$INLET_RUN_DIR/redis"
    mkdir -p "$dir"
    redis-server --bind 127.0.0.1 --port "$port" --daemonize yes --save '' --appendonly no \
        --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" --dir "$dir"
    for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
    _STARTED+=("redis:$dir")
    export INLET_TEST_REDIS_URL="redis://127.0.0.1:$port/0"
    echo "services: Redis on 127.0.0.1:$port"
}

_wait_for_port() {  # port, seconds, what
    local _
    for _ in $(seq $(($2 * 10))); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.1
    done
    echo "services: $3 did not listen on 127.0.0.1:$1 within $2 s" >&2
    return 1
}

# moto's S3 server: an emulator (no real object store installs here); it honours If-None-Match on
# PUT, which delta-rs's commits rely on.
start_s3() {
    local port dir
    port=$(_free_port)
    dir="$INLET_RUN_DIR/s3"
    mkdir -p "$dir"
    .venv/bin/moto_server -H 127.0.0.1 -p "$port" >"$dir/moto.log" 2>&1 &
    echo $! >"$dir/pid"
    _STARTED+=("pid:$dir/pid")
    _wait_for_port "$port" 30 "moto_server"
    export INLET_TEST_S3_ENDPOINT="http://127.0.0.1:$port"
    echo "services: S3 emulator (moto) on 127.0.0.1:$port"
}

# A Spark standalone cluster from pyspark's own launcher: one master, one worker of 2 cores.
# Its processes get no AWS_* settings: executors reach object storage only through the job.
start_spark_cluster() {
    local port ui worker_ui dir spark_home
    port=$(_free_port) ui=$(_free_port) worker_ui=$(_free_port)
    dir="$INLET_RUN_DIR/spark"
    rm -rf "$dir" && mkdir -p "$dir/work"
    spark_home=$(.venv/bin/python -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')
    local env=(env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY -u AWS_ENDPOINT_URL -u AWS_REGION
               SPARK_HOME="$spark_home" PATH="$(pwd)/.venv/bin:$PATH" SPARK_LOG_DIR="$dir" SPARK_WORKER_DIR="$dir/work"
               SPARK_LOCAL_DIRS="$dir/work")
    "${env[@]}" spark-class org.apache.spark.deploy.master.Master --host 127.0.0.1 --port "$port" \
        --webui-port "$ui" >"$dir/master.log" 2>&1 &
    echo $! >"$dir/master.pid"
    _STARTED+=("pid:$dir/master.pid")
    _wait_for_port "$port" 60 "the Spark master"
    "${env[@]}" spark-class org.apache.spark.deploy.worker.Worker --host 127.0.0.1 --cores 2 --memory 2g \
        --webui-port "$worker_ui" "spark://127.0.0.1:$port" >"$dir/worker.log" 2>&1 &
    echo $! >"$dir/worker.pid"
    _STARTED+=("pid:$dir/worker.pid")
    local _
    for _ in $(seq 600); do
        grep -q "Successfully registered with master" "$dir/worker.log" 2>/dev/null && break
        sleep 0.1
    done
    grep -q "Successfully registered with master" "$dir/worker.log" \
        || { echo "services: the Spark worker did not register: $(tail -5 "$dir/worker.log")" >&2; return 1; }
    export INLET_TEST_SPARK_MASTER="spark://127.0.0.1:$port"
    echo "services: Spark standalone cluster at spark://127.0.0.1:$port (1 worker, 2 cores)"
}

stop_started() {
    local entry kind
    for entry in "${_STARTED[@]}"; do
        kind=${entry%%:*}
        case $kind in
            postgres)
                IFS=: read -r _ bindir dir <<<"$entry"
                local as=()
                [[ $(id -u) -eq 0 ]] && as=(runuser -u postgres --)
                "${as[@]}" "$bindir/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
                ;;
            redis)
                dir=${entry#redis:}
                [[ -f $dir/redis.pid ]] && kill "$(cat "$dir/redis.pid")" 2>/dev/null || true
                ;;
            pid)
                local pidfile=${entry#pid:}
                [[ -f $pidfile ]] && kill "$(cat "$pidfile")" 2>/dev/null || true
                ;;
        esac
    done
    _STARTED=()
}
