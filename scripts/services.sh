# Sourced by scripts/test.sh and the demo: start PostgreSQL and Redis on loopback for this run only,
# and stop exactly what was started here.
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
        esac
    done
    _STARTED=()
}
