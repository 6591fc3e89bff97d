# The two commands of the README's quick start: `make demo` and `make test`.
# Both create the virtual environment and install everything on a fresh machine.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# Users bring their own torch; the setup path pins the CPU build that lies on this machine class's disk.
TORCH_SPEC ?= torch==2.13.0
DEMO_OUT ?= out/demo

.PHONY: demo test venv browser clean bench

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e '.[test]'
	touch $@

venv: $(VENV)/.installed

# Headless Chromium for the HTML report tests (Debian's package); skipped quietly when not root.
browser:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) || echo "chromium not installed: browser tests will fail"; }

demo: venv
	$(VENV)/bin/tracekit demo --out $(DEMO_OUT)

test: venv browser
	$(PY) -m pytest -q -p no:cacheprovider tests

bench: venv
	$(PY) benchmarks/run.py

clean:
	rm -rf $(VENV) out .pytest_cache
