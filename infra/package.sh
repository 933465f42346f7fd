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

functions=(create decide webhook dispatch executor)
packages=()
for f in "${functions[@]}"; do packages+=(-p "countersign-$f"); done
cargo lambda build --release --arm64 --output-format zip "${packages[@]}"

printf '\n%-10s %12s %12s\n' function bootstrap zip
for f in "${functions[@]}"; do
  zip="target/lambda/$f/bootstrap.zip"
  [ -f "$zip" ] || { echo "missing $zip" >&2; exit 1; }
  unzipped=$(python3 -c "import zipfile,sys; print(sum(i.file_size for i in zipfile.ZipFile(sys.argv[1]).infolist()))" "$zip")
  printf '%-10s %10.1f MiB %10.1f MiB\n' "$f" "$(echo "$unzipped/1048576" | bc -l)" "$(echo "$(stat -c %s "$zip")/1048576" | bc -l)"
done
