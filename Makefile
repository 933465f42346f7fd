# The README's two commands. Both install what they need on a fresh machine (a Python
# virtualenv with moto under .local/, git-ignored) and reuse it when present.

.PHONY: run test lint unit venv

run:
	infra/run-local.sh

test: venv lint
	infra/test.sh

lint:
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings

venv:
	infra/setup-venv.sh
