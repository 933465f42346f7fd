# The README's two commands. Both install what they need on a fresh machine (a Python
# virtualenv under .local/, git-ignored: moto for `make run`; for the tests also cfn-lint,
# schemathesis, standardwebhooks, Debian's chromium and chromium-driver and, from npm, the OpenID
# provider the sign-in tests run, under .local/oidc) and reuse it. `make test` installs while Rust compiles
# (infra/test.sh).

.PHONY: run test lint venv oidc browser package dist deploy-check bench

run:
	infra/run-local.sh

test:
	infra/test.sh

lint:
	infra/lint.sh

venv:
	infra/setup-venv.sh

# The OpenID Provider the sign-in tests run (oidc-provider from npm, into .local/oidc).
oidc:
	infra/setup-oidc.sh

browser:
	infra/setup-browser.sh

package:
	infra/package.sh

# The CLI as static Linux binaries (x86_64 and aarch64, musl) with SHA-256 sums, into dist/.
dist:
	infra/dist.sh

# Not part of `make test`: sam validate --lint and sam build, as the README's deploy section runs
# them, and a check that every function was built for arm64. Offline, no AWS credentials.
deploy-check:
	infra/deploy-check.sh

bench: venv
	cargo build --release -p countersign-api -p countersign-decide -p countersign-webhook -p countersign-dispatch -p countersign-executor
	cargo build -p countersign-local
	COUNTERSIGN_PYTHON="$(CURDIR)/.local/venv/bin/python" cargo run --profile bench-tool -p countersign-tests --bin bench -- $(BENCH_ARGS)
