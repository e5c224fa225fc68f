# The two commands a newcomer needs: `make reproduce` and `make test`. Each creates .venv when it
# is missing (or when pyproject.toml changed) and installs jaxlab with its test extras.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.jaxlab-installed
PROFILE ?= quick
PYTEST_WORKERS ?= 2
# worksteal: an idle worker takes queued tests from the busy one, so the long notebook and
# smoke-experiment tests do not leave one core idle at the end of the run.

.PHONY: reproduce test test-slow bench bench-bo-peers notebooks docs lint format clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,bench,docs]'
	touch $(STAMP)

reproduce: $(STAMP)
	$(BIN)/jaxlab reproduce --profile $(PROFILE)

test: $(STAMP)
	@start=$$(date +%s); \
	$(BIN)/python -m pytest -m "not slow" -n $(PYTEST_WORKERS) --dist worksteal --durations=15 tests; rc=$$?; \
	echo "make test: test suite took $$(( $$(date +%s) - start )) s"; exit $$rc

test-slow: $(STAMP)
	$(BIN)/python -m pytest -m slow tests

bench: $(STAMP)
	$(BIN)/python -m benchmarks

# jaxlab's single-GP EI against BoTorch (issue 17). torch is several GB from the package index, so
# only this target installs the peers-bo extra; make test and make bench never do.
bench-bo-peers: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[peers-bo]'
	$(BIN)/python -m benchmarks.peers_botorch

# The API reference in docs/_build/html, warnings as errors. Executed notebooks (make notebooks)
# are rendered as pages when present, never re-executed.
docs: $(STAMP)
	$(BIN)/sphinx-build -W --keep-going -q -b html docs docs/_build/html
	@echo "make docs: open docs/_build/html/index.html"

notebooks: $(STAMP)
	JAXLAB_NOTEBOOK_PROFILE=quick $(BIN)/python -m jaxlab._src.notebooks notebooks

lint: $(STAMP)
	$(BIN)/ruff check jaxlab tests benchmarks notebooks docs/conf.py
	$(BIN)/ruff format --check jaxlab tests benchmarks notebooks docs/conf.py

format: $(STAMP)
	$(BIN)/ruff format jaxlab tests benchmarks notebooks
	$(BIN)/ruff check --fix jaxlab tests benchmarks notebooks

clean:
	rm -rf $(VENV) results .pytest_cache docs/_build docs/api docs/notebooks docs/index.md
