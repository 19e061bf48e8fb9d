#!/usr/bin/env bash
# The lint, run by make test (scripts/test.sh) before the suite: ruff's checks as configured in
# pyproject.toml ([tool.ruff.lint]), and gofmt and go vet on the Terraform provider (terraform/).
# Any finding fails the command, and with it make test.
# Fix what ruff can fix safely: .venv/bin/ruff check --fix PATH
# (The type check and the import contracts run in the suite: tests/core/test_layering.py.)
set -euo pipefail
cd "$(dirname "$0")/.."

# The whole repository (ruff skips what .gitignore names, .venv included).
echo "== ruff check"
.venv/bin/ruff check --output-format concise .

echo "== gofmt, go vet (terraform/)"
command -v go >/dev/null || export PATH="$PWD/.venv/bin:$PATH"  # as scripts/terraform.sh
unformatted=$(cd terraform && "$(go env GOROOT)/bin/gofmt" -l .)
if [[ -n $unformatted ]]; then
    echo "not gofmt'd (gofmt -w them): $unformatted" >&2
    exit 1
fi
(cd terraform && go vet ./...)
