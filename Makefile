# The two set-up commands (README): `make repro` runs the pipeline on the default data,
# `make test` runs the test suite. Both create .venv on first use.
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
export PATH := $(abspath $(BIN)):$(PATH)

.PHONY: install repro snakemake test bench clean

install: $(STAMP)

$(STAMP): pyproject.toml requirements.lock
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q -c requirements.lock -e '.[test]'
	touch $@

repro: $(STAMP)
	$(BIN)/dvc repro

snakemake: $(STAMP)
	$(BIN)/snakemake --cores 2

test: $(STAMP)
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python benchmarks/loader.py
	$(BIN)/python benchmarks/train.py

clean:
	rm -rf data/source data/index data/shards data/embeddings models logs metrics .snakemake .linefuse
