#!/usr/bin/env bash
# `make lint`, in two parts `make test` runs apart: `rust` (rustfmt and clippy: Rust only) and
# `template` (cfn-lint on the SAM template: it needs the virtualenv). No argument: both.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
parts=("${@:-rust template}")
for part in ${parts[*]}; do
  case "$part" in
    rust)
      cargo fmt --all -- --check
      cargo clippy --workspace --all-targets -- -D warnings
      ;;
    template)
      "$root/infra/setup-venv.sh" test
      "$root/.local/venv/bin/cfn-lint" infra/template.yaml
      ;;
    *) echo "usage: infra/lint.sh [rust] [template]" >&2; exit 2 ;;
  esac
done
