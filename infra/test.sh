#!/usr/bin/env bash
# `make test`: everything CI runs, on a fresh machine as on a warm one. Installing (the
# virtualenv with moto, the OpenID provider from npm, Debian's Chromium) is mostly downloading,
# and the local AWS's own patches are tested in Python: both go on in the background while Rust
# lints and compiles, which is CPU. Then the template is linted and every Rust test binary runs; one summary line
# counts them all. A missing dependency fails the run; nothing is skipped.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
logs=$(mktemp -d)
# On any exit, what runs in the background finishes first (an apt install is never cut off).
trap 'wait; rm -rf "$logs"' EXIT
python="$root/.local/venv/bin/python"

fail() {
  echo "make test: $*" >&2
  exit 1
}

# IAM is always checked here: each function calls the local AWS as its role in
# infra/template.yaml (infra/local_iam). The switches for a debugging run are refused.
[ "${MOTO_IAM:-on}" = "on" ] || fail "MOTO_IAM=${MOTO_IAM}: make test always checks IAM; unset it"
[ -z "${MOTO_IAM_WITHOUT:-}" ] || fail "MOTO_IAM_WITHOUT is set: make test runs with every grant; unset it"

# The virtualenv, then the tests of the patched moto the whole suite runs on
# (infra/moto_patches.py).
(
  "$root/infra/setup-venv.sh" test || exit 1
  "$python" -m unittest discover -s "$root/infra/tests" -v >"$logs/python" 2>&1
  echo $? >"$logs/python.status"
) >"$logs/venv" 2>&1 &
venv=$!
# The OpenID Provider the sign-in tests start (oidc-provider from npm, into .local/oidc).
"$root/infra/setup-oidc.sh" >"$logs/oidc" 2>&1 &
oidc=$!
# Chromium for the browser tests. As root it installs in the background too; otherwise sudo
# may need to ask for a password, so it runs first, in the foreground.
if [ "$(id -u)" -eq 0 ]; then
  "$root/infra/setup-browser.sh" >"$logs/browser" 2>&1 &
  browser=$!
else
  "$root/infra/setup-browser.sh" || fail "installing Chromium failed"
  browser=
fi

echo "make test: installing moto and the test tools (.local/venv), the OpenID provider (.local/oidc) and Chromium in the background;" \
  "linting and building every crate and test (the first build takes about 5 minutes on 2 cores)" >&2
"$root/infra/lint.sh" rust || fail "lint (rustfmt, clippy) failed"
# One build of everything: the functions' real binaries (the smoke, CLI and long-lived tests
# run them) and, with --tests, the libraries' unit tests and every integration test — not the
# thin mains, which have none (`test = false`), so no empty harness is built for each.
cargo build --workspace --bins --tests --quiet || fail "the build failed"

wait "$venv"
venv_status=$?
cat "$logs/venv"
[ "$venv_status" -eq 0 ] || fail "installing the virtualenv failed (above)"
wait "$oidc"
oidc_status=$?
cat "$logs/oidc"
[ "$oidc_status" -eq 0 ] || fail "installing the OpenID provider (.local/oidc) failed (above)"
if [ -n "$browser" ]; then
  wait "$browser"
  browser_status=$?
  cat "$logs/browser"
  [ "$browser_status" -eq 0 ] || fail "installing Chromium failed (above)"
fi
"$root/infra/lint.sh" template || fail "cfn-lint found problems in infra/template.yaml"
built=$SECONDS

cat "$logs/python"
py_status=$(cat "$logs/python.status")
py_ran=$(awk '/^Ran [0-9]+ tests? in/ { print $2 }' "$logs/python")
py_passed=0 py_failed=0
if [ "$py_status" -eq 0 ]; then py_passed=${py_ran:-0}; else py_failed=${py_ran:-1}; fi

# Many tests spend most of their time waiting (visibility timeouts, leases, status delays), so
# one thread more than the cores runs the suite sooner; more than 4 only queue up at moto,
# which serves one request at a time. RUST_TEST_THREADS, when set, decides.
export RUST_TEST_THREADS=${RUST_TEST_THREADS:-$(($(nproc) + 1 < 4 ? $(nproc) + 1 : 4))}
# --show-output: the figures tests print (fault counts, timings) are in the log even when they pass.
# The local AWS records every grant the calls use and every call it refuses (MOTO_IAM_USAGE), for
# the least-privilege check after the tests.
COUNTERSIGN_PYTHON="$python" MOTO_IAM_USAGE="$logs/iam" \
  cargo test --workspace --tests --no-fail-fast -- --show-output 2>&1 | tee "$logs/rust"
status=${PIPESTATUS[0]}
# Least privilege both ways: every call granted, every grant used (infra/iam_coverage.py).
"$python" "$root/infra/iam_coverage.py" "$logs/iam" | tee "$logs/iam.out"
iam_status=${PIPESTATUS[0]}
if [ "$iam_status" -eq 0 ]; then py_passed=$((py_passed + 1)); else py_failed=$((py_failed + 1)); fi
awk -v p="$py_passed" -v f="$py_failed" \
    '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "\ntests: %d passed, %d failed\n", p, f }' "$logs/rust"
echo "make test: lint, build and installs $built s; the tests $((SECONDS - built)) s"
[ "$py_status" -eq 0 ] || exit "$py_status"
[ "$iam_status" -eq 0 ] || exit "$iam_status"
exit "$status"
