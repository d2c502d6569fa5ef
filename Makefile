# Two commands for a fresh machine: `make demo` and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
# The CPU build of torch on machines without an NVIDIA GPU (CI included).
TORCH ?= $(shell if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then echo torch; else echo torch==2.13.0; fi)

.PHONY: demo test lint setup setup-test clean-venv

$(VENV)/.ready: pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet "$(TORCH)"
	$(PIP) install --quiet -e .
	touch $@

$(VENV)/.ready-test: $(VENV)/.ready
	$(PIP) install --quiet -e ".[dev]"
	touch $@

setup: $(VENV)/.ready
setup-test: $(VENV)/.ready-test

demo: $(VENV)/.ready
	$(VENV)/bin/celeris-complete infill examples/demo.py

test: $(VENV)/.ready-test
	$(VENV)/bin/ruff check celeris_complete tests
	$(PY) -m pytest -q

clean-venv:
	rm -rf $(VENV)
