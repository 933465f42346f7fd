#!/usr/bin/env bash
# `make deploy-check`: the README's deploy steps short of `sam deploy`, offline (no AWS
# credentials): `sam validate --lint` (cfn-lint) and `sam build` on infra/template.yaml, then a
# check that every AWS::Serverless::Function in the template was built as an arm64 (aarch64) ELF
# `bootstrap` in .aws-sam/build/<LogicalId>/. The SAM CLI, cargo-lambda and zig come from PyPI
# into their own virtualenv, .local/sam-venv (the SAM CLI's boto3/botocore pins stay out of moto's
# .local/venv); the aarch64 standard library comes through rustup. No telemetry is sent.
set -euo pipefail
start=$SECONDS
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
source infra/lib.sh
venv="$root/.local/sam-venv"
ensure_venv "$venv" .requirements "the SAM CLI, cargo-lambda and zig" \
  infra/requirements-deploy.txt infra/requirements-package.txt
ensure_aarch64_target

# As the README's deploy section says.
export PATH="$venv/bin:$PATH" SAM_CLI_TELEMETRY=0
sam validate --lint --template-file infra/template.yaml
sam build --beta-features --template-file infra/template.yaml

# The SAM CLI's own YAML loader reads the template's short-form intrinsics (!Ref, !GetAtt).
python - "$((SECONDS - start))" <<'PY'
import os, struct, sys
from samcli.yamlhelper import yaml_parse

EM_AARCH64 = 0xB7
template = yaml_parse(open("infra/template.yaml").read())
functions = [name for name, r in template["Resources"].items() if r.get("Type") == "AWS::Serverless::Function"]
if not functions:
    sys.exit("deploy-check: no AWS::Serverless::Function in infra/template.yaml")

def problem(path):
    if not os.path.isfile(path):
        return "missing"
    with open(path, "rb") as f:
        head = f.read(20)
    if len(head) < 20 or head[:4] != b"\x7fELF":
        return "not an ELF file"
    if head[4] != 2:
        return "not a 64-bit ELF"
    # e_machine: bytes 18-19, in the byte order EI_DATA (byte 5) names (1 little, 2 big).
    machine = struct.unpack("<H" if head[5] == 1 else ">H", head[18:20])[0]
    if machine != EM_AARCH64:
        return f"built for machine {machine:#x}, not aarch64 ({EM_AARCH64:#x})"
    return None

width = max(len(f) for f in functions)
print(f"\n{'function':<{width}} {'bootstrap':>12}")
failures = []
for name in functions:
    path = f".aws-sam/build/{name}/bootstrap"
    why = problem(path)
    size = f"{os.path.getsize(path) / 2**20:>8.1f} MiB" if os.path.isfile(path) else f"{'-':>12}"
    print(f"{name:<{width}} {size}" + (f"  FAILED: {why}" if why else ""))
    if why:
        failures.append(f"{path}: {why}")
if failures:
    sys.exit("deploy-check: failed:\n  " + "\n  ".join(failures))
print(f"deploy-check: {len(functions)} functions built for arm64 in {sys.argv[1]}s")
PY
