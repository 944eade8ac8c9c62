# Two commands set everything up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.sdc-installed
# Core tests also run against pandas 2.2 in a second environment.
VENV22 ?= .venv-pandas22
PY22 := $(VENV22)/bin/python
STAMP22 := $(VENV22)/.sdc-installed
PIP_FLAGS ?= -q --disable-pip-version-check

.PHONY: demo test test-core test-pandas22 lab lint bench clean setup

setup: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install $(PIP_FLAGS) --upgrade pip
	$(PY) -m pip install $(PIP_FLAGS) -e ".[test]" jupyterlab
	@touch $(STAMP)

$(STAMP22): pyproject.toml
	@test -x $(PY22) || $(PYTHON) -m venv $(VENV22)
	$(PY22) -m pip install $(PIP_FLAGS) --upgrade pip
	$(PY22) -m pip install $(PIP_FLAGS) -e ".[test]" "pandas>=2.2,<2.3"
	@touch $(STAMP22)

demo: $(STAMP)
	$(PY) -m sdc_magic.cli run demo_notebooks/*.ipynb --out build/demo

test: $(STAMP) lint test-pandas22
	$(PY) -m pytest -q

test-pandas22: $(STAMP22)
	$(PY22) -c "import pandas; print('core tests on pandas', pandas.__version__)"
	$(PY22) -m pytest -q -m "not notebook and not browser"

lint: $(STAMP)
	$(VENV)/bin/ruff check sdc_magic tests benchmarks

lab: $(STAMP)
	$(VENV)/bin/jupyter lab demo_notebooks

bench: $(STAMP)
	$(PY) benchmarks/capture.py
	$(PY) benchmarks/protect.py

clean:
	rm -rf build dist .pytest_cache
