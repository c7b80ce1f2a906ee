# fabricmon: the whole user interface. `make demo` and `make test` are the two commands.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.fabricmon-installed
PYTEST_ARGS ?=
DEMO_ARGS ?=

.PHONY: setup system test test-slow lint demo bench bench-drill clean

## setup: the venv with fabricmon and its dev tools, plus what the OS lacks (TimescaleDB, snmp tools)
setup: $(STAMP) system

system:
	@bash scripts/setup-system.sh

$(STAMP): pyproject.toml hatch_build.py collector/_speedups.c store/_copy_binary.c
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[dev]'
	@touch $(STAMP)

## lint: ruff, mypy (strict), the import contracts (lint-imports: pyproject.toml) and the documentation site (mkdocs build --strict, into site/)
lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

## test: setup + lint + type check + the default (non-slow) test suites
test: lint
	$(BIN)/pytest $(PYTEST_ARGS)

## test-slow: the slow suites only
test-slow: setup
	$(BIN)/pytest -m slow $(PYTEST_ARGS)

## demo: the main job on the embedded store
demo: setup
	$(BIN)/fabricmon demo $(DEMO_ARGS)

## bench: benchmarks, JSON on stdout (recorded in docs/benchmarks.md)
bench: setup
	$(BIN)/python -m bench

## bench-drill: the trust drill at 1,024 GPUs (300 faults, 100 benign, 4 at once, seed 1): JSON on stdout
DRILL_ARGS ?= --gpus 1024 --naming mixed --faults 300 --benign 100 --concurrency 4 --seed 1
bench-drill: setup
	@mkdir -p test-artifacts
	$(BIN)/fabricmon drill $(DRILL_ARGS) --report test-artifacts/drill-report.json --json

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache site
