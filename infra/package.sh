#!/usr/bin/env bash
# `make package`: every function built with cargo-lambda for arm64 (provided.al2023) into
# target/lambda/<function>/bootstrap.zip, and each zip's size. cargo-lambda and its Zig
# toolchain come from PyPI into .local/; the aarch64 standard library comes through rustup.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
"$root/infra/setup-venv.sh"
venv="$root/.local/venv"
stamp="$venv/.package-requirements"
if ! cmp -s infra/requirements-package.txt "$stamp"; then
  echo "Installing cargo-lambda and zig into $venv ..." >&2
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r infra/requirements-package.txt
  cp infra/requirements-package.txt "$stamp"
fi
export PATH="$venv/bin:$PATH"

if ! rustup target list --installed 2>/dev/null | grep -qx aarch64-unknown-linux-gnu; then
  rustup target add aarch64-unknown-linux-gnu || {
    echo "cannot install the aarch64-unknown-linux-gnu standard library (rustup target add): packaging for Lambda's arm64 needs it" >&2
    exit 1
  }
fi

functions=(create decide webhook dispatch executor sweeper reconciler)
packages=()
for f in "${functions[@]}"; do packages+=(-p "countersign-$f"); done
cargo lambda build --release --arm64 --output-format zip "${packages[@]}"

python3 - "${functions[@]}" <<'PY'
import os, sys, zipfile
print(f"\n{'function':<10} {'bootstrap':>12} {'zip':>10}")
for f in sys.argv[1:]:
    path = f"target/lambda/{f}/bootstrap.zip"
    if not os.path.exists(path):
        sys.exit(f"missing {path}")
    unzipped = sum(i.file_size for i in zipfile.ZipFile(path).infolist())
    print(f"{f:<10} {unzipped / 2**20:>8.1f} MiB {os.path.getsize(path) / 2**20:>6.1f} MiB")
PY
