# The two set-up commands of the README:
#   make up    installs ripple into .venv and runs its main job on the embedded defaults
#   make test  installs ripple with its test tools into .venv (and the S3 clients rclone and
#              s3cmd from apt, see .ci/install-clients) and runs the whole test suite
# Versions are pinned by constraints.txt (regenerate with `make constraints`).

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: up test clients lint constraints clean

up: $(VENV)/.installed
	$(BIN)/ripple up

test: $(VENV)/.installed-dev clients
	$(BIN)/pytest $(PYTEST_ARGS)

# rclone and s3cmd, which tests/clients drives (aws-cli comes with the dev dependencies)
clients:
	sh .ci/install-clients

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy

$(BIN)/python:
	$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "ripple needs Python >= 3.11"'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: $(BIN)/python pyproject.toml constraints.txt
	$(BIN)/pip install --quiet -c constraints.txt -e .
	touch $@

$(VENV)/.installed-dev: $(BIN)/python pyproject.toml constraints.txt
	$(BIN)/pip install --quiet -c constraints.txt -e '.[dev]'
	touch $@ $(VENV)/.installed

constraints:
	$(BIN)/pip freeze --exclude-editable | grep -v '^-e' > constraints.txt

clean:
	rm -rf $(VENV)
