# Two entry points for a fresh machine: `make demo` and `make test`. Both create .venv and install everything.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The CPU build of torch. Where no local wheel exists, point pip at PyTorch's CPU wheel index, e.g.
#   make test TORCH_PIP_ARGS="--index-url <pytorch-cpu-index>"
# On a GPU machine, install the CUDA build of torch into .venv first; the pin below is then already met.
TORCH_SPEC ?= torch==2.13.0
TORCH_PIP_ARGS ?=

.PHONY: install browser demo test test-fast lint clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install -q $(TORCH_PIP_ARGS) "$(TORCH_SPEC)"
	$(BIN)/python -m pip install -q -e '.[dev,notebooks]'
	$(BIN)/python -m ipykernel install --prefix $(VENV) --name python3 >/dev/null
	touch $@

install: $(BIN)/.installed browser

# The report viewer's browser test (tests/fertility/present/test_viewer.py) needs Chromium and a font with Bengali
# glyphs from the system's packages; CI runs as root on Debian. Skipped when present, or when not root.
browser:
	@if command -v chromium >/dev/null 2>&1 && fc-list :lang=bn 2>/dev/null | grep -q .; then \
		echo "chromium and a Bengali font: already installed"; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
			chromium fonts-beng-extra; \
	else \
		echo "chromium or a Bengali font is missing and apt-get as root is not available:" \
			"tests/fertility/present/test_viewer.py will skip its browser test"; \
	fi

demo: install
	PATH="$(abspath $(BIN)):$$PATH" bash scripts/demo.sh

test: install
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q

# For development: everything but the tests marked slow (the full suite is what CI runs).
test-fast: install
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q -m "not slow"

lint: install
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) demo_out .pytest_cache
