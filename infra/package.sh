#!/usr/bin/env bash
# `make package`: every function built with cargo-lambda for arm64 (provided.al2023) into
# target/lambda/<function>/bootstrap.zip, and each zip's size. cargo-lambda and its Zig
# toolchain come from PyPI into .local/; the aarch64 standard library comes through rustup.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
source infra/lib.sh
"$root/infra/setup-venv.sh"
venv="$root/.local/venv"
ensure_venv "$venv" .package-requirements "cargo-lambda and zig" infra/requirements-package.txt
export PATH="$venv/bin:$PATH"
ensure_aarch64_target

functions=(api read decide webhook dispatch executor sweeper reconciler)
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
