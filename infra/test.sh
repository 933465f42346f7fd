#!/usr/bin/env bash
# `make test`'s test run: the local AWS's own patches (Python), then every Rust test binary, then
# one summary line over all of them.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
log=$(mktemp)
trap 'rm -f "$log"' EXIT
python="$root/.local/venv/bin/python"

# The patched moto the whole suite runs on (infra/moto_patches.py) has tests of its own.
"$python" -m unittest discover -s "$root/infra/tests" -v 2>&1 | tee "$log"
py_status=${PIPESTATUS[0]}
py_ran=$(awk '/^Ran [0-9]+ tests? in/ { print $2 }' "$log")
py_passed=0 py_failed=0
if [ "$py_status" -eq 0 ]; then py_passed=${py_ran:-0}; else py_failed=${py_ran:-1}; fi

# The smoke tests run the functions' real binaries: build them first (same features as the tests).
cargo build --workspace --bins --quiet
# --show-output: the figures tests print (fault counts, timings) are in the log even when they pass.
COUNTERSIGN_PYTHON="$python" cargo test --workspace --all-targets --no-fail-fast -- --show-output 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
awk -v p="$py_passed" -v f="$py_failed" \
    '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "\ntests: %d passed, %d failed\n", p, f }' "$log"
[ "$py_status" -eq 0 ] || exit "$py_status"
exit "$status"
