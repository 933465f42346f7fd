#!/usr/bin/env bash
# Creates (or refreshes) the local Python virtualenv with moto's server, from PyPI.
# Idempotent: does nothing when .local/venv already matches infra/requirements.txt.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/.local/venv"
stamp="$venv/.requirements"
if [ -x "$venv/bin/python" ] && cmp -s "$root/infra/requirements.txt" "$stamp"; then
  exit 0
fi
command -v python3 >/dev/null || { echo "python3 is required (for moto, the local AWS)" >&2; exit 1; }
echo "Installing moto into $venv ..." >&2
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check -r "$root/infra/requirements.txt"
cp "$root/infra/requirements.txt" "$stamp"
