#!/usr/bin/env bash
# Creates (or refreshes) the local Python virtualenv with moto's server, from PyPI.
# Idempotent: does nothing when .local/venv already matches infra/requirements.txt.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/infra/lib.sh"
ensure_venv "$root/.local/venv" .requirements "moto, the local AWS" "$root/infra/requirements.txt"
