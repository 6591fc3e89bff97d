# The two commands of the README's quick start: `make demo` and `make test`.
# Both create the virtual environment and install everything on a fresh machine.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# Users bring their own torch; the setup path pins the CPU build that lies on this machine class's disk.
TORCH_SPEC ?= torch==2.13.0
DEMO_OUT ?= out/demo
# Bytecode is written (a shell may set PYTHONDONTWRITEBYTECODE): without it every test module is re-compiled and
# assertion-rewritten on each run, and each `tracekit` subprocess a test starts compiles the package again.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: demo test test-fast venv browser clean bench gate lint format

# What the demo runs: the package and torch (no test extra: neither HTA nor JupyterLab).
$(VENV)/.demo-installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e '.[collect]'
	touch $@

# Everything the tests and the linters use, on top of it.
$(VENV)/.installed: $(VENV)/.demo-installed
	$(PY) -m pip install -q -e '.[collect,test,lint]'
	touch $@

venv: $(VENV)/.installed

# Headless Chromium for the HTML report tests (Debian's package); skipped quietly when not root.
browser:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) || echo "chromium not installed: browser tests will fail"; }

demo: $(VENV)/.demo-installed
	$(VENV)/bin/tracekit demo --out $(DEMO_OUT)

test: venv browser
	$(PY) -m pytest -q -p no:cacheprovider tests

# The developer's fast lane: unit and architecture tests not marked slow (no multi-process runs, no HTA, no
# sweeps). `make test` stays the whole suite and is what CI runs.
test-fast: venv
	$(PY) -m pytest -q -p no:cacheprovider -m "not slow" tests/unit tests/architecture

# Format, lint and types: ruff format (checked, never rewritten here), ruff, then mypy (configured in pyproject.toml).
LINT_PATHS = tracekit tests benchmarks scripts
lint: venv
	$(VENV)/bin/ruff format --check $(LINT_PATHS)
	$(VENV)/bin/ruff check $(LINT_PATHS)
	$(VENV)/bin/mypy

# What `make lint` checks, applied: the formatter and ruff's safe fixes.
format: venv
	$(VENV)/bin/ruff format $(LINT_PATHS)
	$(VENV)/bin/ruff check --fix $(LINT_PATHS)

# The project's own overlap gate: a real TP+SP run on CPU checked against the committed baseline
# (tests/integration/test_ci_gate.py proves both directions with the same arguments).
GATE_RUN = --workload tp-sp --tp 2 --layers 1 --seq 256 --hidden 512 --heads 8 --steps 4 --overlap
GATE_CHECK = --baseline tests/baselines/tp-sp-cpu-ws2.json --metric overlap_ratio --max-regression 70% \
	--min-delta-ratio 0.05 --budget 'overlap_ratio>=0.1'
gate: venv
	rm -rf out/ci/tp-sp
	$(VENV)/bin/tracekit run $(GATE_RUN) --out out/ci/tp-sp
	$(VENV)/bin/tracekit check out/ci/tp-sp $(GATE_CHECK) --junit out/ci/gate.xml --markdown out/ci/gate.md

bench: venv
	$(PY) benchmarks/side_by_side.py $(BENCH_ARGS)  # BENCH_ARGS=--full: the full sizes (tens of minutes)

clean:
	rm -rf $(VENV) out .pytest_cache
