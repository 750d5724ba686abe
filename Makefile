# groupfit: common developer tasks.
#
#   make venv    create .venv and install requirements-dev.txt (redone only when it changes)
#   make build   build the Rust workspace (release); the CLI lands in target/release/groupfit
#   make test    Rust tests, then the Python suite that drives the CLI
#   make demo    run scripts/demo.sh
#   make bench   run benchmarks/linear.sh
#   make bench-mlp  run benchmarks/mlp.sh (installs PyTorch into bench-out/torch-venv on demand)
#   make fmt     format the Rust code
#   make clean   remove build output and test caches (keeps .venv)

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.stamp
CARGO  ?= cargo

.PHONY: venv build test test-rust test-python demo bench bench-mlp fmt clean

venv: $(STAMP)

$(STAMP): requirements-dev.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --disable-pip-version-check -q -r requirements-dev.txt
	touch $@

build:
	$(CARGO) build --release --workspace

test: venv build
	$(CARGO) test --release --workspace
	$(VENV)/bin/pytest -q tests/python

# The two halves alone, for quicker iteration.
test-rust:
	$(CARGO) test --release --workspace

test-python: venv build
	$(VENV)/bin/pytest -q tests/python

demo: venv build
	bash scripts/demo.sh

bench: venv build
	bash benchmarks/linear.sh

bench-mlp: venv build
	bash benchmarks/mlp.sh

fmt:
	$(CARGO) fmt --all

clean:
	$(CARGO) clean
	rm -rf .pytest_cache .hypothesis bench-out
	find tests -name __pycache__ -type d -prune -exec rm -rf {} +
