#!/usr/bin/env bash
# scripts/opentofu.sh VERSION: OpenTofu VERSION built unmodified from the Go module proxy, once per
# machine, into ${INLET_TOOLS_CACHE:-~/.cache/inlet}/opentofu/VERSION/tofu; prints that path.
# A fresh build takes ~6-8 min on 2 cores (a relink from a warm Go build cache ~1 min).
set -euo pipefail
version=$1
cache=${INLET_TOOLS_CACHE:-$HOME/.cache/inlet}/opentofu/$version
binary=$cache/tofu
if [[ -x $binary ]] && TF_CLI_CONFIG_FILE=/dev/null "$binary" version 2>/dev/null | grep -qx "OpenTofu v$version"; then
    echo "$binary"
    exit 0
fi
echo "setup: building OpenTofu $version from the Go module proxy into $cache (once per machine)" >&2
module=$(cd /tmp && GOFLAGS=-mod=mod go mod download -json "github.com/opentofu/opentofu@v$version" |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["Dir"])')
work=$(mktemp -d)
trap 'chmod -R u+w "$work"; rm -rf "$work"' EXIT
cp -r "$module" "$work/src" && chmod -R u+w "$work/src"
mkdir -p "$cache"
# version.dev=no: the release's own version string, as the project's release builds set it.
(cd "$work/src" && CGO_ENABLED=0 go build -trimpath \
    -ldflags "-s -w -X github.com/opentofu/opentofu/version.dev=no" -o "$binary.partial" ./cmd/tofu) >&2
mv "$binary.partial" "$binary"
echo "$binary"
