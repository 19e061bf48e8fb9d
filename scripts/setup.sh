#!/usr/bin/env bash
# Idempotent machine + virtualenv setup: Debian packages the stack needs, then .venv at the repo root.
set -euo pipefail
cd "$(dirname "$0")/.."

# chromium: the portal's browser tests drive Debian's build (playwright cannot download its own here).
# nodejs, npm: the tests' Azurite (ADLS emulator) and OIDC token server (OAUTHBEARER); strace: the test
# that no process asks a cloud metadata address for credentials watches connections with it.
# maven: fetches Spark's Kafka, Avro and Delta jars (below).
DEBIAN_PACKAGES=(redis-server postgresql openjdk-17-jre-headless chromium nodejs npm strace maven)

missing=()
for pkg in "${DEBIAN_PACKAGES[@]}"; do
    # Java may come from elsewhere than Debian's package (the machine image ships one).
    [[ $pkg == openjdk-* ]] && command -v java >/dev/null && continue
    # So may node and npm (one package from NodeSource, two from Debian).
    [[ $pkg == nodejs || $pkg == npm ]] && command -v node >/dev/null && command -v npm >/dev/null && continue
    [[ $pkg == maven ]] && command -v mvn >/dev/null && continue
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
    echo "setup: installing Debian packages: ${missing[*]}"
    SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

PYTHON=${PYTHON:-python3.11}
command -v "$PYTHON" >/dev/null || PYTHON=python3
# A .venv without pip is one whose creation was cut short (Ctrl-C): made again.
if [[ ! -x .venv/bin/python || ! -x .venv/bin/pip ]]; then
    echo "setup: creating .venv"
    "$PYTHON" -m venv --clear .venv
fi

# Reinstall only when the dependency list changed.
stamp=.venv/.inlet-installed
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [[ ! -f $stamp || $(cat "$stamp") != "$want" ]]; then
    echo "setup: installing Python dependencies into .venv"
    # uv resolves and installs the same versions as pip in a quarter of the time (2 min 35 s -> 40 s here).
    .venv/bin/pip install -q --disable-pip-version-check uv==0.13.8
    # uv reads no pip configuration: a machine's local wheels and index, where set, are passed on.
    UV_FIND_LINKS=${UV_FIND_LINKS:-${PIP_FIND_LINKS:-}} UV_INDEX_URL=${UV_INDEX_URL:-${PIP_INDEX_URL:-}} \
        UV_EXTRA_INDEX_URL=${UV_EXTRA_INDEX_URL:-${PIP_EXTRA_INDEX_URL:-}} \
        .venv/bin/uv pip install -q --python .venv/bin/python -e '.[dev]'
    echo "$want" > "$stamp"
fi

# Spark's Kafka source, spark-avro and delta-spark with their dependencies (~23 MB of jars from Maven
# Central, spark_jobs/jars.py), fetched again only when their POM changes: later runs need no network.
jars=.inlet/jars
want=$(sha256sum deploy/jars/pom.xml | cut -d' ' -f1)
if [[ $(cat "$jars/.pom-sha256" 2>/dev/null) != "$want" ]]; then
    echo "setup: fetching Spark's Kafka, Avro and Delta jars from Maven Central into $jars"
    rm -rf "$jars.partial"
    mkdir -p .inlet
    if ! mvn -B -f deploy/jars/pom.xml dependency:copy-dependencies -DoutputDirectory="$PWD/$jars.partial" >.inlet/mvn.log 2>&1; then
        tail -n 40 .inlet/mvn.log >&2
        exit 1
    fi
    echo "$want" > "$jars.partial/.pom-sha256"
    rm -rf "$jars"
    mv "$jars.partial" "$jars"
fi

# The Terraform provider (Go, terraform/) into a filesystem mirror, and the OpenTofu CLIs its tests
# drive, built from the Go module proxy once per machine (scripts/terraform.sh).
bash scripts/terraform.sh
