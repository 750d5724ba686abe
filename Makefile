# groupfit: common developer tasks.
#
#   make venv    create .venv and install requirements-dev.txt (redone only when it changes)
#   make build   build the Rust workspace (release); the CLI lands in target/release/groupfit
#   make wheel   build the Python package (crates/groupfit-py + python/groupfit) into .venv
#   make test    Rust tests, then the Python suite (CLI, Python API, Ray runner)
#   make browser install headless Chromium from Debian's packages if missing (the report test)
#   make test-build  the CLI and the Rust test binaries, built once with the tests' features
#   make demo    run scripts/demo.sh
#   make bench   run benchmarks/linear.sh
#   make bench-mlp  run benchmarks/mlp.sh (installs PyTorch into bench-out/torch-venv on demand)
#   make bench-ray  run benchmarks/ray.sh (the Ray runner against ray-tasks)
#   make bench-strategies  run benchmarks/strategies.sh (every strategy in three regimes, every family)
#   make bench-hierarchy  run benchmarks/hierarchy.sh (shrinkage modes against scikit-lego on flights)
#   make fmt     format the Rust code
#   make clean   remove build output and test caches (keeps .venv)

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.stamp
CARGO  ?= cargo

.PHONY: venv build wheel browser test test-build test-rust test-python demo bench bench-mlp bench-ray bench-strategies bench-hierarchy fmt clean

venv: $(STAMP)

$(STAMP): requirements-dev.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --disable-pip-version-check -q -r requirements-dev.txt
	touch $@

build:
	$(CARGO) build --release --workspace

# The extension module, built in release mode and installed (editable) into .venv.
wheel: venv
	VIRTUAL_ENV=$(abspath $(VENV)) $(PY) -m maturin develop --release -q

# The test binaries and the CLI (target/release/groupfit, which the Python
# suite runs), built once with the tests' feature set: `make build` first
# would compile the engine a second time, with the features of a build
# without dev-dependencies.
test-build:
	$(CARGO) test --release --workspace --no-run

# The report test renders the demo report in headless Chromium.
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  SUDO=$$(test "$$(id -u)" = 0 || echo sudo); \
	  $$SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q chromium; }

test: venv browser test-build wheel
	$(CARGO) test --release --workspace
	$(PY) -m pytest -q tests/python

# The two halves alone, for quicker iteration.
test-rust:
	$(CARGO) test --release --workspace

test-python: venv browser build wheel
	$(PY) -m pytest -q tests/python

demo: venv build
	bash scripts/demo.sh

bench: venv build
	bash benchmarks/linear.sh

bench-mlp: venv build
	bash benchmarks/mlp.sh

bench-ray: venv wheel
	bash benchmarks/ray.sh

bench-strategies: venv build
	bash benchmarks/strategies.sh

bench-hierarchy: venv wheel
	bash benchmarks/hierarchy.sh

fmt:
	$(CARGO) fmt --all

clean:
	$(CARGO) clean
	rm -rf .pytest_cache .hypothesis bench-out
	find tests -name __pycache__ -type d -prune -exec rm -rf {} +
