# The README's two commands. Both install what they need on a fresh machine (a Python
# virtualenv with moto under .local/, git-ignored; for the tests also Debian's chromium and
# chromium-driver) and reuse it when present.

.PHONY: run test lint venv browser package deploy-check bench

run:
	infra/run-local.sh

test: venv browser lint
	infra/test.sh

lint: venv
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings
	.local/venv/bin/cfn-lint infra/template.yaml

venv:
	infra/setup-venv.sh

browser:
	infra/setup-browser.sh

package:
	infra/package.sh

# Not part of `make test`: sam validate --lint and sam build, as the README's deploy section runs
# them, and a check that every function was built for arm64. Offline, no AWS credentials.
deploy-check:
	infra/deploy-check.sh

bench: venv
	cargo build --release -p countersign-api -p countersign-decide -p countersign-webhook -p countersign-dispatch -p countersign-executor
	COUNTERSIGN_PYTHON="$(CURDIR)/.local/venv/bin/python" cargo run --profile bench-tool -p countersign-tests --bin bench -- $(BENCH_ARGS)
