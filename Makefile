# ferry: run `make help` for the targets.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# test processes (pytest-xdist), each with its own services; a file's tests stay in one process, and
# the files sharing a costly service share one (tests/conftest.py), the longest groups first
TEST_WORKERS ?= 3

.DEFAULT_GOAL := help
.PHONY: help install demo test test-unit lint format typecheck bench kafka-start kafka-stop clean

help: ## Show the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  %-12s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP) ## Create .venv and install ferry with its test tools

demo: $(STAMP) ## Start a local Kafka, stream Debezium events with schema changes into Iceberg, show the result
	$(BIN)/python -m ferry.demo

test: $(STAMP) lint typecheck ## Run the whole test suite (starts its own Kafka broker, PostgreSQL, MariaDB)
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

bench: $(STAMP) ## Throughput benchmark against a local broker (prints figures and ratios)
	$(BIN)/python bench/throughput.py

kafka-start: $(STAMP) ## Start a local Kafka broker (prints its address)
	scripts/kafka start

kafka-stop: ## Stop the local Kafka broker
	scripts/kafka stop

clean: ## Remove the virtualenv, caches and local state
	rm -rf $(VENV) var .mypy_cache .ruff_cache .pytest_cache
