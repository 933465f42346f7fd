#!/usr/bin/env bash
# Installs the OpenID Provider the sign-in tests run (panva's oidc-provider from npm, pinned in
# infra/oidc/package-lock.json; started by tests/support/oidc.rs through infra/oidc/provider.mjs)
# into .local/oidc, with `npm ci` from the committed lock. Idempotent: does nothing when
# .local/oidc/.lock already holds exactly the committed package.json and lock (the stamp is
# written after a successful install, so a failed one is retried). `make test` runs it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
src=$root/infra/oidc
dest=$root/.local/oidc
stamp=$dest/.lock

if [ -d "$dest/node_modules/oidc-provider" ] && cat "$src/package.json" "$src/package-lock.json" | cmp -s - "$stamp"; then
  exit 0
fi
need="make test needs Node.js (20 or newer) and npm for the OpenID provider the sign-in tests run: apt install nodejs npm"
command -v node >/dev/null || { echo "$need (no node on PATH)" >&2; exit 1; }
command -v npm >/dev/null || { echo "$need (no npm on PATH)" >&2; exit 1; }
major=$(node -p 'process.versions.node.split(".")[0]')
[ "$major" -ge 20 ] || { echo "$need (node is $(node --version))" >&2; exit 1; }

echo "Installing the OpenID provider (oidc-provider, npm) into $dest ..." >&2
mkdir -p "$dest"
rm -f "$stamp"
cp "$src/package.json" "$src/package-lock.json" "$dest/"
npm ci --prefix "$dest" --no-audit --no-fund --loglevel=error
cat "$src/package.json" "$src/package-lock.json" >"$stamp"
