#!/usr/bin/env bash
# Which tests fail without a grant: for each grant given (as the template writes it, "Role action
# resource"), the API and crash suites run against a local AWS that withholds it
# (MOTO_IAM_WITHOUT), and the tests that failed are listed. A grant whose removal fails no test
# is one no test depends on. Not part of `make test` (a few minutes per grant).
#
#   infra/iam_mutation.sh "CreateRole dynamodb:Query EventsTable.Arn" ...
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
[ $# -gt 0 ] || { echo "usage: infra/iam_mutation.sh 'Role action resource' ..." >&2; exit 2; }
"$root/infra/setup-venv.sh" test >/dev/null
cargo build --quiet --workspace --bins --tests || exit 1
export COUNTERSIGN_PYTHON="$root/.local/venv/bin/python"
export RUST_TEST_THREADS=${RUST_TEST_THREADS:-3}
for grant in "$@"; do
  log=$(mktemp)
  MOTO_IAM_WITHOUT="$grant" cargo test --quiet -p countersign-tests --test api --test crash \
    --no-fail-fast >"$log" 2>&1
  failed=$(grep -E '^    [a-z0-9_:]+$' "$log" | sed 's/^ *//' | sort -u)
  echo "without $grant:"
  if [ -n "$failed" ]; then echo "$failed" | sed 's/^/  fails: /'; else echo "  no test fails"; fi
  rm -f "$log"
done
