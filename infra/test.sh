#!/usr/bin/env bash
# `make test`'s test run: every test binary, then one summary line over all of them.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# The smoke tests run the functions' real binaries: build them first (same features as the tests).
cargo build --workspace --bins --quiet
COUNTERSIGN_PYTHON="$root/.local/venv/bin/python" cargo test --workspace --all-targets --no-fail-fast 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "\ntests: %d passed, %d failed\n", p, f }' "$log"
exit "$status"
