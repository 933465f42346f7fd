#!/usr/bin/env bash
# Creates (or refreshes) the local Python virtualenv under .local/venv, from PyPI. `make run`
# needs only moto (infra/requirements.txt); `setup-venv.sh test` (for `make test`, `make lint`)
# adds the test tools (infra/requirements-test.txt: cfn-lint for the template, the Standard
# Webhooks library the example receiver verifies with, schemathesis for the API contract).
# Idempotent: each part does nothing when it already matches its requirements file.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/infra/lib.sh"
ensure_venv "$root/.local/venv" .requirements "moto, the local AWS" "$root/infra/requirements.txt"
if [ "${1:-}" = test ]; then
  ensure_venv "$root/.local/venv" .requirements-test "the test tools (cfn-lint, standardwebhooks, schemathesis)" \
    "$root/infra/requirements-test.txt"
fi
