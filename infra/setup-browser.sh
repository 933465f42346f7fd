#!/usr/bin/env bash
# Installs Debian's Chromium and its WebDriver (chromium, chromium-driver) for the browser
# tests, when they are absent. Idempotent.
set -euo pipefail
if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
  exit 0
fi
command -v apt-get >/dev/null || { echo "the browser tests need chromium and chromedriver (Debian: apt-get install chromium chromium-driver)" >&2; exit 1; }
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "Installing chromium and chromium-driver (Debian packages) for the browser tests ..." >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null
