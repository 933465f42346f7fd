# Sourced by the infra scripts: the steps they share.

# ensure_venv VENV STAMP WHAT REQUIREMENTS...: a Python virtualenv at VENV with the requirement
# files installed from PyPI. Reused as it is when VENV/STAMP holds exactly those files' contents
# (the stamp is written after a successful install, so a failed one is retried).
ensure_venv() {
  local venv=$1 stamp=$1/$2 what=$3
  shift 3
  if [ -x "$venv/bin/python" ] && cat "$@" | cmp -s - "$stamp"; then
    return 0
  fi
  command -v python3 >/dev/null || { echo "python3 is required (for $what)" >&2; return 1; }
  echo "Installing $what into $venv ..." >&2
  python3 -m venv "$venv"
  local reqs=()
  for f in "$@"; do reqs+=(-r "$f"); done
  "$venv/bin/pip" install --quiet --disable-pip-version-check "${reqs[@]}"
  cat "$@" >"$stamp"
}

# ensure_aarch64_target: the aarch64 standard library (through rustup), which building for
# Lambda's arm64 needs. Fails with a clear message on a machine that cannot fetch it.
ensure_aarch64_target() {
  if ! rustup target list --installed 2>/dev/null | grep -qx aarch64-unknown-linux-gnu; then
    rustup target add aarch64-unknown-linux-gnu || {
      echo "cannot install the aarch64-unknown-linux-gnu standard library (rustup target add): building for Lambda's arm64 needs it" >&2
      return 1
    }
  fi
}
