# The two newcomer commands are `make demo` and `make test`; both set up .venv first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# The default tests run in this many processes (pytest-xdist); 2 suits the 2-core CI machine.
TEST_WORKERS ?= 2

.PHONY: setup demo test test-slow lint

$(BIN)/.installed: setup.cfg pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet --constraint constraints.txt --editable ".[test]"
	touch $@

setup: $(BIN)/.installed

demo: setup
	$(BIN)/python -m training.demo

test: setup
	$(BIN)/python -m pytest --numprocesses=$(TEST_WORKERS)

test-slow: setup
	$(BIN)/python -m pytest -m slow

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
