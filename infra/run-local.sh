#!/usr/bin/env bash
# `make run`: moto (serialized, on MOTO_PORT) and the local runner (on PORT), in the foreground.
# With AWS_ENDPOINT_URL already set, that endpoint is used and no moto is started.
# Ctrl-C stops everything this script started.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
"$root/infra/setup-venv.sh"

features=()
[ -n "${FEATURES:-}" ] && features=(--features "$FEATURES")
# Build before starting moto, so a long first build does not keep an idle moto waiting.
if [ ! -x "$root/target/debug/countersign-local" ]; then
  echo "Building the local runner (cargo build -p countersign-local): the first build compiles" \
    "some 320 crates, several minutes on 2 cores; later runs take seconds." >&2
fi
cargo build --quiet -p countersign-local "${features[@]}"

pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -z "${AWS_ENDPOINT_URL:-}" ]; then
  moto_port="${MOTO_PORT:-4566}"
  if (exec 3<>"/dev/tcp/127.0.0.1/$moto_port") 2>/dev/null; then
    echo "MOTO_PORT $moto_port is already in use: stop what listens there or set MOTO_PORT." >&2
    exit 1
  fi
  # The local deployment's parameters: the executor may resume state machines and durable
  # functions named countersign-* (infra/local_iam/gate.py, docs/LOCAL_AWS.md).
  resume='{"ResumeStateMachineArns": "arn:aws:states:us-east-1:123456789012:stateMachine:countersign-*",'
  resume+=' "ResumeFunctionArns": "arn:aws:lambda:us-east-1:123456789012:function:countersign-*"}'
  MOTO_IAM_PARAMETERS="${MOTO_IAM_PARAMETERS:-$resume}" "$root/.local/venv/bin/python" "$root/infra/moto_server.py" "$moto_port" &
  pids+=($!)
  for _ in $(seq 1 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$moto_port") 2>/dev/null && break
    kill -0 "${pids[0]}" 2>/dev/null || { echo "moto failed to start" >&2; exit 1; }
    sleep 0.1
  done
  export AWS_ENDPOINT_URL="http://127.0.0.1:$moto_port"
  export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test
  echo "moto (serialized) on $AWS_ENDPOINT_URL" >&2
fi
export AWS_REGION="${AWS_REGION:-us-east-1}"

"$root/target/debug/countersign-local" &
pids+=($!)
wait "${pids[-1]}"
