# Two entry points for a fresh machine: `make demo` (the pipeline's packages only) and `make test` (everything).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The CPU build of torch. Where no local wheel exists, point pip at PyTorch's CPU wheel index, e.g.
#   make test TORCH_PIP_ARGS="--index-url <pytorch-cpu-index>"
# On a GPU machine, install the CUDA build of torch into .venv first; the pin below is then already met.
TORCH_SPEC ?= torch==2.13.0
TORCH_PIP_ARGS ?=
# The oldest transformers pyproject.toml declares, with the huggingface_hub and tokenizers it needs, in a folder of its
# own: tests/pretrain/test_export_compat.py loads an export with it in a subprocess (PYTHONPATH first).
COMPAT := $(VENV)/compat/transformers-oldest
COMPAT_SPECS := transformers==4.57.6 'huggingface_hub<1.0' 'tokenizers>=0.22,<0.23'

.PHONY: install install-dev browser demo test test-fast lint clean

# The pipeline alone: the core and the notebook extra (what `make demo` needs), no system package.
$(BIN)/.core: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install -q $(TORCH_PIP_ARGS) "$(TORCH_SPEC)"
	$(BIN)/python -m pip install -q -e '.[notebooks]'
	$(BIN)/python -m ipykernel install --prefix $(VENV) --name python3 >/dev/null
	touch $@

# What the tests add: the dev extra (pytest, ruff, hypothesis, playwright, Ray, lm-eval), the oldest transformers the
# project declares beside the newest (the export is loaded with both), and the browser below.
$(BIN)/.installed: $(BIN)/.core
	$(BIN)/python -m pip install -q -e '.[dev,notebooks]'
	$(BIN)/python -m pip install -q --no-deps --target $(COMPAT) $(COMPAT_SPECS)
	touch $@

install: $(BIN)/.core

install-dev: $(BIN)/.installed browser

# The report's and the explorer's browser tests (tests/fertility/present/) need Chromium and a font with Bengali
# glyphs: Debian's packages, installed as root where apt-get exists; elsewhere those tests skip, saying why.
browser:
	@if command -v chromium >/dev/null 2>&1 && fc-list :lang=bn 2>/dev/null | grep -q .; then \
		echo "chromium and a Bengali font: already installed"; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
			chromium fonts-beng-extra; \
	else \
		echo "chromium or a Bengali font is missing and apt-get as root is not available:" \
			"the browser tests of tests/fertility/present will skip"; \
	fi

demo: install
	PATH="$(abspath $(BIN)):$$PATH" bash scripts/demo.sh

test: install-dev
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q

# For development: everything but the tests marked slow (the full suite is what CI runs).
test-fast: install-dev
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q -m "not slow"

lint: install-dev
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) demo_out .pytest_cache
