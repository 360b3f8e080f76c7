# Two entry points for a fresh machine: `make demo` and `make test`. Both create .venv and install everything.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The CPU build of torch. Where no local wheel exists, point pip at PyTorch's CPU wheel index, e.g.
#   make test TORCH_PIP_ARGS="--index-url <pytorch-cpu-index>"
# On a GPU machine, install the CUDA build of torch into .venv first; the pin below is then already met.
TORCH_SPEC ?= torch==2.13.0
TORCH_PIP_ARGS ?=

.PHONY: install demo test test-fast lint clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install -q $(TORCH_PIP_ARGS) "$(TORCH_SPEC)"
	$(BIN)/python -m pip install -q -e '.[dev,notebooks]'
	$(BIN)/python -m ipykernel install --prefix $(VENV) --name python3 >/dev/null
	touch $@

install: $(BIN)/.installed

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
