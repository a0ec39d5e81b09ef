# `make lab` and `make test` each set up .venv from nothing first (CPU PyTorch before anything else).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# A CPU build of torch. Where this pin would pull a CUDA build, point pip at a CPU index:
#   make lab TORCH_PIP_ARGS="torch --index-url <PyTorch's CPU wheel index>"
TORCH_PIP_ARGS ?= torch==2.13.0
STAMP := $(VENV)/.setup-done

.PHONY: setup lab test lint html clean

setup: $(STAMP)

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/pip install $(TORCH_PIP_ARGS)
	$(BIN)/pip install -e ".[test,dev]"
	touch $@

lab: setup
	$(BIN)/jupyter lab notebooks/

test: setup
	$(BIN)/ruff check .
	$(BIN)/python -m pytest --nbval --nbval-current-env tests notebooks

lint: setup
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) _site
