#!/usr/bin/env bash
# `make dist`: the `countersign` CLI as static Linux binaries (musl) for x86_64 and aarch64,
# into dist/ with their SHA-256 sums, so that a laptop, a CI runner or an agent host installs it
# without a checkout or a Rust toolchain (the README's "Install the CLI"). cargo-zigbuild and
# Zig come from PyPI (infra/requirements-dist.txt) into .local/venv; the two musl standard
# libraries come through rustup. The release workflow (.github/workflows/release.yml) runs it on
# a tag and attaches dist/ to the release.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
source infra/lib.sh
venv="$root/.local/venv"
"$root/infra/setup-venv.sh"
ensure_venv "$venv" .dist-requirements "cargo-zigbuild and zig" infra/requirements-dist.txt
export PATH="$venv/bin:$PATH"

targets=(x86_64-unknown-linux-musl aarch64-unknown-linux-musl)
for target in "${targets[@]}"; do
  if ! rustup target list --installed 2>/dev/null | grep -qx "$target"; then
    rustup target add "$target" || {
      echo "make dist: cannot install the $target standard library (rustup target add)" >&2
      exit 1
    }
  fi
done

version=$(cargo metadata --no-deps --format-version 1 \
  | python3 -c 'import json, sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"] == "countersign-cli"))')
rm -rf dist
mkdir -p dist
for target in "${targets[@]}"; do
  cargo zigbuild --release --locked -p countersign-cli --bin countersign --target "$target"
  cp "target/$target/release/countersign" "dist/countersign-$version-$target"
done
(cd dist && sha256sum countersign-* > SHA256SUMS)

# Each is what its name says: a static executable for its architecture.
for target in "${targets[@]}"; do
  file="dist/countersign-$version-$target"
  machine=$(python3 - "$file" <<'PY'
import struct, sys
with open(sys.argv[1], "rb") as f:
    head = f.read(64)
if head[:4] != b"\x7fELF":
    sys.exit(f"{sys.argv[1]}: not an ELF file")
machine = struct.unpack_from("<H", head, 18)[0]
print({62: "x86_64", 183: "aarch64"}.get(machine, str(machine)))
PY
)
  [ "$machine" = "${target%%-*}" ] || { echo "make dist: $file is $machine, not ${target%%-*}" >&2; exit 1; }
  if readelf -l "$file" 2>/dev/null | grep -q "INTERP"; then
    echo "make dist: $file asks for a dynamic loader: not static" >&2
    exit 1
  fi
done
echo
ls -l dist | awk 'NR > 1 { printf "%-50s %6.1f MiB\n", $9, $5 / 1048576 }'
cat dist/SHA256SUMS
